"""What an add actually changed in a library's graph tables: the published version against the
one it replaced, row by row.

    python benchmarks/add_diff.py --repo WORK/library.rag [--before WORK/.library.rag.versions/N]

Issue 30: an add writes every graph table whole. `add_touches.py` bounds what an add can change
by the names its documents mention; this counts what did change between two versions: for each
graph table, the rows kept exactly (same id, every column equal but the `row` position, see
rows_by_id), changed (same id, some column differs), new and gone. A delta writer would write the
changed and new rows and delete the gone ones; the rest is what the whole-table write spends on
rows it copies. Nothing is timed. (A version of format 3 on stores no raw graph when spaCy
extracted it: its raw tables are empty, and it is made from the mention parts when read.)
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TABLES = {"entities_governed": "entity_id", "relations_governed": "relation_id", "communities_governed": "community_id",
          "entities_raw": "entity_id", "relations_raw": "relation_id"}


def rows_by_id(root: Path, table: str, key: str) -> dict[str, tuple]:
    import lancedb

    got = lancedb.connect(str(root / "tables")).open_table(table).to_arrow()
    # not compared: name vectors (the same name, the same model: the same vector) and `row`, the
    # row's position in the table, which shifts for every row after one added or gone
    names = [n for n in got.column_names if n not in ("vector", "row")]
    columns = [got.column(n).to_pylist() for n in names]
    ids = got.column(key).to_pylist()
    return {i: tuple(repr(c[k]) for c in columns) for k, i in enumerate(ids)}


def diff(before: Path, after: Path) -> list[dict]:
    out = []
    for table, key in TABLES.items():
        if not (after / "tables" / f"{table}.lance").is_dir() or not (before / "tables" / f"{table}.lance").is_dir():
            continue
        old, new = rows_by_id(before, table, key), rows_by_id(after, table, key)
        same = sum(1 for i, row in new.items() if old.get(i) == row)
        changed = sum(1 for i, row in new.items() if i in old and old[i] != row)
        out.append({"table": table, "rows": len(new), "kept": same, "changed": changed,
                    "new": sum(1 for i in new if i not in old), "gone": sum(1 for i in old if i not in new)})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=Path, required=True, help="the published version")
    ap.add_argument("--before", type=Path, help="the version it replaced (default: the newest under .<repo>.versions/)")
    args = ap.parse_args()
    before = args.before or max((args.repo.parent / f".{args.repo.name}.versions").iterdir())
    print(f"{before} -> {args.repo}")
    print("| table | rows | kept exactly | changed | new | gone | written by a delta |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for d in diff(before, args.repo):
        delta = d["changed"] + d["new"] + d["gone"]
        print(f"| {d['table']} | {d['rows']:,} | {d['kept']:,} | {d['changed']:,} | {d['new']:,} | {d['gone']:,} | "
              f"{delta:,} ({100 * delta / max(1, d['rows']):.1f}%) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
