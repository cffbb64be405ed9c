"""A graph's relations by id, held as columns: what a question's graph view keeps of them.

At 1,000 documents a governed graph has ~110k relations. Held as records they made the query
snapshot (every add writes one, every cold question reads one) slow to write and to load: the
state and its governed view loaded in 2.41 s, 0.83 s with the relations as columns and the
collector paused (benchmarks/snapshot_cost.py). As columns the snapshot holds a few lists, the
evidence spans stay the JSON text they are stored as, and a `Relation` is made only when an
operator reads one.
"""
from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from ..records import Relation

COLUMNS = ("relation_id", "source", "target", "label", "kind", "weight", "passage_ids", "evidence")


class RelationTable(Mapping):
    """relation_id -> Relation over columns (`evidence` as JSON text); rows in the table's order."""

    def __init__(self, columns: dict[str, list[Any]]):
        missing = [c for c in COLUMNS if c not in columns]
        if missing:
            raise ValueError(f"relation columns missing: {', '.join(missing)}")
        self.columns = {c: columns[c] for c in COLUMNS}
        self._rows: dict[str, int] | None = None

    @classmethod
    def of(cls, relations: list[Relation]) -> "RelationTable":
        columns = {c: [getattr(r, c) for r in relations] for c in COLUMNS}
        columns["evidence"] = [json.dumps(e) for e in columns["evidence"]]
        return cls(columns)

    @property
    def rows(self) -> dict[str, int]:
        """relation_id -> row, made on first use (not pickled: a dict is slower to load than to build)."""
        if self._rows is None:
            self._rows = {rid: i for i, rid in enumerate(self.columns["relation_id"])}
        return self._rows

    def __getitem__(self, relation_id: str) -> Relation:
        i = self.rows[relation_id]
        c = self.columns
        return Relation(c["relation_id"][i], c["source"][i], c["target"][i], c["label"][i], c["kind"][i],
                        c["weight"][i], list(c["passage_ids"][i]), json.loads(c["evidence"][i]))

    def __contains__(self, relation_id: object) -> bool:
        return relation_id in self.rows

    def __iter__(self) -> Iterator[str]:
        return iter(self.columns["relation_id"])

    def __len__(self) -> int:
        return len(self.columns["relation_id"])

    def passage_ids(self, relation_id: str) -> list[str]:
        """The relation's passages, without making the record (the operators' most frequent read)."""
        return self.columns["passage_ids"][self.rows[relation_id]]

    def edges(self) -> Iterator[tuple[str, str, float, str]]:
        """(source, target, weight, relation_id) per row, in order."""
        c = self.columns
        return zip(c["source"], c["target"], c["weight"], c["relation_id"])

    def __getstate__(self) -> dict[str, list[Any]]:
        return self.columns

    def __setstate__(self, columns: dict[str, list[Any]]) -> None:
        self.columns = columns
        self._rows = None
