"""What a question asks about, read without an LLM: its named things and its other content words
(the asked-for attribute).

The lexical features of the sentence ranker and of the sufficiency model (sentences.py,
sufficiency.py) are built from this reading; nothing here decides anything.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..text.names import find_names
from ..text.words import FRAME_WORDS, NUMBER_WORDS, RELATION_WORDS, STOPWORDS, WORD, stem

# --------------------------------------------------------------------------------------------
# The question


@dataclass
class QuestionTerms:
    """A question read for the features: named things and attribute words."""

    question: str
    names: list[str] = field(default_factory=list)  # capitalised runs: "Tiny Tim", "Marley's Ghost"
    name_tokens: list[list[str]] = field(default_factory=list)  # per name, its matchable words
    attributes: list[str] = field(default_factory=list)  # other content words, as stems
    attribute_words: list[str] = field(default_factory=list)  # the same words as written
    relational: bool = False  # asks how two or more named things relate

    @property
    def all_stems(self) -> list[str]:
        named = [stem(t) for tokens in self.name_tokens for t in tokens]
        return list(dict.fromkeys(named + self.attributes))


# Words that say what kind of value is asked for, not what it is about ("how much", "what year",
# "what was it called"): not looked for in the evidence. Common in the training books' questions:
# 404 of their 2,292 (GraphRAG-Bench and qa/train) hold one.
_CUE_WORDS = {stem(w) for w in ("name", "names", "called", "year", "date", "age", "much", "many", "money", "number",
                                "old", "long", "far", "time", "day")}


def read_question(question: str) -> QuestionTerms:
    tokens = [(m.group(0), m.start()) for m in WORD.finditer(question)]
    found = find_names(question)
    names = [n.text for n in found if n.words]
    name_tokens = [n.words for n in found if n.words]
    in_name = {i for i, (_, pos) in enumerate(tokens) if any(n.start <= pos < n.end for n in found)}
    attributes: list[str] = []
    attribute_words: list[str] = []
    for i, (tok, _) in enumerate(tokens):
        low = tok.lower()
        if i in in_name or low in STOPWORDS or low in FRAME_WORDS or low in RELATION_WORDS or len(low) < 3:
            continue
        s = stem(tok)
        if s in _CUE_WORDS or low in NUMBER_WORDS or low.isdigit():
            continue
        if s not in attributes:
            attributes.append(s)
            attribute_words.append(low)
    relational = any(t.lower() in RELATION_WORDS for t, _ in tokens) and len(names) >= 2
    return QuestionTerms(question, names, name_tokens, attributes, attribute_words, relational)
