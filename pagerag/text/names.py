"""Names: finding the named things of a question (or a passage's opening words), and the forms
names are compared in. The one name extractor that entity linking, the sufficiency rule and
the RCS features share.

A name is a quoted string, or a run of capitalised words that may hold lower-case connectors
("Battle of the Somme", "Ludwig van Beethoven") and titles with their full stop ("Mr. Fezziwig",
"H. G. Wells"); punctuation between words ends a run ("Scrooge, Marley" are two names). Leading
function words are not part of a name even when a sentence capitalises them ("Which", "The",
"According to Fred"), and a trailing possessive is dropped ("Scrooge's" -> "Scrooge").

Title analysis for alias merging (title classes and the person groups they imply) lives here
too, so one module knows what a title is.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from .words import FRAME_WORDS, STOPWORDS

_TOKEN = re.compile(r"[\w\u00C0-\u024F][\w\u00C0-\u024F'\u2019\-–]*")
_QUOTED = re.compile(r"\"([^\"]{1,80})\"|\u201c([^\u201d]{1,80})\u201d")
# Lower-case words that may sit inside a name between capitalised words ("Battle of the Somme").
# Not "and": "Tolliver and Agnes" are two people.
CONNECTORS = frozenset({"of", "the", "de", "du", "da", "di", "del", "la", "le", "von", "van", "der", "&"})
# Words a question starts with that a sentence capitalises; never the first word of a name.
OPENERS = STOPWORDS | FRAME_WORDS

# Title word -> title class. Two forms with different classes ("Mr. Fezziwig", "Mrs. Fezziwig")
# are different people and never merge, whatever else agrees.
TITLES: dict[str, str] = {
    "mr": "mr", "mister": "mr", "mrs": "mrs", "missus": "mrs", "miss": "miss", "ms": "ms",
    "master": "master", "sir": "sir", "madam": "madam", "madame": "madam", "dame": "dame",
    "lady": "lady", "lord": "lord", "dr": "dr", "doctor": "dr", "captain": "captain", "capt": "captain",
    "rev": "rev", "reverend": "rev", "prof": "prof", "professor": "prof", "colonel": "colonel",
    "col": "colonel", "general": "general", "gen": "general", "uncle": "uncle", "aunt": "aunt",
    "father": "father", "mother": "mother", "brother": "brother", "sister": "sister",
}
# Title class -> the person group it implies. Forms whose titles imply different groups are
# different people ("Mr. Fezziwig" / "Mrs. Fezziwig", "Miss Bates" / "Mrs. Bates"); male titles
# share one group ("Mr. Scrooge", "Master Scrooge", "Uncle Scrooge"); professional titles
# (captain, doctor, …) imply none and are compatible with any.
TITLE_GROUPS: dict[str, str | None] = {
    "mr": "male", "master": "male", "sir": "male", "lord": "male", "uncle": "male", "father": "male",
    "brother": "male", "mrs": "mrs", "miss": "miss", "ms": "miss", "madam": "madam", "dame": "dame",
    "lady": "lady", "aunt": "aunt", "mother": "mother", "sister": "sister",
}
# Words of a name that do not identify who it is: titles, ranks, "old"/"young" ("Old Fezziwig").
NOT_IDENTIFYING = frozenset(TITLES) | {"st", "saint", "king", "queen", "old", "young"}


@dataclass
class Name:
    """One named thing in a text: `text == source[start:end]` minus a trailing possessive."""

    text: str
    start: int
    end: int
    words: list[str] = field(default_factory=list)  # the words that identify it: no titles, connectors, possessive


def find_names(text: str) -> list[Name]:
    """The named things of `text`, in order (see the module docstring)."""
    quoted = [(m.start(), m.end(), (m.group(1) or m.group(2)).strip()) for m in _QUOTED.finditer(text)]
    names = [_name(q, s + 1, e - 1) for s, e, q in quoted if q]
    tokens = [m for m in _TOKEN.finditer(text) if not any(s <= m.start() < e for s, e, _ in quoted)]
    run: list[re.Match] = []
    for i, tok in enumerate(tokens):
        if run and not _joined(text, run[-1], tok):
            names += _close(text, run)
            run = []
        word = tok.group(0)
        if word[:1].isupper() or (run and word.lower() in CONNECTORS and _capital_follows(text, tokens, i)):
            run.append(tok)
        elif run:
            names += _close(text, run)
            run = []
    names += _close(text, run)
    return sorted((n for n in names if n.text), key=lambda n: n.start)


def name_texts(text: str) -> list[str]:
    """The distinct names of `text` as written (possessive dropped), in order."""
    return list(dict.fromkeys(n.text for n in find_names(text)))


def _capital_follows(text: str, tokens: list[re.Match], i: int) -> bool:
    """A chain of connectors from token i ends in a capitalised word of the same name."""
    j = i + 1
    while j < len(tokens) and _joined(text, tokens[j - 1], tokens[j]) and tokens[j].group(0).lower() in CONNECTORS:
        j += 1
    return j < len(tokens) and _joined(text, tokens[j - 1], tokens[j]) and tokens[j].group(0)[:1].isupper()


def _joined(text: str, left: re.Match, right: re.Match) -> bool:
    """Two tokens are in one name when only spaces separate them, or a full stop after a title or
    an initial ("Mr. Scrooge", "H. G. Wells")."""
    gap = text[left.end() : right.start()]
    if not gap.strip():
        return True
    word = left.group(0)
    return gap.strip() == "." and (word.lower() in TITLES or (len(word) == 1 and word.isupper()))


def _close(text: str, run: list[re.Match]) -> list[Name]:
    while run and run[0].group(0).lower() in OPENERS | CONNECTORS:
        run = run[1:]  # sentence-initial 'Which', 'The', 'According' ... are not part of the name
    while run and run[-1].group(0).lower() in CONNECTORS:
        run = run[:-1]
    if not run or (len(run) == 1 and run[0].group(0) == "I"):
        return []
    return [_name(text[run[0].start() : run[-1].end()], run[0].start(), run[-1].end())]


def _name(surface: str, start: int, end: int) -> Name:
    stripped = re.sub(r"['\u2019]s?$", "", surface).rstrip() or surface  # "Scrooge's" -> "Scrooge"
    end -= len(surface) - len(stripped)
    core = [w for w in (strip_possessive(t).rstrip(".") for t in stripped.split())
            if len(w) > 1 and w.lower() not in NOT_IDENTIFYING | STOPWORDS | CONNECTORS]
    return Name(stripped, start, end, core)


# --------------------------------------------------------------------------------------------
# Forms names are compared in

_POSSESSIVE = re.compile(r"['\u2019]s\b")
_POSSESSIVE_END = re.compile(r"(?:'s|')$")
_NON_WORD = re.compile(r"[^\w\s-]")
_SPACES = re.compile(r"\s+")
_LEADING_ARTICLE = re.compile(r"^(the|a|an) ")
_TOKEN_EDGE = " \t\n.,;:!?\"'`()[]{}*_“”‘’—–"


def strip_possessive(name: str) -> str:
    """ "Scrooge's" -> "Scrooge", "Jones'" -> "Jones" (possessive at the end of the name only)."""
    name = name.replace("\u2019", "'").strip()
    stripped = _POSSESSIVE_END.sub("", name).rstrip()
    return stripped if stripped else name


def normalise_name(text: str) -> str:
    """The form names are looked up in: lower case, no possessive 's, no punctuation, no article."""
    text = _POSSESSIVE.sub("", text.replace("\u2019", "'").lower())
    text = _SPACES.sub(" ", _NON_WORD.sub(" ", text)).strip()
    return _LEADING_ARTICLE.sub("", text)


def normalise_mention(text: str) -> str:
    """The form a mention is searched for inside passage text: lower case, straight quotes,
    single spaces (punctuation kept, so it matches the text as written)."""
    text = text.replace("\u2019", "'").replace("\u2018", "'").lower()
    return _SPACES.sub(" ", text).strip()


@dataclass(frozen=True)
class ParsedName:
    title: str | None  # title class, e.g. "mr"
    core: str  # case-folded name without title, article and possessive: "ebenezer scrooge"

    @property
    def group(self) -> str | None:
        """The person group the title implies (None: no title, or a professional one)."""
        return TITLE_GROUPS.get(self.title) if self.title else None

    @property
    def tokens(self) -> list[str]:
        return self.core.split()


# Governance parses each of a library's ~50k names several times (its clusters' best names, the
# name pairs): 0.3 s of an add at 1,000 documents. A ParsedName is frozen, so one can be shared.
@functools.lru_cache(maxsize=1 << 17)
def parse_name(name: str) -> ParsedName:
    """ "Mr. Scrooge's" -> (mr, "scrooge"); "the Pequod" -> (None, "pequod"); "SCROOGE" -> "scrooge"."""
    tokens = [t.strip(_TOKEN_EDGE) for t in strip_possessive(name).casefold().split()]
    tokens = [t for t in tokens if t]
    if len(tokens) > 1 and tokens[0] in ("the", "a", "an"):
        tokens = tokens[1:]
    title = None
    if len(tokens) > 1 and tokens[0] in TITLES:
        title = TITLES[tokens[0]]
        tokens = tokens[1:]
    return ParsedName(title, " ".join(tokens))


@functools.lru_cache(maxsize=1 << 17)
def display_form(name: str) -> str:
    """The form shown for a surface name: whitespace collapsed, possessive removed, case kept."""
    return " ".join(strip_possessive(name).split())


def singular_candidates(core: str) -> list[str]:
    """Possible singulars of a noun phrase's last word: "ghosts" -> ["ghost"], "bodies" -> ["body"]."""
    head, _, last = core.rpartition(" ")
    prefix = f"{head} " if head else ""
    out = []
    if last.endswith("ies") and len(last) > 4:
        out.append(last[:-3] + "y")
    if last.endswith("es") and len(last) > 3:
        out.append(last[:-2])
    if last.endswith("s") and not last.endswith("ss") and len(last) > 3:
        out.append(last[:-1])
    return [prefix + s for s in out]
