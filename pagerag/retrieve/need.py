"""The evidence-need classifier: a multinomial logistic model over the question's embedding and a
few wording cues, fitted on the GraphRAG-Bench questions of the 15 training books
(`python -m pagerag.train.need`; question types give the labels: Fact Retrieval -> local, Complex
Reasoning -> complex, Contextual Summarize and Creative Generation -> global). The packaged
model is `need_model.json`.

The cues (CUES) are inputs whose weights are fitted; whether they are used at all is chosen by
leave-one-training-book-out macro accuracy over the three classes (1,542 questions, best C of
the grid each way): the embedding alone 0.706 (accuracy 0.739), with the cues 0.727 (0.757),
better on 11 of the 15 books and worse on 3. What carries the gain, measured the same way:
RELATIONAL_CUE and the two shape cues (several sentences, log of the word count) give 0.724 on
their own, and leaving out any one of GLOBAL_CUE, NESTED_CUE, FACT_CUE or CREATIVE_CUE moves
the figure by at most 0.003 (NESTED_CUE fires on 3 of the 1,542 questions).

The training data does not tell a relational question from a multi-hop one, so the model has
three classes; `need_of` names a complex question by its wording: multi-hop when it is a
statement then a question or a nested description ("the X of the Y who…"), relational otherwise.
That is a name, not a decision: the ranker reads the three class probabilities, retrieval reads
the need only to tell a global question, and a question of several sentences has each searched
on its own whatever its need (analyse.question_parts).
"""
from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..text.sentences import split_sentences

CLASSES = ("local", "complex", "global")
MODEL_FILE = Path(__file__).with_name("need_model.json")

# Wording cues: features of the model (their weights are fitted), not rules that decide.
GLOBAL_CUE = re.compile(
    r"\b(overall|over the course of|throughout|as a whole|(whole|entire) (book|story|novel|journey)|"
    r"main (themes?|ideas?|points?|characters?|events?)|themes?|summari[sz]e|summary|in general|recurring|"
    r"moral (of|does)|central (idea|conflict|theme)|what is the (book|story|novel) (mostly )?about|"
    r"significance|evolve|develop(s|ed|ment)?|change(s|d)? (over|throughout))\b",
    re.IGNORECASE,
)
RELATIONAL_CUE = re.compile(
    r"\b(relationship|related|relation to|in relation|connected|connection|connects?|linked|"
    r"with respect to|acquainted|how does \w+(?: \w+)? (treat|regard|feel about)|(brother|sister|father|"
    r"mother|son|daughter|wife|husband|uncle|aunt|nephew|niece|cousin|friend|employer|master) of)\b",
    re.IGNORECASE,
)
# "the X of the Y who/that…": a nested description the answer has to resolve in two steps
NESTED_CUE = re.compile(r"\bthe \w+(?: \w+)? of the \w+(?: \w+)? (who|whom|that|which|whose)\b", re.IGNORECASE)
# A single fact asked outright: a number, a date, a place, a name
FACT_CUE = re.compile(
    r"^(according to [^,]+, )?(how (many|much|long|late|old|far|often|tall)|in what year|what year|on what date|"
    r"(when|where) (did|does|do|is|was|were|will|would|had|has)|what is the name|what (colou?r|time|date|day|kind|"
    r"sort|type|size)|which (year|day|month)|who (is|was|were))\b",
    re.IGNORECASE,
)
CREATIVE_CUE = re.compile(r"\b(imagine|write|retell|compose|diary|letter|poem|newspaper|as if you)\b", re.IGNORECASE)
CUES = ("global_cue", "relational_cue", "nested_cue", "fact_cue", "creative_cue", "sentences", "log_words")


def cue_features(question: str) -> np.ndarray:
    """The wording cues of a question, in CUES order."""
    words = len(question.split())
    return np.array([
        float(bool(GLOBAL_CUE.search(question))), float(bool(RELATIONAL_CUE.search(question))),
        float(bool(NESTED_CUE.search(question))), float(bool(FACT_CUE.search(question))),
        float(bool(CREATIVE_CUE.search(question))), float(len(split_sentences(question)) >= 2),
        math.log1p(words),
    ], dtype=np.float64)


def model_inputs(question: str, question_vec: np.ndarray, use_cues: bool = True) -> np.ndarray:
    vec = np.asarray(question_vec, dtype=np.float64).ravel()
    return np.concatenate([vec, cue_features(question)]) if use_cues else vec


@dataclass
class NeedModel:
    classes: tuple[str, ...]
    weights: np.ndarray  # (classes, inputs)
    bias: np.ndarray
    mean: np.ndarray  # standardisation of the inputs
    scale: np.ndarray
    use_cues: bool
    info: dict

    def probabilities(self, question: str, question_vec: np.ndarray) -> dict[str, float]:
        x = (model_inputs(question, question_vec, self.use_cues) - self.mean) / self.scale
        logits = self.weights @ x + self.bias
        p = np.exp(logits - logits.max())
        p /= p.sum()
        return {c: round(float(v), 4) for c, v in zip(self.classes, p)}

    def to_json(self) -> dict:
        return {"classes": list(self.classes), "use_cues": self.use_cues, "cues": list(CUES),
                "weights": np.round(self.weights, 6).tolist(), "bias": np.round(self.bias, 6).tolist(),
                "mean": np.round(self.mean, 6).tolist(), "scale": np.round(self.scale, 6).tolist(), "info": self.info}

    @classmethod
    def from_json(cls, data: dict) -> "NeedModel":
        return cls(tuple(data["classes"]), np.asarray(data["weights"], np.float64), np.asarray(data["bias"], np.float64),
                   np.asarray(data["mean"], np.float64), np.asarray(data["scale"], np.float64),
                   bool(data["use_cues"]), dict(data.get("info", {})))


@functools.lru_cache(maxsize=2)
def load_need_model(path: str = str(MODEL_FILE)) -> NeedModel:
    from ..errors import ConfigError

    try:
        return NeedModel.from_json(json.loads(Path(path).read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(f"{path}: the need model is unreadable ({exc}); reinstall pagerag") from None


def need_of(question: str, probabilities: dict[str, float]) -> tuple[str, str]:
    """(need, reason): the most probable class, a complex question named by its wording
    (multi-hop or relational: a name shown to the user, read by nothing downstream)."""
    best = max(probabilities, key=probabilities.get)
    shown = ", ".join(f"{c} {p:.2f}" for c, p in sorted(probabilities.items(), key=lambda kv: -kv[1]))
    if best != "complex":
        return best, f"fitted classifier: {shown}"
    if len(split_sentences(question)) >= 2 or NESTED_CUE.search(question):
        return "multi-hop", f"fitted classifier: {shown}; several sentences or a nested description"
    return "relational", f"fitted classifier: {shown}"
