"""Swapped negatives: ask a question about one character with the name of another character of
the same book, kept only where the book does not support the altered question.

Characters are the governed graph's PERSON entities that look like people: spaCy also tags
places and peoples as PERSON (a book on Morocco has "Rabat" and "Mogador" as persons), so a
character needs a title in one of its names (Mr., Capt., Mrs. ...) or to speak in the book ("said
Rudolph"), a name is dropped when it often follows "the" or a preposition of place ("the
Berbers", "in Draha"), and an occurrence inside a place name ("St. Paul", "Fort Snelling") does
not count as the character. The question's main character is the
first one (by position in the question) whose name also occurs in an evidence statement; every
run of capitalised words naming it (titles and possessives handled) in the question and the
statements is replaced by the new character's name. The new character has at least MIN_MENTIONS
mentions, shares no name word with the old one, is not named anywhere in the question, its
evidence or its answer, and has no title of the other sex (Mrs. for Mr.). No name of the old
character may survive the replacement ("Tristram Shandy" is a title, not Shandy; "Cousin Cæsar
Simon" is not "Cousin Cæsar" alone): such a question is left alone, since a half-swapped question
is still answerable (3 of 20 swaps failed the hand check this way). The swap is kept only
when, among the passages naming the new character,
  - none locates an altered evidence statement (>= 60% of its content words),
  - none locates the altered question's content words,
  - no sentence holds the gold answer (string or >= 60% of its content words).
Candidates are tried in a fixed pseudo-random order per question (seeded), at most TRIES of them.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass

from ..evaluate.scoring import content_words, located
from ..records import Graph
from .locate import BookIndex, answer_is_stated, answer_score
from .mask import capitalised_words
from .examples import Swap

MIN_MENTIONS = 5
TRIES = 8
MAX_PLACE_SHARE = 0.25  # of a name's occurrences after "the"/"in"/"at"...: more, and it is no person
MIN_SPEECH = 2  # occurrences beside a verb of speech that make an untitled name a person
TITLES = frozenset("""mr mrs ms miss master dr doctor capt captain gen general col colonel lt lieut lieutenant
maj major sgt sergeant adm admiral gov governor sen senator judge rev reverend father mother sister brother
sir lady lord dame madame mme mlle monsieur herr frau prof professor president king queen prince princess
uncle aunt cousin ex""".split())
_FEMALE = frozenset("mrs miss ms lady madame mme mlle dame queen princess sister mother aunt frau".split())
_MALE = frozenset("""mr master sir lord monsieur herr king prince brother father uncle capt captain gen general
col colonel lt lieut lieutenant maj major sgt sergeant adm admiral""".split())
# Capitalised words that start a question or a phrase without being part of a name.
LEADING_WORDS = frozenset("""a an the in on at of to for from by with as and or but if is are was were be do does did
has have had how what which who whom whose why when where while within according after before during given
considering based describe explain imagine write rewrite compose discuss summarize summarise identify
list name tell compare throughout this that these those there it he she they we you i my our""".split())
# Words of a place name: a capitalised run holding one is not a person ("St. Paul", "Rice House").
_PLACE_WORDS = frozenset("""st saint san santa fort street avenue road river lake creek island bay mount mountain
hill falls house hotel hall church cathedral college school county city town village corners bridge valley
point park square company bank railroad station harbor harbour port cape castle abbey""".split())
_SPEECH = r"(?:said|says|replied|asked|answered|cried|exclaimed|whispered|shouted|muttered|continued|added)"
_SPEECH_BEFORE = re.compile(rf"\b{_SPEECH}\s+$")
_SPEECH_AFTER = re.compile(rf"\W{{0,3}}\s*{_SPEECH}\b")
_PLACED = re.compile(r"\b(?:the|in|at|near|into|within|across|towards?)\s+$", re.IGNORECASE)
_TOKEN = r"(?:[A-Z][a-z]{0,5}\.|(?:[A-Z]\.){1,4}|[A-Z][\w\u00c0-\u017f'\u2019-]*)"
_RUN = re.compile(rf"\b{_TOKEN}(?:\s+{_TOKEN})*")
_POSSESSIVE_END = re.compile(r"['\u2019]s?$")
_CONTEXT = 40  # characters around a name searched for the capitalised run that holds it


@dataclass(frozen=True)
class Character:
    entity_id: str
    name: str
    surfaces: tuple[str, ...]  # name and aliases, longest first
    mentions: int

    @property
    def words(self) -> frozenset[str]:
        """The name words of all surfaces, titles and initials left out."""
        return frozenset(w for s in self.surfaces for w in name_words(s))


def name_words(text: str) -> list[str]:
    words = [w.rstrip(".") for w in capitalised_words(text)]
    return [w for w in words if len(w) > 2 and w.lower() not in TITLES and w.lower() not in LEADING_WORDS]


def characters(graph: Graph) -> list[Character]:
    """The graph's PERSON entities, most mentioned first, without those whose names are places
    ("Fort Donelson"); whether one is a person in the book is `is_person`'s (slower) question."""
    out = []
    for e in graph.entities:
        if e.type != "PERSON" or e.name.isupper():
            continue
        surfaces = tuple(sorted({s for s in [e.name, *e.aliases] if name_words(s)}, key=lambda s: (-len(s), s)))
        if surfaces and not {w.rstrip(".").lower() for s in surfaces for w in s.split()} & _PLACE_WORDS:
            out.append(Character(e.entity_id, e.name, surfaces, e.mentions))
    return sorted(out, key=lambda c: (-c.mentions, c.entity_id))


def is_person(c: Character, sources: list[str]) -> bool:
    """A title or speech, and not mostly after "the"/"in"/"at" (see the module doc)."""
    return place_share(c, sources) <= MAX_PLACE_SHARE and (has_title(c) or speaks(c, sources))


def has_title(c: Character) -> bool:
    return any(w.rstrip(".").lower() in TITLES for s in c.surfaces for w in s.split()[:-1])


def speaks(c: Character, sources: list[str]) -> bool:
    """At least MIN_SPEECH occurrences of the name beside a verb of speech ("said Rudolph",
    "Rudolph replied"): places and peoples do not speak."""
    n = 0
    for text in sources:
        for s in c.surfaces:
            for start, end in occurrences(s, text):
                n += bool(_SPEECH_BEFORE.search(text, max(0, start - 16), start) or _SPEECH_AFTER.match(text, end))
                if n >= MIN_SPEECH:
                    return True
    return False


def gender(c: Character) -> str:
    """"f", "m" or "" from the titles the book gives the character (Mrs. Forrester -> f)."""
    titles = {w.rstrip(".").lower() for s in c.surfaces for w in s.split()}
    female, male = bool(titles & _FEMALE), bool(titles & _MALE)
    return "f" if female and not male else "m" if male and not female else ""


def place_share(c: Character, sources: list[str]) -> float:
    """Share of the name's occurrences as a person right after "the" or a preposition of place;
    1.0 when it never occurs as a person."""
    total = placed = 0
    for text in sources:
        for start, _ in occurrences(c.name, text):
            total += 1
            placed += bool(_PLACED.search(text, max(0, start - 12), start))
    return placed / total if total else 1.0


def occurrences(surface: str, text: str) -> list[tuple[int, int]]:
    """Where `surface` occurs as whole words, not inside a place name ("St. Paul")."""
    out = []
    for m in re.finditer(rf"(?<!\w){re.escape(surface)}(?!\w)", text):
        lo, hi = max(0, m.start() - _CONTEXT), min(len(text), m.end() + _CONTEXT)
        words = {w.rstrip(".").lower() for r in _RUN.finditer(text, lo, hi)
                 if r.start() <= m.start() and m.end() <= r.end() for w in r.group(0).split()}
        if not words & _PLACE_WORDS:
            out.append((m.start(), m.end()))
    return out


def names_character(c: Character, text: str) -> bool:
    return any(occurrences(s, text) for s in c.surfaces)


def main_character(question: str, evidence: list[str], cast: list[Character],
                   person=lambda c: True) -> tuple[Character, str] | None:
    """The character (`person(c)` true) named first in the question that its evidence also
    names, and the name as the question writes it."""
    named: list[tuple[int, int, str, Character, str]] = []
    for c in cast:
        for s in c.surfaces:
            found = occurrences(s, question)
            if found and any(occurrences(s, st) for st in evidence):
                named.append((found[0][0], -len(s), c.entity_id, c, s))
    for *_, c, s in sorted(named, key=lambda t: t[:3]):
        if person(c):
            return c, s
    return None


def replace_character(text: str, words: frozenset[str], new_name: str) -> str:
    """Every run of capitalised words that names the character (its name words are some of
    `words`; titles allowed, no place word) becomes `new_name`; leading question words and a
    possessive stay. "Muley Suleiman" is not "Muley Abd Errahman"."""
    def swap(m: re.Match[str]) -> str:
        lead, tokens = _split_run(m.group(0))
        if not names_run(tokens, words):
            return m.group(0)
        tail = _POSSESSIVE_END.search(tokens[-1])
        return " ".join([*lead, new_name + (tail.group(0) if tail else "")])

    return _RUN.sub(swap, text)


def _split_run(run: str) -> tuple[list[str], list[str]]:
    tokens = run.split()
    lead = []
    while tokens and tokens[0].rstrip(".").lower() in LEADING_WORDS:
        lead.append(tokens.pop(0))
    return lead, tokens


def names_run(tokens: list[str], words: frozenset[str]) -> bool:
    found = set(name_words(" ".join(tokens)))
    return bool(found) and found <= words and not {t.rstrip(".").lower() for t in tokens} & _PLACE_WORDS


def still_named(text: str, words: frozenset[str]) -> bool:
    """True when a run of `text` still names the character of `words` (see also the caller's
    check that no name of it survives inside a longer run: "Cousin Cæsar Simon")."""
    return any(names_run(_split_run(m.group(0))[1], words) for m in _RUN.finditer(text))


class Swapper:
    """Makes the swapped negative of a question, if an honest one exists."""

    def __init__(self, index: BookIndex, graph: Graph, seed: int):
        self.index = index
        self.sources = list(index.sources.values())
        self.all = characters(graph)
        self._person: dict[str, bool] = {}
        self.cast = [c for c in self.all if c.mentions >= MIN_MENTIONS and self.is_person(c)]
        self.seed = seed
        self._rows_naming: dict[str, list[int]] = {}

    def is_person(self, c: Character) -> bool:
        if c.entity_id not in self._person:
            self._person[c.entity_id] = is_person(c, self.sources)
        return self._person[c.entity_id]

    def main_character_of(self, question: str, evidence: list[str]) -> tuple[Character, str] | None:
        return main_character(question, evidence, self.all, self.is_person)

    def swap(self, qid: str, question: str, evidence: list[str], answer: str) -> tuple[Swap, str, list[str]] | str:
        """(swap, new question, new statements), or the reason there is none."""
        found = self.main_character_of(question, evidence)
        if found is None:
            return "no character"
        old, surface = found
        named = set(capitalised_words(" ".join([question, *evidence, answer])))
        pool = [c for c in self.cast if c.entity_id != old.entity_id and not c.words & old.words
                and not {w for s in c.surfaces for w in capitalised_words(s)} & named
                and {gender(c), gender(old)} != {"f", "m"}]
        rng = random.Random(f"{self.seed}:{qid}")
        rng.shuffle(pool)
        reason = "no candidate"
        for new in pool[:TRIES]:
            new_q = replace_character(question, old.words, new.name)
            new_ev = [replace_character(s, old.words, new.name) for s in evidence]
            reason = self.support_reason(new, new_q, new_ev, answer, old)
            if reason is None:
                return Swap(surface, new.name, old.entity_id, new.entity_id), new_q, new_ev
        return reason

    def support_reason(self, new: Character, question: str, evidence: list[str], answer: str, old: Character) -> str | None:
        """None when the book does not support the altered question, else why it might."""
        if any(still_named(t, old.words) or any(occurrences(n, t) for n in old.surfaces)
               for t in [question, *evidence]) or not occurrences(new.name, question):
            return "incomplete swap"
        rows = self.rows_naming(new)
        for words in [content_words(s) for s in evidence] + [content_words(question)]:
            if any(located(words, self.index.words[r]) for r in rows):
                return "book supports it"
        return "answer beside new name" if self.answer_beside(new, answer) else None

    def answer_beside(self, c: Character, answer: str) -> bool:
        """A sentence naming `c` holds the (stated) answer: string or >= 60% of its content words."""
        if not answer_is_stated(answer):
            return False
        words = content_words(answer)
        for r in self.rows_naming(c):
            p = self.index.passages[r]
            for s, e in self.index.sentences(r):
                sentence = self.index.sources[p.doc_id][s:e]
                if names_character(c, sentence) and answer_score(answer, words, sentence) is not None:
                    return True
        return False

    def rows_naming(self, c: Character) -> list[int]:
        if c.entity_id not in self._rows_naming:
            self._rows_naming[c.entity_id] = [r for r, p in enumerate(self.index.passages) if names_character(c, p.text)]
        return self._rows_naming[c.entity_id]

    def character(self, entity_id: str) -> Character:
        return next(c for c in self.all if c.entity_id == entity_id)
