"""The no-LLM answerer: quote the evidence sentence the learned ranker scores highest, and cite it.

The sentence is the ranker's first (sentences.py: a logistic model fitted on the training books'
evidence-sentence labels). When the question asks for a typed value (a sum, a year, a date, an
age, a count, a place, a person) and the sentence holds a candidate of that type, the answer
states the shortest such span first, then quotes the sentence it comes from; otherwise the answer
is the quote alone. The quote is exact to the source span, so the answer can never say more than
the book. A very short sentence ("'Yes,' said Joe.") is extended by the sentence before it when
`extend_short` is on (measured on the training books: benchmarks/book_qa_results.md).
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


def typed_value(choice: Sentence) -> str:
    """The shortest candidate of the asked type inside the sentence ("" when there is none)."""
    if not choice.candidates:
        return ""
    start, end = min(choice.candidates, key=lambda se: (se[1] - se[0], se[0]))
    w = choice.window
    return fold_space(w.text[start - w.start: end - w.start])


def extractive_answer(ranked: list[Sentence], state, encoding: str = "cl100k_base",
                      extend_short: bool = True) -> tuple[str, list[Excerpt]]:
    """(answer text with its [1] citation, the one excerpt it cites); ("", []) without evidence."""
    if not ranked:
        return "", []
    choice = ranked[0]
    start, end = quote_span(choice, extend_short)
    excerpt = make_excerpt(state, choice.window, start, end, 1, choice.prob, encoding)
    quote = f"\u201c{fold_space(excerpt.text)}\u201d [1]"
    value = typed_value(choice)
    return (f"{value}: {quote}" if value else quote), [excerpt]
