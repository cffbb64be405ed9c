"""Entity linking: question mentions -> governed graph entities, with a score per link.

Three passes, each only over what the previous one left unlinked:
1. exact: word n-grams of the question (longest first) looked up in the name/alias index;
2. fuzzy: capitalised or long words against the words of names with the same first letter
   (difflib ratio), which catches spelling variants ("Scroge", "Cratchitt");
3. embedding: the remaining name-like spans (capitalised runs) against the entity name vectors.

A link's score is its match quality times (0.5 + 0.5 * specificity), so a generic noun phrase
that occurs in every passage ("man", "time") ranks below a rare name, times how good an anchor
the mention is (_kind_factor: "sister" in lower case counts half).
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass

import numpy as np

from ..records import EntityLink
from ..text.names import find_names, normalise_name
from ..text.words import FRAME_WORDS, STOPWORDS, WORD
from .views import GraphView, WordBlock

MAX_NGRAM = 5
# Links below this score (a generic noun phrase, a weak embedding match) do not open the graph.
MIN_LINK_SCORE = 0.35
# Words that never name an entity of a book on their own: function words, the words that frame
# a question, and the words a question uses to ask for a name or a number.
NOT_A_NAME = STOPWORDS | FRAME_WORDS | frozenset(
    "chapter name names called many much first last two three later another few once".split())


@dataclass
class Token:
    text: str
    start: int
    end: int


def tokenize(question: str) -> list[Token]:
    return [Token(m.group(0), m.start(), m.end()) for m in WORD.finditer(question)]


def candidate_mentions(question: str) -> list[Token]:
    """Name-like spans of the question (pagerag.text.names), for embedding links and the RCS."""
    return [Token(n.text, n.start, n.end) for n in find_names(question)]


def link_exact(question: str, tokens: list[Token], view: GraphView) -> tuple[list[EntityLink], set[int]]:
    """Longest-first n-gram lookup; returns the links and the token positions they cover."""
    links: list[EntityLink] = []
    covered: set[int] = set()
    for n in range(min(MAX_NGRAM, len(tokens)), 0, -1):
        for i in range(len(tokens) - n + 1):
            positions = set(range(i, i + n))
            if positions & covered:
                continue
            words = tokens[i : i + n]
            if all(w.text.lower() in NOT_A_NAME for w in words) or (n == 1 and len(words[0].text) < 3):
                continue
            hits = view.name_index.get(normalise_name(" ".join(w.text for w in words)))
            if not hits:
                continue
            covered |= positions
            start, end = words[0].start, words[-1].end
            for row, how in hits:
                entity = view.graph.entities[row]
                quality = 1.0 if how == "name" else 0.95
                links.append(_link(question, start, end, entity, how if how == "alias" else "exact", quality, view, row))
    return links, covered


def link_fuzzy(question: str, tokens: list[Token], covered: set[int], view: GraphView,
               threshold: float) -> tuple[list[EntityLink], set[int]]:
    links: list[EntityLink] = []
    newly: set[int] = set()
    for i, tok in enumerate(tokens):
        if i in covered or tok.text.lower() in NOT_A_NAME:
            continue
        if not (tok.text[0].isupper() or len(tok.text) >= 6):
            continue
        norm = normalise_name(tok.text)
        if len(norm) < 4:
            continue
        best = closest_word(norm, view.fuzzy_block(norm[0]), threshold)
        if best is None:
            continue
        ratio = difflib.SequenceMatcher(None, norm, best).ratio()
        for name in view.names_of_word[best]:
            # A word of a longer name ("Cratchit" of "Bob Cratchit") is a slightly weaker match.
            quality = ratio if name == best[0] else 0.9 * ratio
            for row, _ in view.name_index[name]:
                links.append(_link(question, tok.start, tok.end, view.graph.entities[row], "fuzzy", quality, view, row))
        newly.add(i)
    return links, newly


def closest_word(word: str, block: WordBlock, cutoff: float) -> str | None:
    """difflib.get_close_matches(word, block.words, n=1, cutoff)[0], or None — the same answer,
    but its two cheap upper bounds (length, shared letters) are taken for all words at once in
    numpy, so only the few words that pass them pay for SequenceMatcher (26 books: ~30k words)."""
    if not block.words:
        return None
    length = len(word)
    totals = length + block.lengths
    real_quick = 2.0 * np.minimum(length, block.lengths) / totals
    counts = np.zeros(block.counts.shape[1], np.int32)
    for char in word:
        column = block.alphabet.get(char)
        if column is not None:
            counts[column] += 1
    quick = 2.0 * np.minimum(block.counts, counts).sum(axis=1) / totals
    matcher = difflib.SequenceMatcher()
    matcher.set_seq2(word)
    best: tuple[float, str] | None = None
    for i in np.flatnonzero((real_quick >= cutoff) & (quick >= cutoff)).tolist():
        matcher.set_seq1(block.words[i])
        score = matcher.ratio()
        if score >= cutoff and (best is None or (score, block.words[i]) > best):
            best = (score, block.words[i])
    return None if best is None else best[1]


def link_embedding(question: str, spans: list[Token], span_vectors: np.ndarray, view: GraphView,
                   threshold: float) -> list[EntityLink]:
    """Each span's nearest entity name by cosine, kept when above `threshold`."""
    if not spans or view.entity_vectors.shape[0] == 0:
        return []
    sims = span_vectors @ view.entity_vectors.T
    links = []
    for span, row_sims in zip(spans, sims):
        row = int(np.argmax(row_sims))
        if row_sims[row] >= threshold:
            links.append(_link(question, span.start, span.end, view.graph.entities[row], "embedding",
                               float(row_sims[row]), view, row))
    return links


def unlinked_spans(spans: list[Token], links: list[EntityLink]) -> list[Token]:
    return [s for s in spans if not any(l.start < s.end and s.start < l.end for l in links)]


def best_links(links: list[EntityLink], limit: int) -> list[EntityLink]:
    """One link per entity (its best), best first, at most `limit`."""
    best: dict[str, EntityLink] = {}
    for link in links:
        if link.entity_id not in best or link.score > best[link.entity_id].score:
            best[link.entity_id] = link
    return sorted(best.values(), key=lambda l: (-l.score, l.start))[:limit]


def _link(question: str, start: int, end: int, entity, method: str, quality: float, view: GraphView, row: int) -> EntityLink:
    score = float(quality) * (0.5 + 0.5 * float(view.specificity[row])) * _kind_factor(question[start:end], entity)
    return EntityLink(mention=question[start:end], start=start, end=end, entity_id=entity.entity_id,
                      name=entity.name, method=method, score=round(score, 4))


def _kind_factor(mention: str, entity) -> float:
    """How good an anchor the mention is. A common noun in lower case ("sister", "door") is weak;
    a noun phrase the question capitalises ("the Ghost") is fair; a named entity matched by a
    lower-case word ("bring" -> a mis-tagged "Bring") is weaker still."""
    lower = not mention[:1].isupper()
    if entity.type == "NOUN_PHRASE":
        return 0.5 if lower else 0.8
    if lower and all(form[:1].isupper() for form in [entity.name, *entity.aliases] if form):
        return 0.4
    return 1.0
