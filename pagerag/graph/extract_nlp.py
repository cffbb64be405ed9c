"""Stage 5 (nlp): the RAW entity/relation graph from spaCy, without an LLM.

Candidate nodes are named entities (labels in `settings.entity_labels`) and salient noun phrases
(noun chunks without determiners/pronouns, kept when they occur `min_noun_phrase_count` times).
Edges are sentence co-occurrences (kind "cooccurs", weight = sentences) and subject-verb-object
triples read off the dependency parse (kind "svo", label = verb lemma [+ preposition]).

Speed: the text is read once. Overlapping passages are stitched back into contiguous regions of
the source, which are cut at paragraph breaks into ~`piece_chars` pieces for `nlp.pipe`; every
mention and sentence is then mapped back to the passages that contain it. The attribute ruler and
lemmatizer are disabled (a quarter of the pipeline's time): noun chunks are read from the tagger's
fine-grained tags and the dependency parse, and only verbs on a triple are lemmatised, on demand.
"""
from __future__ import annotations

import bisect
import functools
import gzip
import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..errors import ConfigError
from ..records import Entity, Graph, Passage, Relation
from ..settings import ExtractSettings
from .ids import assign_entity_ids, relation_id
from ..text.names import TITLES
from .regions import PassageLocator, Piece, source_regions, split_pieces

NOUN_PHRASE = "NOUN_PHRASE"
NOUN_TAGS = frozenset({"NN", "NNS", "NNP", "NNPS"})
PROPER_TAGS = frozenset({"NNP", "NNPS"})
# Dependency labels whose noun heads start a noun chunk (spaCy's English noun_chunks iterator).
CHUNK_DEPS = frozenset({"oprd", "nsubj", "dobj", "nsubjpass", "pcomp", "pobj", "dative", "appos", "attr", "ROOT"})
# Leading tokens that do not belong to a noun phrase's name: "the", "his", "all", quotes, "'s".
LEADING_DROP_TAGS = frozenset({"DT", "PDT", "PRP$", "WP$", "WDT", "POS", "``", "''", ",", ":", "HYPH", "NFP", "-LRB-", "-RRB-", "_SP"})
TRAILING_DROP_TAGS = frozenset({"RB", "CC", "IN", "DT", "PRP", "PRP$", "MD", "TO", "POS", ",", ".", ":", "``", "''", "HYPH", "_SP"})
# Words that are never entities although the small model tags them as names or nouns (archaic
# pronouns and interjections: "thou" GPE, "ye" NN in Moby Dick), besides spaCy's stop words.
NOT_NAMES = frozenset({"thou", "thee", "thy", "thine", "ye", "aye", "ay", "yea", "nay", "o", "oh", "ah", "lo",
                       "hath", "doth", "hast", "tis", "'tis", "ha", "ho", "hurrah", "huzza", "alas"})
SUBJECT_DEPS = frozenset({"nsubj", "nsubjpass"})
OBJECT_DEPS = frozenset({"dobj", "dative", "attr", "oprd"})
NAME_STRIP = " \t\n\"'`“”‘’-—–_,;:!?()[]{}*"
PIPES_NOT_NEEDED = ["attribute_ruler", "lemmatizer", "senter"]
MIN_CHARS_PER_WORKER = 50_000
_VERB_LABEL = re.compile(r"^[a-z][a-z-]*( [a-z]+)?$")


# ------------------------------------------------------------------------------------------
# spaCy


@functools.lru_cache(maxsize=2)
def load_nlp(model: str, with_ner: bool = True) -> Any:
    """The spaCy pipeline with only tok2vec, tagger, parser (and ner); loaded once per process."""
    from ..text.nlp import load_spacy

    nlp = load_spacy(model, _disabled(with_ner))
    missing = {"tagger", "parser"} - set(nlp.pipe_names)
    if missing:
        raise ConfigError(f"spaCy model '{model}' lacks the {', '.join(sorted(missing))} component(s) the extractor needs")
    return nlp


def _disabled(with_ner: bool) -> tuple[str, ...]:
    return tuple(PIPES_NOT_NEEDED) + (() if with_ner else ("ner",))


def nlp_pipes_disabled(settings: ExtractSettings) -> tuple[str, ...]:
    """The components the extractor's pipeline loads without (`load_spacy`'s `disable`): what a
    prefetch of that pipeline must name to be the one the extractor waits for."""
    return _disabled(bool(settings.entity_labels))


def _lemmatiser(nlp: Any) -> Callable[[Any], str]:
    """Lemma of a verb token, cached by (text, tag); the pipeline's rule lemmatizer, run on demand."""
    try:
        rule_lemmatize = nlp.get_pipe("lemmatizer").rule_lemmatize
    except KeyError:
        rule_lemmatize = None
    cache: dict[tuple[str, str], str] = {}

    def lemma(token: Any) -> str:
        key = (token.lower_, token.tag_)
        if key not in cache:
            token.pos_ = "VERB"
            cache[key] = (rule_lemmatize(token)[0] if rule_lemmatize else token.lower_).lower()
        return cache[key]

    return lemma


# ------------------------------------------------------------------------------------------
# Per-document collection

Key = tuple[str, str]  # (normalised name, type)


@dataclass
class _Sentence:
    passage_ids: list[str]
    start: int
    end: int
    keys: list[Key]
    triples: list[tuple[Key, str, Key]]


@dataclass
class _Accumulator:
    mentions: Counter = field(default_factory=Counter)
    passages: dict[Key, set[str]] = field(default_factory=lambda: defaultdict(set))
    sentences: list[_Sentence] = field(default_factory=list)


def entity_name(text: str) -> str:
    """Raw normalisation: collapse whitespace (line wraps), strip quotes/dashes at the ends."""
    return " ".join(text.split()).strip(NAME_STRIP)


def _with_title(doc: Any, start: int) -> int:
    """spaCy leaves "Mr."/"Mrs." outside PERSON spans; the title tells Mr. from Mrs. Fezziwig."""
    if start > 0 and doc[start - 1].lower_.rstrip(".") in TITLES and doc[start - 1].text[:1].isupper():
        return start - 1
    return start


def _trimmed_end(doc: Any, start: int, end: int) -> int:
    """Drop lower-case function words and verbs NER let into the end of a name ("Scrooge muttered",
    "Bob Cratchit 's")."""
    while end - start > 1:
        last = doc[end - 1]
        not_a_name = last.text[:1].islower() or not last.text[:1].isalnum()
        if not (not_a_name and (last.tag_.startswith("VB") or last.tag_ in TRAILING_DROP_TAGS)):
            break
        end -= 1
    return end


def _noun_chunks(doc: Any) -> list[tuple[int, int]]:
    """Token ranges of noun chunks (spaCy's English algorithm, on fine-grained tags)."""
    chunks, prev_end = [], -1
    for word in doc:
        if word.tag_ not in NOUN_TAGS:
            continue
        left = word.left_edge.i
        if left <= prev_end:
            continue
        dep = word.dep_
        if dep == "conj":
            head = word.head
            while head.dep_ == "conj" and head.head.i < head.i:
                head = head.head
            dep = head.dep_
        if dep in CHUNK_DEPS:
            chunks.append((left, word.i + 1))
            prev_end = word.i
    return chunks


def _noun_phrase(doc: Any, lo: int, hi: int, max_tokens: int) -> str | None:
    """The name of a noun chunk: no leading determiners/possessives, common words lower-cased."""
    while lo < hi and doc[lo].tag_ in LEADING_DROP_TAGS:
        lo += 1
    if lo >= hi or hi - lo > max_tokens:
        return None
    tokens = doc[lo:hi]
    if hi - lo == 1 and (tokens[0].is_stop or not tokens[0].is_alpha):
        return None
    text = "".join(t.text_with_ws if t.tag_ in PROPER_TAGS else t.text_with_ws.lower() for t in tokens)
    name = entity_name(text)
    return name if _is_name(name) else None


def _is_name(name: str) -> bool:
    from spacy.lang.en.stop_words import STOP_WORDS

    lower = name.lower()
    return len(name) > 1 and any(c.isalpha() for c in name) and lower not in NOT_NAMES and lower not in STOP_WORDS


def _objects(verb: Any) -> list[tuple[Any, str, bool]]:
    """(object token, preposition or "", object is the agent) for the verb's arguments."""
    out = []
    for child in verb.children:
        if child.dep_ in OBJECT_DEPS:
            out.append((child, "", False))
        elif child.dep_ in ("prep", "agent"):
            for pobj in child.children:
                if pobj.dep_ == "pobj":
                    out.append((pobj, "" if child.dep_ == "agent" else child.lower_, child.dep_ == "agent"))
    return out


def _triples(doc: Any, sent: Any, owner: dict[int, Key], lemma: Callable[[Any], str]) -> list[tuple[Key, str, Key]]:
    """Subject-verb-object triples whose subject and object are both candidate mentions."""
    found = []
    for i in range(sent.start, sent.end):
        subj = doc[i]
        if subj.dep_ not in SUBJECT_DEPS or i not in owner or not subj.head.tag_.startswith("VB"):
            continue
        subjects = [owner[t.i] for t in (subj, *subj.conjuncts) if t.i in owner]
        verbs = [subj.head] + [v for v in subj.head.conjuncts if v.tag_.startswith("VB") and not any(c.dep_ in SUBJECT_DEPS for c in v.children)]
        passive = subj.dep_ == "nsubjpass"
        for verb in verbs:
            for obj, prep, is_agent in _objects(verb):
                label = f"{lemma(verb)} {prep}".strip()
                if not _VERB_LABEL.match(label):  # tagger noise: "'" or "--" tagged as a verb
                    continue
                for o in (obj, *obj.conjuncts):
                    okey = owner.get(o.i)
                    for skey in subjects if okey else ():
                        if okey == skey:
                            continue
                        # "Marley was seen by Scrooge" is Scrooge -[see]-> Marley.
                        found.append((okey, label, skey) if passive and is_agent else (skey, label, okey))
    return found


def collect(doc: Any, piece: Piece, locator: PassageLocator, settings: ExtractSettings,
            lemma: Callable[[Any], str], acc: _Accumulator) -> None:
    """Add one parsed piece's mentions, sentences and triples to the accumulator."""
    labels = set(settings.entity_labels)
    owner: dict[int, Key] = {}
    spans: list[tuple[int, int, Key]] = []  # token range + key
    entity_tokens: set[int] = set()
    for ent in doc.ents:
        if ent.label_ in labels:
            lo = _with_title(doc, ent.start) if ent.label_ == "PERSON" else ent.start
            hi = _trimmed_end(doc, lo, ent.end)
            name = entity_name(doc[lo:hi].text)
            if _is_name(name):
                spans.append((lo, hi, (name, ent.label_)))
            entity_tokens.update(range(lo, hi))
    if settings.noun_phrases:
        for lo, hi in _noun_chunks(doc):
            # "Scrooge's nephew": the phrase starts after the entity inside the chunk.
            inside = [i for i in range(lo, hi) if i in entity_tokens]
            if inside:
                if inside[-1] >= hi - 1:
                    continue
                lo = inside[-1] + 1
            name = _noun_phrase(doc, lo, hi, settings.max_noun_phrase_tokens)
            if name:
                spans.append((lo, hi, (name, NOUN_PHRASE)))
    spans.sort()
    for lo, hi, key in spans:
        for i in range(lo, hi):
            owner[i] = key
        start, end = piece.start + doc[lo].idx, piece.start + doc[hi - 1].idx + len(doc[hi - 1])
        acc.mentions[key] += 1
        acc.passages[key].update(locator.containing(start, end))
    k = 0
    for sent in doc.sents:
        keys: list[Key] = []
        while k < len(spans) and spans[k][0] < sent.end:
            keys.append(spans[k][2])
            k += 1
        if not keys:
            continue
        triples = _triples(doc, sent, owner, lemma) if settings.svo and len(keys) > 1 else []
        start = piece.start + sent.start_char
        end = start + len(sent.text.rstrip())
        acc.sentences.append(_Sentence(locator.containing(start, end), start, end, keys, triples))


# ------------------------------------------------------------------------------------------
# The raw graph


def extract_nlp(passages: list[Passage], settings: ExtractSettings, progress: Callable[[int], None] | None = None) -> Graph:
    """The RAW graph of `passages`: candidate entities, co-occurrence and SVO relations, with
    provenance (passage ids; evidence sentence spans into the source text)."""
    if not passages:
        return Graph()
    return build_raw_graph(merge_mentions(collect_mentions(passages, settings, progress)), passages, settings)


def collect_mentions(passages: list[Passage], settings: ExtractSettings,
                     progress: Callable[[int], None] | None = None) -> dict[str, "_Accumulator"]:
    """What spaCy reads in `passages`, per document (doc id -> its mentions, sentences and
    triples): a document's part depends on that document alone, so a library stores it and
    adding or removing a document recomputes the raw graph from the parts (build_raw_graph)."""
    nlp = load_nlp(settings.spacy_model, with_ner=bool(settings.entity_labels))
    lemma = _lemmatiser(nlp)
    locators = {doc_id: PassageLocator([p for p in passages if p.doc_id == doc_id]) for doc_id in {p.doc_id for p in passages}}
    pieces = [piece for region in source_regions(passages) for piece in split_pieces(region, settings.piece_chars)]
    report = _ProgressReporter(passages, progress)
    parts: dict[str, _Accumulator] = {doc_id: _Accumulator() for doc_id in locators}
    n_process = worker_count(settings.n_process, sum(len(p.text) for p in pieces))
    docs = nlp.pipe((p.text for p in pieces), batch_size=settings.batch_size, n_process=n_process)
    for piece, doc in zip(pieces, docs):
        collect(doc, piece, locators[piece.doc_id], settings, lemma, parts[piece.doc_id])
        report.done_until(piece.doc_id, piece.start + len(piece.text))
    report.finish()
    return parts


def merge_mentions(parts: dict[str, "_Accumulator"]) -> "_Accumulator":
    """One accumulator of several documents' parts, in document-id order (so the raw graph of a
    library does not depend on the order its documents came in)."""
    out = _Accumulator()
    for doc_id in sorted(parts):
        part = parts[doc_id]
        out.mentions.update(part.mentions)
        for key, pids in part.passages.items():
            out.passages[key].update(pids)
        out.sentences.extend(part.sentences)
    return out


def mentions_to_dict(acc: "_Accumulator") -> dict[str, Any]:
    """A document's part as JSON-ready data (keys numbered once)."""
    keys = sorted(set(acc.mentions) | set(acc.passages) | {k for s in acc.sentences for k in s.keys})
    number = {k: i for i, k in enumerate(keys)}
    return {
        "keys": [list(k) for k in keys],
        "mentions": [acc.mentions.get(k, 0) for k in keys],
        "passages": [sorted(acc.passages.get(k, ())) for k in keys],
        "sentences": [[s.passage_ids, s.start, s.end, [number[k] for k in s.keys],
                       [[number[a], label, number[b]] for a, label, b in s.triples]] for s in acc.sentences],
    }


def mentions_from_dict(data: dict[str, Any]) -> "_Accumulator":
    """A stored part (passage ids and names interned: a library holds every document's parts)."""
    from sys import intern

    keys = [(intern(k[0]), intern(k[1])) for k in data["keys"]]
    acc = _Accumulator()
    for key, n, pids in zip(keys, data["mentions"], data["passages"]):
        if n:
            acc.mentions[key] = n
        if pids:
            acc.passages[key].update(intern(p) for p in pids)
    for pids, start, end, ks, triples in data["sentences"]:
        acc.sentences.append(_Sentence([intern(p) for p in pids], start, end, [keys[k] for k in ks],
                                       [(keys[a], intern(label), keys[b]) for a, label, b in triples]))
    return acc


def read_mention_part(path: Path) -> tuple[str | None, "_Accumulator"]:
    """A document's stored mention part (`extract/<doc>.json.gz`): the digest of the extraction
    settings it was made with, and the part. Raises OSError or ValueError when it is unreadable."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        data = json.load(fh)
    try:
        return data.get("settings"), mentions_from_dict(data)
    except (KeyError, TypeError, IndexError) as exc:
        raise ValueError(f"{path.name}: not a mention part ({exc.__class__.__name__})") from None


def worker_count(requested: int, n_chars: int) -> int:
    """Workers actually used: starting one (fork + model load) costs ~0.5 s of CPU, so each must
    get at least MIN_CHARS_PER_WORKER characters; never more than the machine's cores."""
    import os

    return max(1, min(requested, os.cpu_count() or 1, n_chars // MIN_CHARS_PER_WORKER))


class _ProgressReporter:
    """Calls progress(n) as the pieces read so far cover whole passages."""

    def __init__(self, passages: list[Passage], progress: Callable[[int], None] | None):
        self.progress = progress
        self.ends: dict[str, list[int]] = defaultdict(list)
        for p in passages:
            self.ends[p.doc_id].append(p.end)
        for ends in self.ends.values():
            ends.sort()
        self.reported: dict[str, int] = defaultdict(int)
        self.total = len(passages)
        self.sent = 0

    def done_until(self, doc_id: str, offset: int) -> None:
        n = bisect.bisect_right(self.ends[doc_id], offset)
        if n > self.reported[doc_id] and self.progress:
            self.progress(n - self.reported[doc_id])
            self.sent += n - self.reported[doc_id]
        self.reported[doc_id] = max(n, self.reported[doc_id])

    def finish(self) -> None:
        if self.progress and self.total > self.sent:
            self.progress(self.total - self.sent)


def build_raw_graph(acc: _Accumulator, passages: list[Passage], settings: ExtractSettings,
                    ordered_passages: bool = True) -> Graph:
    """Entities (noun phrases only when frequent enough) and relations aggregated over sentences.
    `ordered_passages=False` leaves each relation's passage list unsorted and with repeats: for
    governance, which sorts the lists of the relations it makes anyway (sorting the raw ones too
    was 0.4 s of a library's add at 1,000 documents)."""
    order = {p.passage_id: i for i, p in enumerate(sorted(passages, key=lambda p: (p.doc_id, p.start, p.end)))}
    kept = [k for k, n in acc.mentions.items() if k[1] != NOUN_PHRASE or n >= settings.min_noun_phrase_count]
    ids = assign_entity_ids(kept, acc.mentions)
    entities = [
        Entity(entity_id=ids[k], name=k[0], type=k[1], aliases=[k[0]], mentions=acc.mentions[k],
               passage_ids=sorted(acc.passages[k], key=order.__getitem__))
        for k in sorted(kept, key=lambda k: ids[k])
    ]
    edges: dict[tuple[str, str, str, str], Relation] = {}
    cap = settings.max_evidence
    for sent in acc.sentences:
        nodes = sorted({ids[k] for k in sent.keys if k in ids})
        pids = sent.passage_ids
        span = [pids[0], sent.start, sent.end] if pids else None
        for a, source in enumerate(nodes):
            for target in nodes[a + 1:]:
                _add_edge(edges, "cooccurs", source, target, "co-occurs with", pids, span, cap)
        for skey, label, okey in sent.triples:
            if skey in ids and okey in ids:
                _add_edge(edges, "svo", ids[skey], ids[okey], label, pids, span, cap)
    relations = sorted(edges.values(), key=lambda r: r.relation_id)
    if ordered_passages:
        for r in relations:
            r.passage_ids = sorted(set(r.passage_ids), key=order.__getitem__)
    return Graph(entities=entities, relations=relations)


def _add_edge(edges: dict, kind: str, source: str, target: str, label: str, passage_ids: list[str],
              span: list[Any] | None, max_evidence: int) -> None:
    key = (kind, source, target, label)
    rel = edges.get(key)
    if rel is None:
        rel = edges[key] = Relation(relation_id(kind, source, target, label), source, target, label, kind, 0.0)
    rel.weight += 1.0
    rel.passage_ids.extend(passage_ids)
    if span is not None and len(rel.evidence) < max_evidence:
        rel.evidence.append(span)
