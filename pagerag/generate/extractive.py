"""The no-LLM answerer: the reader's answer, cited.

The sentence is the one the reader (pagerag.read) finds most likely to state the answer. When
its answer span beats "no answer here" by at least `span_margin` (chosen on the training books,
held out by book, with the sufficiency model), the answer is that span, and the citation is its
sentence; otherwise the answer is the sentence itself, quoted. Either way the text is exact to
the source, so the answer can never say more than the book. A very short quoted sentence
("'Yes,' said Joe.") is extended by the sentence before it when `extend_short` is on.
"""
from __future__ import annotations

from ..records import Excerpt
from .context import fold_space, make_excerpt
from .sentences import Sentence

MIN_QUOTE_CHARS = 60
MAX_QUOTE_CHARS = 600


def quote_span(choice: Sentence, extend_short: bool = True) -> tuple[int, int]:
    """The chosen sentence, extended by its previous (else next) neighbour in its window when it
    is very short and `extend_short`."""
    sentences = choice.window.sentences
    start, end = choice.start, choice.end
    i = next((k for k, s in enumerate(sentences) if s == (start, end)), None)
    if extend_short and i is not None and end - start < MIN_QUOTE_CHARS:
        if i > 0 and end - sentences[i - 1][0] <= MAX_QUOTE_CHARS:
            start = sentences[i - 1][0]
        elif i + 1 < len(sentences) and sentences[i + 1][1] - start <= MAX_QUOTE_CHARS:
            end = sentences[i + 1][1]
    return start, end


def quote_text(choice: Sentence, extend_short: bool = True) -> str:
    start, end = quote_span(choice, extend_short)
    w = choice.window
    return w.text[start - w.start: end - w.start]


def span_text(choice: Sentence) -> str:
    """The reader's answer span inside the sentence ("" when it has none)."""
    if choice.span is None:
        return ""
    w = choice.window
    return fold_space(w.text[choice.span[0] - w.start: choice.span[1] - w.start]).strip(" ,;:")


def extractive_answer(ranked: list[Sentence], state, encoding: str = "cl100k_base", extend_short: bool = True,
                      span_margin: float = float("inf")) -> tuple[str, list[Excerpt]]:
    """(answer text with its [1] citation, the one excerpt it cites); ("", []) without evidence."""
    if not ranked:
        return "", []
    choice = ranked[0]
    span = span_text(choice) if choice.margin >= span_margin else ""
    start, end = (choice.start, choice.end) if span else quote_span(choice, extend_short)
    excerpt = make_excerpt(state, choice.window, start, end, 1, choice.prob, encoding)
    if span:
        return f"{span} [1]", [excerpt]
    return f"\u201c{fold_space(excerpt.text)}\u201d [1]", [excerpt]
