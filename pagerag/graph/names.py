"""Name analysis for alias merging: possessives, leading articles, titles/honorifics, case."""
from __future__ import annotations

import re
from dataclasses import dataclass

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
_POSSESSIVE = re.compile(r"(?:'s|')$")
_TOKEN_EDGE = " \t\n.,;:!?\"'`()[]{}*_“”‘’—–"


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


def strip_possessive(name: str) -> str:
    """ "Scrooge's" -> "Scrooge", "Jones'" -> "Jones" (possessive at the end of the name only)."""
    name = name.replace("\u2019", "'").strip()
    stripped = _POSSESSIVE.sub("", name).rstrip()
    return stripped if stripped else name


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
