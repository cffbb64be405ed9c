"""Records that flow between stages: the contracts of the pipeline.

Every stage takes records and returns records. They are plain dataclasses so that they can be
pickled into the build cache, written to LanceDB rows (`asdict`) and printed as JSON.
Keep them small: a field belongs here only when two stages need it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class SourceDoc:
    """One loaded input file.

    `text` is the decoded file with newlines normalised to "\\n"; it is stored in the repository
    (sources/<doc_id>.txt) and every offset in the repository points into it. `content_start` and
    `content_end` bound the body once a Project Gutenberg header/licence is stripped: the body is
    `text[content_start:content_end]`, so offsets stay honest without copying.
    """

    doc_id: str
    path: str
    text: str
    sha256: str  # of the raw bytes on disk
    encoding: str
    content_start: int = 0
    content_end: int | None = None  # None = end of text

    @property
    def body(self) -> str:
        return self.text[self.content_start : self.content_end]


@dataclass
class Passage:
    """A token window of a source: the textual floor. `text == source.text[start:end]`."""

    passage_id: str
    doc_id: str
    file: str
    start: int
    end: int
    text: str
    n_tokens: int
    ordinal: int  # position of the passage in its document


@dataclass
class Mention:
    """One mention of a candidate entity in a passage (output of extraction)."""

    name: str  # surface form as it appears
    label: str  # spaCy label (PERSON, ORG, GPE, ...) or NOUN_PHRASE
    passage_id: str
    start: int  # offsets into the source text
    end: int


@dataclass
class Entity:
    entity_id: str
    name: str
    type: str
    aliases: list[str] = field(default_factory=list)
    mentions: int = 0
    passage_ids: list[str] = field(default_factory=list)
    description: str = ""


@dataclass
class Relation:
    """An edge of the graph. `kind` is "cooccurs" (same sentence) or "svo" (parsed triple)."""

    relation_id: str
    source: str  # entity_id
    target: str  # entity_id
    label: str
    kind: str
    weight: float
    passage_ids: list[str] = field(default_factory=list)
    # evidence sentences as [passage_id, start, end] spans into the source text
    evidence: list[list[Any]] = field(default_factory=list)


@dataclass
class Community:
    community_id: str
    level: int
    parent: str | None
    entity_ids: list[str] = field(default_factory=list)
    passage_ids: list[str] = field(default_factory=list)
    title: str = ""
    summary: str = ""


@dataclass
class Graph:
    """Entities + relations + communities: the graph view G(D) of the paper."""

    entities: list[Entity] = field(default_factory=list)
    relations: list[Relation] = field(default_factory=list)
    communities: list[Community] = field(default_factory=list)

    def stats(self) -> dict[str, int]:
        linked = {r.source for r in self.relations} | {r.target for r in self.relations}
        return {
            "entities": len(self.entities),
            "relations": len(self.relations),
            "communities": len(self.communities),
            "isolated": sum(1 for e in self.entities if e.entity_id not in linked),
        }


def to_dict(record: Any) -> dict[str, Any]:
    return asdict(record)
