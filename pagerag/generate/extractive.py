"""The no-LLM answerer: quote the evidence sentence that best answers the question, and cite it.

The sentence is the one the sufficiency rule ranks first (support.py: it holds the question's
names, most of its attribute words and, for a typed question, a candidate of the asked type),
with the window's embedding similarity to the question breaking ties. A very short sentence
("'Yes,' said Joe.") is extended by the sentence before it so the quote stands on its own. The answer is
the quote itself, exact to the source span, so it can never say more than the book.
"""
from __future__ import annotations

from ..records import Excerpt
from .context import fold_space, make_excerpt
from .support import SentenceSupport, Support

MIN_QUOTE_CHARS = 60
MAX_QUOTE_CHARS = 600


def best_sentence(support: Support) -> SentenceSupport | None:
    """The best sentence among those that pass the rule (else among all), by rule score plus
    the embedding score of its window."""
    if not support.ranked:
        return None
    passing = [r for r in support.ranked if r.passes] or support.ranked
    return max(passing, key=lambda r: r.score + r.window.score)


def quote_span(choice: SentenceSupport) -> tuple[int, int]:
    """The chosen sentence, extended by its previous (else next) neighbour when very short."""
    sentences = choice.window.sentences
    start, end = choice.start, choice.end
    i = next((k for k, s in enumerate(sentences) if s == (start, end)), None)
    if i is not None and end - start < MIN_QUOTE_CHARS:
        # the sentence before usually says what a short reply answers ("Have you had many
        # brothers?" "More than eighteen hundred.")
        if i > 0 and end - sentences[i - 1][0] <= MAX_QUOTE_CHARS:
            start = sentences[i - 1][0]
        elif i + 1 < len(sentences) and sentences[i + 1][1] - start <= MAX_QUOTE_CHARS:
            end = sentences[i + 1][1]
    return start, end


def extractive_answer(support: Support, state, encoding: str = "cl100k_base") -> tuple[str, list[Excerpt]]:
    """(answer text with its [1] citation, the one excerpt it cites); ("", []) without evidence."""
    choice = best_sentence(support)
    if choice is None:
        return "", []
    start, end = quote_span(choice)
    excerpt = make_excerpt(state, choice.window, start, end, 1, choice.score, encoding)
    return f"\u201c{fold_space(excerpt.text)}\u201d [1]", [excerpt]
