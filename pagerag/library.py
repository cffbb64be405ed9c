"""The repository as a library: one engine for `build`, `add` and `remove`.

A library is a repository whose text stages are per document. Each document is chunked,
embedded (in blocks that never cross a document, so its vectors do not depend on its
neighbours) and read by spaCy into its own *mention part* (`extract/<doc>.json.gz`: the
mentions, sentences and triples of that document alone). Everything global is recomputed from
those parts: the raw graph (build_raw_graph over the parts in document-id order), governance
(whose embedding merge takes the base's similar name pairs from its memo, graph/name_pairs.py),
communities (Leiden), summaries (reused for every community whose content did not change),
entity-name vectors (reused by name) and BM25 (rebuilt; it is the cheapest stage). So
build(A+B), build(A)+add(B) and build(A+B)+remove(B) give the same passages, vectors and
governed graph as a build of the same documents; only the communities can differ where Leiden
sees another graph.

`update()` takes the published base (or none, for a build), the new documents and the ids to
remove; it writes the next version into a staging directory beside the repository (hard links
to the base's unchanged files, the passage table appended to), validates it and publishes it
with the same atomic swap as a build (repository.publish), under the repository's writer lock.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .errors import InputError
from .graph.name_pairs import NAME_MEMO, load_memo
from .records import Community, Graph, Passage, SourceDoc
from .repository import mention_part_path
from .settings import Settings
from .memory import cyclic_gc_paused
from .stages import DocumentParts, MemoEmbedder, StageCache, digest, embed_name_vectors, run_timed

WINDOWS_DIR = "windows"
# After the passage pass, the encoder gives back its compiled model's memory when the pass
# covered at least this many passages (OpenVINO: ~150 MB more after a book's pass, under spaCy's
# workers, which fork next). After a small document's few batch shapes it holds little, and
# compiling it again for the entity names that follow is ~0.2 s of a small build.
RELEASE_AFTER_PASSAGES = 200


@dataclass
class Base:
    """The published version an add or remove starts from."""

    repo: Any  # repository.Repository
    keep: list[dict[str, Any]]  # the manifest's source records of the documents kept
    removed: list[str] = field(default_factory=list)


def open_base(path: Path, remove: list[str] | None = None) -> Base:
    from .repository import Repository

    repo = Repository.open(path)
    sources = repo.manifest.get("sources", [])
    known = {s["doc_id"] for s in sources}
    for doc_id in remove or []:
        if doc_id not in known:
            raise InputError(f"{path}: no document {doc_id!r} in this library (see `pagerag docs --repo {path}`)")
    gone = set(remove or [])
    return Base(repo, [s for s in sources if s["doc_id"] not in gone], sorted(gone))


# --------------------------------------------------------------------------------------------
# Text stages, per document


def text_stages(docs: list[SourceDoc], settings: Settings, cache: StageCache, progress, timings, llm=None,
                executor: str = "local", ray_address: str | None = None) -> list[DocumentParts]:
    """Chunk, embed and (nlp) read every new document: locally, or as Ray tasks across a cluster
    (pagerag.distributed, imported only then)."""
    if executor == "ray":
        from .distributed import ray_text_stages

        return ray_text_stages(docs, settings, progress, timings, llm is None, ray_address)
    from .index.embedding_model import get_wordpiece_counter
    from .text.chunk import chunk_document

    counter = get_wordpiece_counter(settings.embed.model)
    with progress.stage("chunk", sum(len(d.body) for d in docs)) as advance:
        def chunk_all():
            out = []
            for doc in docs:
                out.append(chunk_document(doc, settings.chunk, counter))
                advance(len(doc.body))
            return out
        chunked = run_timed(timings, "chunk", chunk_all)
    embedded = run_timed(timings, "embed", lambda: embed_documents(docs, chunked, settings, cache, progress))
    parts = [DocumentParts(doc, passages, v, windows=w) for doc, passages, (v, w) in zip(docs, chunked, embedded)]
    if llm is None:
        t0 = time.perf_counter()
        with progress.stage("extract", sum(len(p.passages) for p in parts)) as advance:
            for part in parts:
                part.mentions = read_mentions(part, settings, cache, advance)
        timings["extract"] = round(time.perf_counter() - t0, 3)
    return parts


def embed_documents(docs: list[SourceDoc], chunked: list[list[Passage]], settings: Settings, cache: StageCache,
                    progress) -> list[tuple[np.ndarray, Any]]:
    """Per document: passage vectors and the WindowTable of its sentence windows (None with
    embed.windows off), from one pass in cached blocks of EMBED_BLOCK passages of one document."""
    from .index.encoder import get_encoder
    from .stages import embed_document

    with progress.stage("embed", sum(len(c) for c in chunked)) as advance:
        encoder = get_encoder(settings.embed)
        parts = [embed_document(passages, doc.text, encoder, settings, cache, advance)
                 for doc, passages in zip(docs, chunked)]
    if sum(len(c) for c in chunked) >= RELEASE_AFTER_PASSAGES:
        encoder.release_memory()  # the passage batches' arena is not needed by the names embedded later
    return parts


def read_mentions(part: DocumentParts, settings: Settings, cache: StageCache, advance=None):
    from .graph.extract_nlp import collect_mentions

    key = digest(part.doc.sha256, settings.chunk.model_dump(), [(p.passage_id, p.start, p.end) for p in part.passages],
                 settings.extract.model_dump(exclude={"n_process"}))
    found = cache.get_or_compute("extract", key, lambda: collect_mentions(part.passages, settings.extract, advance))
    if cache.hits and cache.hits[-1] == "extract" and advance:
        advance(len(part.passages))
    from .graph.extract_nlp import _Accumulator

    return found.get(part.doc.doc_id, _Accumulator()) if isinstance(found, dict) else found


# --------------------------------------------------------------------------------------------
# The whole library


@dataclass
class Library:
    """Every document of the next version: sources, passages, vectors, mention parts."""

    sources: list[dict[str, Any]]  # manifest source records, in passage-table order
    docs: dict[str, SourceDoc]  # the new documents (the others are read from the base)
    passages: list[Passage]
    vectors: np.ndarray
    mentions: dict[str, Any]
    new_rows: int  # passages at the end of the table that are new
    unsaved: set[str] = field(default_factory=set)  # documents whose mention part is not on disk yet


def assemble(base: Base | None, parts: list[DocumentParts], settings: Settings, llm=None) -> Library:
    """The next version's documents: the base's kept ones (from its tables), then the new ones."""
    passages: list[Passage] = []
    vectors: list[np.ndarray] = []
    mentions: dict[str, Any] = {}
    unsaved: set[str] = set()
    sources: list[dict[str, Any]] = []
    if base is not None:
        kept = {s["doc_id"] for s in base.keep}
        all_passages = base.repo.passages
        rows = [i for i, p in enumerate(all_passages) if p.doc_id in kept]
        passages = [all_passages[i] for i in rows]
        if rows:
            matrix = base.repo.passage_vectors
            vectors.append(matrix if len(rows) == len(all_passages) else matrix[rows])
        sources = [dict(s) for s in base.keep]
        if llm is None:
            with cyclic_gc_paused():  # every document's sentences, as small lists (see cyclic_gc_paused)
                mentions, unsaved = stored_mentions(base.repo, [s["doc_id"] for s in base.keep], passages, settings)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for part in parts:
        passages.extend(part.passages)
        vectors.append(part.vectors)
        if part.mentions is not None:
            mentions[part.doc.doc_id] = part.mentions
        sources.append(source_record(part.doc, len(part.passages), now))
    matrix = np.concatenate(vectors) if vectors else np.zeros((0, 384), np.float32)
    return Library(sources, {p.doc.doc_id: p.doc for p in parts}, passages, matrix, mentions,
                   sum(len(p.passages) for p in parts), unsaved | {p.doc.doc_id for p in parts})


def stored_mentions(repo, doc_ids: list[str], passages: list[Passage], settings: Settings) -> tuple[dict[str, Any], set[str]]:
    """The mention parts of a base's documents; a repository built before there were any (or with
    other extraction settings) has them read again from its passages, once."""
    from .graph.extract_nlp import collect_mentions, read_mention_part

    out, missing = {}, []
    wanted = digest(settings.extract.model_dump(exclude={"n_process"}))
    for doc_id in doc_ids:
        try:
            made_with, part = read_mention_part(mention_part_path(repo.root, doc_id))
        except (OSError, ValueError):
            made_with = None
        if made_with == wanted:
            out[doc_id] = part
        else:
            missing.append(doc_id)
    if missing:
        again = set(missing)
        out.update(collect_mentions([p for p in passages if p.doc_id in again], settings.extract))
    return out, set(missing)


def source_record(doc: SourceDoc, n_passages: int, added: str) -> dict[str, Any]:
    return {"doc_id": doc.doc_id, "title": document_title(doc), "path": str(Path(doc.path).resolve()),
            "format": doc.structure.format, "pages": len(doc.structure.pages), "sections": len(doc.structure.headings),
            "sha256": doc.sha256, "encoding": doc.encoding, "chars": len(doc.text),
            "content_start": doc.content_start, "content_end": doc.content_end,
            "words": len(doc.body.split()), "passages": n_passages, "added": added}


def document_title(doc: SourceDoc) -> str:
    """The Project Gutenberg "Title:" line, else the first heading, else the file's name."""
    head = doc.text[: min(len(doc.text), 4000)]
    for line in head.splitlines():
        if line.startswith("Title:") and line[6:].strip():
            return line[6:].strip()
    if doc.structure.headings:
        return doc.structure.headings[0].title
    return Path(doc.path).stem


# --------------------------------------------------------------------------------------------
# Graph stages (global, small beside the text)


def graph_stages(library: Library, base: Base | None, settings: Settings, cache: StageCache, progress, timings, llm=None):
    """The raw graph, governance, communities and name vectors of the next version."""
    with cyclic_gc_paused():
        return _graph_stages(library, base, settings, cache, progress, timings, llm)


def _graph_stages(library: Library, base: Base | None, settings: Settings, cache: StageCache, progress, timings, llm=None):
    from .graph.extract_nlp import build_raw_graph, merge_mentions
    from .graph.govern import govern_library
    from .graph.summaries import GraphIndex, summary_inputs
    from .index.encoder import get_encoder
    from .stages import GraphStage

    passages = library.passages
    tokens = {"prompt": 0, "completion": 0}
    if llm is None:
        # governance sorts the passages of the relations it makes; without it the raw graph is the one stored
        raw = run_timed(timings, "raw_graph", lambda: build_raw_graph(merge_mentions(library.mentions), passages, settings.extract,
                                                                      ordered_passages=not settings.govern.enabled))
        # the parts already on disk are not needed again: a library's sentences are the largest thing it holds
        library.mentions = {d: m for d, m in library.mentions.items() if d in library.unsaved}
    else:
        raw, tokens = _llm_graph(passages, settings, cache, progress, timings, llm)
    encoder = get_encoder(settings.embed)
    embedder = MemoEmbedder(encoder)
    previous: dict[str, dict[str, tuple[str, str]]] = {}
    known_names = None
    if base is not None:
        _seed_names(embedder, base.repo)
        previous = previous_summaries(base.repo)
        known_names = load_memo(base.repo.root / NAME_MEMO)
    with progress.stage("govern", 1) as advance:
        governed, governance, names = run_timed(timings, "govern", lambda: govern_library(
            raw, passages, settings.govern, embedder.encode, known_names, names_model(settings)))
        advance(1)
    del known_names
    if raw_made_from_mentions(raw, governed, llm):
        # Not stored (made from the mention parts when read), so its ~400k relations are done with
        # once governed; held on through the communities, the write and the collection before
        # validation, the add of 12 documents into 950 took 1.5 s longer (peak RSS the same; see
        # docs/library.md). Its statistics are governance's (report["raw"]).
        raw.relations = []
    graphs = {"raw": raw, "governed": governed}
    summary_keys: dict[str, list[str]] = {}
    # an add or remove keeps the communities it did not touch (Leiden again on the touched region only)
    incremental = base is not None and settings.community.incremental and same_leiden(base.repo, settings)
    # Communities of the governed graph only. The raw graph's are found when a question first
    # reads them (the raw-graph ablation: retrieve.state, graph.summaries.summarised_communities):
    # making them at every add was about two thirds of this stage at 1,000 documents
    # (docs/library.md). Without governance the raw graph is the governed one, and has them.
    if raw is not governed:
        raw.communities = []
    with progress.stage("communities", 1) as advance:
        t0 = time.perf_counter()
        communities = _leiden("governed", governed, base.repo if incremental else None, settings, governance)
        timings["leiden"] = round(time.perf_counter() - t0, 3)  # with the base's partition read, on an add
        index = GraphIndex(governed)  # for the content keys and the new summaries: made once (0.3 s at 1,000 documents)
        keys = [digest(k) for k in summary_inputs(governed, communities, index)]
        summary_keys["governed"] = keys
        governed.communities, reused = _summarised(governed, communities, keys, previous.get("governed", {}), passages,
                                                   settings, embedder, index)
        del index
        advance(1)
        timings["communities"] = round(time.perf_counter() - t0, 3)
    governance["summaries_reused"] = reused
    entity_vectors = run_timed(timings, "entity_vectors", lambda: embed_name_vectors(graphs, embedder))
    # the last text of the graph stages: the compiled model (OpenVINO's kernels and buffers) would otherwise sit
    # under the writing of the version, where an add into a large library peaks
    encoder.release_memory()
    stage = GraphStage(graphs, entity_vectors, tokens, governance)
    stage.summary_keys = summary_keys
    stage.names = names
    return stage


def raw_made_from_mentions(raw: Graph, governed: Graph, llm) -> bool:
    """Whether a version stores no raw graph but has it made from its mention parts when read:
    spaCy extracted it (an LLM's cannot be made again without the LLM) and governance made a
    governed graph of its own (without governance the raw graph is the governed one)."""
    return llm is None and raw is not governed


def names_model(settings: Settings) -> str:
    """What the name vectors kept between versions were made by: another model or precision
    and the base's pairs are computed again."""
    return digest(settings.embed.model_dump())


def _leiden(kind: str, graph: Graph, base_repo, settings: Settings, report: dict[str, Any]) -> list[Community]:
    """The graph's communities: updated from the base's partition when given one (and the share
    of entities clustered again noted in the report), else found afresh."""
    from .graph.communities import detect_communities, update_communities

    if base_repo is None:
        return detect_communities(graph, settings.community)
    communities, region = update_communities(graph, settings.community, previous_partition(base_repo, kind))
    report.setdefault("communities_reclustered", {})[kind] = [region, len(graph.entities)]
    return communities


def _summarised(graph: Graph, communities: list[Community], keys: list[str], old: dict[str, tuple[str, str]],
                passages: list[Passage], settings: Settings, embedder: MemoEmbedder, index=None) -> tuple[list[Community], int]:
    """The communities with titles and summaries: the base's for every community whose content key
    it had, made for the others; and how many were reused."""
    from .graph.summaries import summarise_communities

    fresh = [c for c, k in zip(communities, keys) if k not in old]
    done = {c.community_id: c for c in summarise_communities(graph, fresh, passages, settings.community, embed=embedder.encode,
                                                             index=index)}
    out = []
    for c, key in zip(communities, keys):
        if c.community_id not in done:
            c.title, c.summary = old[key]
        out.append(done.get(c.community_id, c))
    return out, len(communities) - len(done)


def _llm_graph(passages, settings: Settings, cache: StageCache, progress, timings, llm):
    from .graph.extract_llm import ExtractionCost, extract_llm

    def extract():
        with progress.stage("extract", len(passages)) as advance:
            cost = ExtractionCost()
            graph = extract_llm(passages, llm, progress=advance, cost=cost)
            return graph, {"prompt": cost.prompt_tokens, "completion": cost.completion_tokens}

    key = digest([(p.passage_id, p.start, p.end) for p in passages], settings.extract.model_dump(exclude={"n_process"}),
                 getattr(llm, "name", None), getattr(llm, "model", None))
    return run_timed(timings, "extract", lambda: cache.get_or_compute("extract", key, extract))


def _seed_names(embedder: MemoEmbedder, repo) -> None:
    """Names the base already embedded are not embedded again (from its names table; before
    format 3, from its entity tables: the base's relations are never loaded)."""
    if repo.names_table:
        names, vectors = repo.name_vectors()
        if names:
            embedder.remember(names, vectors)
        return
    for kind in ("raw", "governed"):
        try:
            names = [row["name"] for row in repo.store.read(f"entities_{kind}")]
            vectors = repo.store.vectors(f"entities_{kind}") if names else None
        except Exception:  # a base without name vectors: embed them again
            continue
        if vectors is not None and vectors.shape[0] == len(names):
            embedder.remember(names, vectors)


LEIDEN_FIELDS = ("seed", "resolution", "max_cluster_size", "iterations")


def same_leiden(repo, settings: Settings) -> bool:
    """Whether the base's communities were found with these Leiden settings: a partition found
    with others is not one to keep (the add recomputes every community then)."""
    before = repo.manifest.get("settings", {}).get("community", {})
    now = settings.community.model_dump()
    return all(before.get(key) == now[key] for key in LEIDEN_FIELDS)


def previous_partition(repo, kind: str):
    """The base's communities (without their passages, titles and summaries) and the weighted
    edges Leiden saw (from three columns of its relation table: not the evidence)."""
    from .graph.communities import Partition, edge_weights

    rows = repo.store.columns(f"communities_{kind}", ["community_id", "level", "parent", "entity_ids"])
    communities = [Community(*fields) for fields in zip(*(rows[k] for k in ("community_id", "level", "parent", "entity_ids")))]
    communities.sort(key=lambda c: (c.level, c.community_id))  # the table's order, whatever the store returns
    ids = {m for c in communities for m in c.entity_ids}
    relations = repo.store.columns(f"relations_{kind}", ["source", "target", "weight"])
    return Partition(communities, edge_weights(zip(relations["source"], relations["target"], relations["weight"]), ids))


SUMMARY_KEYS = "community_keys.json"  # per graph kind, the content key of each community, in table order


def previous_summaries(repo) -> dict[str, dict[str, tuple[str, str]]]:
    """The base's community (title, summary) by content key: from its community tables and key
    file; a base without the file (built before it) has its keys computed from its graphs."""
    try:
        keys = json.loads((repo.root / SUMMARY_KEYS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"governed": summaries_by_content(repo.graph("governed"))}
    out = {}
    for kind in ("governed",):  # the raw graph's are made on demand (_graph_stages)
        rows = repo.store.read(f"communities_{kind}")
        out[kind] = {k: (r["title"], r["summary"]) for k, r in zip(keys.get(kind, []), rows)}
    return out


def summaries_by_content(graph: Graph) -> dict[str, tuple[str, str]]:
    """A graph's community (title, summary) by what they were made from (summaries.summary_inputs)."""
    from .graph.summaries import summary_inputs

    keys = [digest(k) for k in summary_inputs(graph, graph.communities)]
    return {k: (c.title, c.summary) for k, c in zip(keys, graph.communities)}
