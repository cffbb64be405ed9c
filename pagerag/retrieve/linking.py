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
import re
from dataclasses import dataclass

import numpy as np

from ..records import EntityLink
from .state import GraphView, normalise_name

_WORD = re.compile(r"[A-Za-z\u00c0-\u024f0-9]+(?:['\u2019\-][A-Za-z\u00c0-\u024f0-9]+)*")
MAX_NGRAM = 5
# Links below this score (a generic noun phrase, a weak embedding match) do not open the graph.
MIN_LINK_SCORE = 0.35

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me more most my
    myself no nor not now of off on once only or other our ours ourselves out over own same she should so
    some such than that the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with would you your
    yours yourself yourselves according book story novel chapter narrator does did say says said tell told
    name names called kind many much first last one two three also ever later whose another""".split()
)


@dataclass
class Token:
    text: str
    start: int
    end: int


def tokenize(question: str) -> list[Token]:
    return [Token(m.group(0), m.start(), m.end()) for m in _WORD.finditer(question)]


def candidate_mentions(question: str, tokens: list[Token] | None = None) -> list[Token]:
    """Name-like spans: runs of capitalised words (joined by "of"/"de"/"the"), not stopwords alone."""
    tokens = tokens if tokens is not None else tokenize(question)
    spans: list[Token] = []
    run: list[Token] = []

    def close() -> None:
        while run and run[-1].text.lower() in {"of", "de", "the", "von", "van"}:
            run.pop()
        if run and not all(t.text.lower() in STOPWORDS for t in run):
            spans.append(Token(question[run[0].start : run[-1].end], run[0].start, run[-1].end))
        run.clear()

    for tok in tokens:
        capital = tok.text[0].isupper()
        joiner = bool(run) and tok.text.lower() in {"of", "de", "the", "von", "van"}
        if capital or joiner:
            run.append(tok)
        else:
            close()
    close()
    return spans


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
            if all(w.text.lower() in STOPWORDS for w in words) or (n == 1 and len(words[0].text) < 3):
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
        if i in covered or tok.text.lower() in STOPWORDS:
            continue
        if not (tok.text[0].isupper() or len(tok.text) >= 6):
            continue
        norm = normalise_name(tok.text)
        if len(norm) < 4:
            continue
        words = view.words_by_initial.get(norm[0], [])
        best = difflib.get_close_matches(norm, words, n=1, cutoff=threshold)
        if not best:
            continue
        ratio = difflib.SequenceMatcher(None, norm, best[0]).ratio()
        for name in view.names_of_word[best[0]]:
            # A word of a longer name ("Cratchit" of "Bob Cratchit") is a slightly weaker match.
            quality = ratio if name == best[0] else 0.9 * ratio
            for row, _ in view.name_index[name]:
                links.append(_link(question, tok.start, tok.end, view.graph.entities[row], "fuzzy", quality, view, row))
        newly.add(i)
    return links, newly


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
