"""Check a repository version end to end before it is published: counts, offsets, the lexical
index and every graph element's provenance. A build or add validates its staging directory; a
fault raises RepositoryError and the published version stays as it was."""
from __future__ import annotations

import itertools
from pathlib import Path

from .errors import RepositoryError
from .graph.provenance import element_problems, provenance_problems
from .records import Passage
from .repository import GRAPH_KINDS, NAMES_TABLE, Repository, mention_part_path


def validate_repository(path: Path, docs: set[str] | None = None, graphs_checked: bool = False) -> Repository:
    """Open `path` and check it end to end: counts, offsets, provenance ids. Raise on any fault.
    With `docs` (a library's new documents), passages are checked against their sources, and BM25
    shards against their passages, only for those documents: the others were checked when they
    came in, and their files are the same.
    `graphs_checked`: the writer checked the graphs' provenance on its records before writing
    them (check_graph_records); the stored graph tables are then checked for their row counts only
    (reading their provenance columns back was ~5 s of an add at 1,000 documents, 0.4 s on the
    records)."""
    repo = Repository.open(path)
    passages = repo.passages
    expected = repo.manifest.get("stats", {}).get("passages")
    if expected is not None and expected != len(passages):
        raise RepositoryError(f"{path}: {len(passages)} passages stored, manifest says {expected}")
    listed = [s["doc_id"] for s in repo.manifest.get("sources", [])]
    if listed and set(listed) != {p.doc_id for p in passages}:
        raise RepositoryError(f"{path}: the passages' documents are not the manifest's sources")
    for p in passages:
        if (docs is None or p.doc_id in docs) and repo.source_text(p.doc_id)[p.start : p.end] != p.text:
            raise RepositoryError(f"{path}: passage {p.passage_id} does not match its source span")
    for doc_id in {p.doc_id for p in passages} if docs is None else docs:
        structure, length = repo.structure(doc_id), len(repo.source_text(doc_id))
        if any(not 0 <= x.start <= length for x in [*structure.pages, *structure.headings]):
            raise RepositoryError(f"{path}: the structure map of {doc_id} points outside its text")
    if repo.passage_vectors.shape[0] != len(passages):
        raise RepositoryError(f"{path}: passage vectors do not match passages")
    if docs is not None:  # an add or remove: its new documents' shards
        problem = new_shard_problem(repo, passages, docs)
    else:
        problem = None if repo.bm25.n_docs == len(passages) else f"{repo.bm25.n_docs} passages indexed"
    if problem:
        raise RepositoryError(f"{path}: BM25 index does not match passages ({problem})")
    for kind in GRAPH_KINDS:
        if repo.derived(kind) and graphs_checked:  # made from the mention parts when read: they must all be there
            problems, what = mention_part_problems(repo, passages), "mention parts"
        elif repo.derived(kind):
            problems, what = provenance_problems(repo.graph_from_mentions(), passages), "provenance"  # not kept
        elif graphs_checked:
            problems, what = stored_count_problems(repo, kind) + name_vector_problems(repo, kind), "tables"
        else:
            problems, what = stored_provenance_problems(repo, kind, passages) + name_vector_problems(repo, kind), "provenance"
        if problems:
            raise RepositoryError(f"{path}: {kind} graph {what}: {problems[0]}")
    return repo


def mention_part_problems(repo: Repository, passages: list[Passage]) -> list[str]:
    """A mention part missing for a document (the raw graph is made from them when read)."""
    return [f"no mention part for {doc_id}" for doc_id in sorted({p.doc_id for p in passages})
            if not mention_part_path(repo.root, doc_id).is_file()]


def name_vector_problems(repo: Repository, kind: str) -> list[str]:
    """A stored entity whose name has no vector in the names table (format 3 on)."""
    if not repo.names_table:
        return []
    have = set(repo.store.columns(NAMES_TABLE, ["name"])["name"])
    missing = [n for n in repo.store.columns(f"entities_{kind}", ["name"])["name"] if n not in have]
    return [f"{len(missing)} entity names without a vector (first: {missing[0]!r})"] if missing else []


def new_shard_problem(repo: Repository, passages: list[Passage], docs: set[str]) -> str | None:
    """A library's check of its lexical index: the new documents' BM25 shards against their
    passages, and a shard file for every other document (linked from the version that checked it).
    Merging every shard to count them was 0.4 s of an add at 1,000 documents."""
    from .index.lexical import LEXICAL_DIR, ShardedBM25

    directory = repo.root / LEXICAL_DIR
    if not directory.is_dir():
        return "no lexical/ directory"
    missing = next((d for d in dict.fromkeys(p.doc_id for p in passages) if not (directory / f"{d}.npz").is_file()), None)
    if missing is not None:
        return f"no shard for {missing}"
    try:
        ShardedBM25.load(directory, [p.doc_id for p in passages if p.doc_id in docs])
    except Exception as exc:  # noqa: BLE001 - a torn or foreign file (np.load raises several kinds): a fault, named
        return f"{exc.__class__.__name__}: {exc}"
    return None


def check_graph_records(where: Path, graphs: dict, passages: list[Passage]) -> None:
    """Raise on the first provenance fault of the graphs' records (before they are written)."""
    for kind, graph in graphs.items():
        problems = provenance_problems(graph, passages)
        if problems:
            raise RepositoryError(f"{where}: {kind} graph provenance: {problems[0]}")


def stored_count_problems(repo: Repository, kind: str) -> list[str]:
    """A stored graph's tables against the manifest's counts of what was written."""
    stats = repo.manifest.get("stats", {})
    suffix = "_raw" if kind == "raw" else ""
    problems = []
    for table in ("entities", "relations", "communities"):
        expected, stored = stats.get(f"{table}{suffix}"), repo.store.count(f"{table}_{kind}")
        if expected is not None and stored != expected:
            problems.append(f"{stored} {table} stored, manifest says {expected}")
    return problems


def stored_provenance_problems(repo: Repository, kind: str, passages: list[Passage]) -> list[str]:
    """provenance_problems of a stored graph from the columns it reads (ids, passage ids,
    evidence): no records are made and none is kept (making them was 10 s of an add at 1,000
    documents, and holding both graphs ~0.5 GB of a 26-book add's peak)."""
    entities = repo.store.columns(f"entities_{kind}", ["entity_id", "passage_ids"])
    communities = repo.store.columns(f"communities_{kind}", ["community_id", "passage_ids"])
    relations = repo.store.columns(f"relations_{kind}", ["relation_id", "passage_ids", "evidence"])
    elements = itertools.chain(zip(entities["entity_id"], entities["passage_ids"]),
                               zip(relations["relation_id"], relations["passage_ids"]),
                               zip(communities["community_id"], communities["passage_ids"]))
    return element_problems(elements, zip(relations["relation_id"], relations["evidence"]), passages)
