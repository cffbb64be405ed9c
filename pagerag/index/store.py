"""Table storage behind a small Protocol, with a registry so a new backend is one file.

The default backend is LanceDB, embedded on disk: passages with their vectors, and the graph
tables (entities, relations, communities; governed and raw).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol

import numpy as np


# Rows to write: a list of dicts, or columns (name -> one value per row), which a large table
# (a library's raw relations: 400k rows) can be handed without a dict per row.
Rows = "list[dict[str, Any]] | dict[str, list[Any]]"


class TableStore(Protocol):
    def write(self, name: str, rows: Rows, vectors: np.ndarray | None = None) -> None: ...
    def append(self, name: str, rows: Rows, vectors: np.ndarray | None = None) -> None: ...
    def read(self, name: str) -> list[dict[str, Any]]: ...
    def iter_rows(self, name: str) -> Iterator[dict[str, Any]]: ...
    def columns(self, name: str, names: list[str], decode: bool = True) -> dict[str, list[Any]]: ...
    def count(self, name: str) -> int: ...
    def search(self, name: str, vector: np.ndarray, k: int) -> list[tuple[int, float]]: ...
    def vectors(self, name: str) -> np.ndarray: ...
    def tables(self) -> list[str]: ...


_STORES: dict[str, Callable[[Path], TableStore]] = {}


def register_store(name: str, factory: Callable[[Path], TableStore]) -> None:
    _STORES[name] = factory


def open_store(name: str, path: Path) -> TableStore:
    if name not in _STORES:
        raise KeyError(f"unknown table store '{name}' (known: {', '.join(sorted(_STORES))})")
    return _STORES[name](path)


def _count(rows: Rows) -> int:
    return len(next(iter(rows.values()), [])) if isinstance(rows, dict) else len(rows)


# Columns that hold nested lists of mixed types are kept as JSON text: Arrow wants one type.
_JSON_COLUMNS = {"evidence"}


def _decode_all(values: list[str]) -> list[Any]:
    """Many JSON values in one json.loads call (each is one complete JSON text, as written)."""
    return json.loads("[" + ",".join(values) + "]") if values else []


def import_lancedb():
    import os

    # lance logs WARN lines from Rust straight to the terminal; users should not see them.
    os.environ.setdefault("LANCE_LOG", "error")
    os.environ.setdefault("LANCEDB_LOG", "error")
    import lancedb

    return lancedb


class LanceStore:
    """LanceDB tables in one directory. Every row keeps its position as `row` (int)."""

    def __init__(self, path: Path):
        lancedb = import_lancedb()
        self.path = Path(path)
        self._db = lancedb.connect(str(self.path))
        self._searched: dict[str, Any] = {}  # tables opened for search (2 ms an open), until a write

    def write(self, name: str, rows: Rows, vectors: np.ndarray | None = None) -> None:
        self._searched.pop(name, None)
        self._db.create_table(name, data=self._arrow(rows, vectors, 0), mode="overwrite")

    def append(self, name: str, rows: Rows, vectors: np.ndarray | None = None) -> None:
        """Add rows after the table's last (`row` continues): a new LanceDB version whose files are
        all new, so a hard-linked copy of the table (a library's previous version) is untouched."""
        if not _count(rows):
            return
        self._searched.pop(name, None)
        table = self._db.open_table(name)
        table.add(self._arrow(rows, vectors, table.count_rows()))

    def _arrow(self, rows: Rows, vectors: np.ndarray | None, first: int):
        """An Arrow table of the rows, `row` numbered from `first`: converted a column at a time,
        so no second copy of every column is held while the table is made."""
        import pyarrow as pa

        n = _count(rows)
        if not n:
            return pa.table({"row": pa.array([], pa.int64())})
        columns = rows if isinstance(rows, dict) else {key: [r[key] for r in rows] for key in rows[0]}
        arrays = {"row": pa.array(range(first, first + n), pa.int64())}
        for key, values in columns.items():
            arrays[key] = pa.array([json.dumps(v) for v in values] if key in _JSON_COLUMNS else values)
        table = pa.table(arrays)
        if vectors is not None:
            flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).ravel())
            table = table.append_column("vector", pa.FixedSizeListArray.from_arrays(flat, vectors.shape[1]))
        return table

    def read(self, name: str) -> list[dict[str, Any]]:
        return list(self.iter_rows(name))

    def iter_rows(self, name: str, batch: int = 8192) -> Iterator[dict[str, Any]]:
        """The rows in `row` order, made into dicts a batch at a time: a caller that turns each
        into a record never holds the whole table as dicts (a library's raw relations as dicts
        are a few hundred MB)."""
        table = self._db.open_table(name).to_arrow()
        if "vector" in table.column_names:
            table = table.drop_columns(["vector"])
        json_columns = sorted(_JSON_COLUMNS & set(table.column_names))
        for chunk in table.sort_by("row").to_batches(max_chunksize=batch):
            rows = chunk.to_pylist()
            for key in json_columns:  # one json.loads a batch, not one a row
                for row, value in zip(rows, _decode_all(chunk.column(key).to_pylist())):
                    row[key] = value
            for row in rows:
                row.pop("row", None)
                yield row

    def columns(self, name: str, names: list[str], decode: bool = True) -> dict[str, list[Any]]:
        """Some columns of a table, in no particular row order (ask for `row` to order them): only
        those are read from disk (a library's raw relations have a wide evidence column the caller
        may not need). decode=False leaves JSON columns as their JSON text."""
        table = self._db.open_table(name)
        if not table.count_rows():  # an empty table was written without its columns (nothing to type them by)
            return {key: [] for key in names}
        found = table.search().select(list(names)).limit(max(1, table.count_rows())).to_arrow()
        out = {key: found.column(key).to_pylist() for key in names}
        for key in _JSON_COLUMNS & out.keys() if decode else ():  # decoded as iter_rows does
            out[key] = _decode_all(out[key])
        return out

    def count(self, name: str) -> int:
        """The table's rows (from its metadata: nothing is read)."""
        return self._db.open_table(name).count_rows()

    def vectors(self, name: str) -> np.ndarray:
        table = self._db.open_table(name).to_arrow().sort_by("row")
        column = table.column("vector").combine_chunks()
        return np.asarray(column.values.to_numpy(zero_copy_only=False), dtype=np.float32).reshape(len(table), -1)

    def index_vectors(self, name: str) -> str:
        """Give the table's vectors an ANN index (IVF-HNSW-SQ, cosine), or bring the one it has up
        to date with rows appended since (LanceDB's optimize); returns what was done."""
        self._searched.pop(name, None)
        table = self._db.open_table(name)
        if any(getattr(i, "columns", None) == ["vector"] or "vector" in str(i) for i in table.list_indices()):
            table.optimize()
            return "updated"
        rows = table.count_rows()
        table.create_index(metric="cosine", index_type="IVF_HNSW_SQ", num_partitions=max(1, int(rows ** 0.5) // 4),
                           replace=True)
        return "created"

    def has_vector_index(self, name: str) -> bool:
        try:
            return any("vector" in str(getattr(i, "columns", i)) for i in self._db.open_table(name).list_indices())
        except Exception:
            return False

    def search(self, name: str, vector: np.ndarray, k: int, refine: int = 4) -> list[tuple[int, float]]:
        """(row, cosine similarity) of the k nearest rows, best first (through the ANN index when
        the table has one: `refine` times k candidates, re-scored exactly). refine = 4: 2 was
        1.6 ms faster a search and as good on the 26-book library's first index (225
        training-book questions: top 10 1.000), but on an index built afresh after a remove the
        growth benchmark's top-10 recall fell to 0.978."""
        table = self._searched.get(name)
        if table is None:
            table = self._searched[name] = self._db.open_table(name)
        hits = (
            table.search(np.asarray(vector, dtype=np.float32))
            .distance_type("cosine").limit(k).refine_factor(refine).select(["row"]).to_arrow()
        )
        return [(int(r), 1.0 - float(d)) for r, d in zip(hits["row"].to_pylist(), hits["_distance"].to_pylist())]

    def tables(self) -> list[str]:
        listed = self._db.list_tables()
        names = getattr(listed, "tables", listed)
        return sorted(names)


register_store("lancedb", LanceStore)
