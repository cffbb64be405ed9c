"""Compose an answer from the excerpts: render prompts, ask the LLM, and check its citations.

Prompts live in prompts/<name>.txt and are rendered by pagerag.llm.prompts (placeholders filled
in one pass, so book text is never expanded). The judge and answer templates begin with the
same system text and excerpt block, so a local llama.cpp model reuses the evaluated prefix.

Book text is data: the excerpts sit between <<< and >>> fences (fence marks inside the text are
neutralised) under a system line saying so, and whatever the model writes, the decision to
answer is taken here: an answer counts only through citations that name an excerpt that exists.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..llm import LLM, Messages, render_prompt
from ..records import Citation, Excerpt
from .context import fold_space

REFUSAL_WORD = "INSUFFICIENT"
REFUSAL_RULE = f" If the excerpts do not state the answer, reply with the single word {REFUSAL_WORD}."
_CITATION = re.compile(r"\[(\s*\d+\s*(?:[,;]\s*\d+\s*)*)\]")


def render_excerpts(excerpts: list[Excerpt]) -> str:
    """`[n] text` per excerpt, whitespace folded, fence marks defused."""
    return "\n\n".join(f"[{e.n}] {_defuse(fold_space(e.text))}" for e in excerpts)


def _defuse(text: str) -> str:
    return text.replace("<<<", "< < <").replace(">>>", "> > >")


# --------------------------------------------------------------------------------------------
# Citations


@dataclass
class CheckedAnswer:
    text: str  # the answer with invalid citation marks removed
    citations: list[Citation]
    invalid: list[int]  # cited numbers that name no excerpt
    abstained: bool  # the model said INSUFFICIENT


def cited_numbers(text: str) -> list[int]:
    """Every n in [n], [n, m] or [n][m], in order of first appearance."""
    numbers: list[int] = []
    for match in _CITATION.finditer(text):
        for part in re.split(r"[,;]", match.group(1)):
            n = int(part)
            if n not in numbers:
                numbers.append(n)
    return numbers


def check_citations(text: str, excerpts: list[Excerpt]) -> CheckedAnswer:
    """Keep the citations that exist, drop the marks of those that do not."""
    by_n = {e.n: e for e in excerpts}
    stripped = text.strip()
    if stripped.strip(" .\"'*").upper().startswith(REFUSAL_WORD):
        return CheckedAnswer(stripped, [], [], abstained=True)
    numbers = cited_numbers(stripped)
    valid = [n for n in numbers if n in by_n]
    invalid = [n for n in numbers if n not in by_n]

    def keep_valid(match: re.Match) -> str:
        kept = [p.strip() for p in re.split(r"[,;]", match.group(1)) if int(p) in by_n]
        return f"[{', '.join(kept)}]" if kept else ""

    cleaned = re.sub(r"\s+([.,;])", r"\1", _CITATION.sub(keep_valid, stripped)).strip()
    if not re.search(r"[A-Za-z0-9]", _CITATION.sub("", cleaned)):
        valid = []  # citation marks alone state nothing: there is no answer to support
    return CheckedAnswer(cleaned, [Citation.of(by_n[n]) for n in valid], invalid, abstained=False)


def answer_support(text: str, citations: list[Citation], question: str) -> float:
    """Share of the answer's content words (stemmed, citation marks removed) that its cited
    excerpts or the question contain — 0 when none of them comes from the excerpts themselves:
    a cited answer that the excerpts do not bear out (a model echoing the prompt, or adding
    outside knowledge) scores low."""
    from ..text.words import STOPWORDS, stem, words

    content = [stem(w) for w in words(_CITATION.sub(" ", text)) if len(w) > 2 and w.lower() not in STOPWORDS]
    if not content:
        return 0.0
    cited = {stem(w) for c in citations for w in words(c.quote)}
    asked = {stem(w) for w in words(question)}
    if not any(w in cited and w not in asked for w in content):
        return 0.0  # restating the question proves nothing
    return sum(w in cited or w in asked for w in content) / len(content)


def recite(text: str, excerpts: list[Excerpt], question: str, threshold: float) -> list[Citation]:
    """The single excerpt that best bears the answer out, if it reaches `threshold`; else []."""
    scored = [(answer_support(text, [Citation.of(e)], question), e) for e in excerpts]
    best_share, best = max(scored, key=lambda pair: pair[0], default=(0.0, None))
    return [Citation.of(best)] if best is not None and best_share >= threshold else []


# --------------------------------------------------------------------------------------------
# LLM answer


def answer_messages(question: str, excerpts: list[Excerpt], allow_refusal: bool = True,
                    graph_context: str = "") -> Messages:
    """`graph_context`: the labelled block of context.graph_context ("" for none)."""
    return render_prompt("answer", excerpts=render_excerpts(excerpts), question=question,
                         refusal_rule=REFUSAL_RULE if allow_refusal else "", graph_context=graph_context)


def llm_answer(llm: LLM, question: str, excerpts: list[Excerpt], *, max_tokens: int, temperature: float,
               allow_refusal: bool = True, graph_context: str = "") -> tuple[CheckedAnswer, object]:
    """(checked answer, completion) from the LLM."""
    completion = llm.complete(answer_messages(question, excerpts, allow_refusal, graph_context), max_tokens=max_tokens,
                              temperature=temperature)
    return check_citations(completion.text, excerpts), completion
