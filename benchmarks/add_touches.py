"""What each add of a grown library touches in its governed graph, against what the add recomputes.

    python benchmarks/add_touches.py --repo WORK/library.rag    # a library grown by benchmarks/library.py

Issue 30 asks for an add whose driver work follows what it adds. Today an add recomputes the whole
library's graph (every raw relation repointed, every governed table written). This prints, for
each add of the library (its documents grouped by the time they were added), how many of the
library's governed entities its documents mention and how many pairs of them share one of its
sentences: the entities whose rows an add can change, and an upper bound on the governed relations
it can change (co-occurrences and subject-verb-object triples are both within a sentence). If
these stay flat from add to add while the library grows, an add that writes only what it changes
has driver work that does not grow with the library.

Approximations, said here: every add is attributed against the final library's governed entities
(their aliases, by name: a name of a document maps to the entity holding it as an alias); merges
made later are read back into earlier adds. Nothing is timed.
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def alias_index(repo) -> dict[str, str]:
    """Each alias (a raw entity's name) -> the governed entity holding it."""
    rows = repo.store.columns("entities_governed", ["entity_id", "aliases"])
    out: dict[str, str] = {}
    for entity_id, aliases in zip(rows["entity_id"], rows["aliases"]):
        for alias in json.loads(aliases) if isinstance(aliases, str) else aliases:
            out.setdefault(alias, entity_id)
    return out


def touched_by(repo, doc_ids: list[str], alias_to: dict[str, str]) -> tuple[set[str], set[tuple[str, str]]]:
    """(governed entities the documents mention, pairs of them sharing a sentence of theirs)."""
    from pagerag.graph.extract_nlp import mentions_from_dict
    from pagerag.repository import mention_part_path

    entities: set[str] = set()
    pairs: set[tuple[str, str]] = set()
    for doc_id in doc_ids:
        with gzip.open(mention_part_path(repo.root, doc_id), "rt", encoding="utf-8") as fh:
            part = mentions_from_dict(json.load(fh))
        for sentence in part.sentences:
            ids = sorted({alias_to[name] for name, _ in sentence.keys if name in alias_to})
            entities.update(ids)
            pairs.update((a, b) for n, a in enumerate(ids) for b in ids[n + 1:])
    return entities, pairs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=Path, required=True, help="A library grown by adds (benchmarks/library.py's library.rag).")
    args = ap.parse_args()
    from pagerag.repository import Repository

    repo = Repository.open(args.repo)
    adds: dict[str, list[str]] = defaultdict(list)
    for source in repo.manifest["sources"]:
        adds[source["added"]].append(source["doc_id"])
    alias_to = alias_index(repo)
    n_entities = len(repo.store.columns("entities_governed", ["entity_id"])["entity_id"])
    n_relations = len(repo.store.columns("relations_governed", ["source"])["source"])
    n_raw = len(repo.store.columns("relations_raw", ["source"])["source"])
    print(f"{args.repo}: {len(repo.manifest['sources'])} documents in {len(adds)} adds; governed graph "
          f"{n_entities:,} entities, {n_relations:,} relations ({n_raw:,} raw relations, all repointed at every add today)")
    print("| add | documents | library's documents after it | governed entities its documents mention "
          "| pairs of them sharing a sentence (relations it can change) |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    total = 0
    for n, added in enumerate(sorted(adds), 1):
        docs = adds[added]
        total += len(docs)
        entities, pairs = touched_by(repo, docs, alias_to)
        print(f"| {n} | {len(docs)} | {total} | {len(entities):,} ({100 * len(entities) / n_entities:.1f}%) | "
              f"{len(pairs):,} ({100 * len(pairs) / n_relations:.1f}%) |")


if __name__ == "__main__":
    main()
