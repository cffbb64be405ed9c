"""The text stages on a Ray cluster (`pagerag build/add … --executor ray [--ray-address A]`).

Imported only then, so the local path never imports ray (`pip install "pagerag[ray]"`).

A Ray Data pipeline over the new documents (loaded and checked on the driver, where a bad file
is one line before any work): `map` chunks each document; `map_batches` with an actor pool
embeds its passages and pools its sentence windows in the same pass (each actor holds the encoder); `map`
reads it with spaCy (one document per task, the mention part of library.py). Every stage works
on one document with the same code and the same blocks as the local executor
(stages.embed_document), so the passages, vectors, windows and mention
parts are the same as a local build's. The driver gathers the parts, writes the passage table
(LanceDB), the BM25 index and the windows, and runs governance, Leiden and the summaries: the
graph is small beside the text.
"""
from __future__ import annotations

import os
import pickle
import time
from typing import Any

import numpy as np

from .errors import ConfigError


def ray_text_stages(docs, settings, progress, timings, with_mentions: bool, address: str | None = None):
    from .stages import DocumentParts

    ray = _ray(address)
    _quiet_data()

    t0 = time.perf_counter()
    items = [{"doc": pickle.dumps(d, protocol=pickle.HIGHEST_PROTOCOL), "size": len(d.body)} for d in docs]
    blob = pickle.dumps(settings)
    cpus = int(ray.cluster_resources().get("CPU", 1))
    actors = max(1, min(len(docs), cpus))
    ds = ray.data.from_items(items, override_num_blocks=max(1, len(items)))
    ds = ds.map(_Chunk, fn_constructor_args=(blob,), concurrency=actors)
    ds = ds.map_batches(_Embed, fn_constructor_args=(blob,), batch_size=1, concurrency=actors)
    if with_mentions:
        ds = ds.map(_Read, fn_constructor_args=(blob,), concurrency=actors)
    parts: dict[str, Any] = {}
    stage_cpu: dict[str, float] = {}
    with progress.stage("ray", len(docs)) as advance:
        for row in ds.iter_rows():
            part = pickle.loads(row["part"])
            parts[part["doc"].doc_id] = part
            for stage, seconds in part["seconds"].items():
                stage_cpu[stage] = stage_cpu.get(stage, 0.0) + seconds
            advance(1)
    timings["ray"] = round(time.perf_counter() - t0, 3)
    for stage, seconds in stage_cpu.items():  # summed over tasks: what the projection scales
        timings[f"ray_{stage}_task_s"] = round(seconds, 3)
    timings["ray_cpus"] = cpus
    out = []
    for doc in docs:  # the driver's order, not the cluster's
        part = parts[doc.doc_id]
        out.append(DocumentParts(part["doc"], part["passages"], part["vectors"], part.get("mentions"), part.get("windows")))
    return out


def _ray(address: str | None):
    try:
        import ray
    except ImportError:
        raise ConfigError('--executor ray needs Ray: pip install "pagerag[ray]"') from None
    if not ray.is_initialized():
        os.environ.setdefault("RAY_DEDUP_LOGS", "0")
        kwargs: dict[str, Any] = {"ignore_reinit_error": True, "log_to_driver": False, "include_dashboard": False}
        if address:
            _check_reachable(address)
            try:
                ray.init(address=address, **kwargs)
            except Exception as exc:  # a cluster that is not there: one line
                raise ConfigError(f"--ray-address {address}: cannot join the Ray cluster ({str(exc).splitlines()[0]})") from None
        else:
            ray.init(num_cpus=os.cpu_count() or 1, **kwargs)
    return ray


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """A cluster address (host:port or ray://host:port) whose port does not answer is one line
    now, not minutes of Ray's own retries."""
    import socket

    if address == "auto":
        return
    hostport = address.split("://", 1)[-1].rsplit("/", 1)[0]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"--ray-address {address}: expected host:port, ray://host:port or auto")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ConfigError(f"--ray-address {address}: cannot join the Ray cluster ({exc.strerror or exc})") from None


def _quiet_data() -> None:
    """Ray Data's own progress lines and logs stay off the terminal: the stage bar is ours."""
    import logging

    try:
        import ray.data
    except ImportError:
        raise ConfigError('--executor ray needs Ray Data: pip install "pagerag[ray]"') from None
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    for attribute in ("print_on_execution_start", "enable_operator_progress_bars"):
        if hasattr(context, attribute):
            setattr(context, attribute, False)
    for name in ("ray.data", "ray"):
        logging.getLogger(name).setLevel(logging.WARNING)


class _Chunk:
    def __init__(self, blob: bytes):
        from .index.embedding_model import get_wordpiece_counter

        self.settings = pickle.loads(blob)
        self.counter = get_wordpiece_counter(self.settings.embed.model)

    def __call__(self, row: dict) -> dict:
        from .text.chunk import chunk_document

        t0 = time.process_time()
        doc = pickle.loads(row["doc"])
        passages = chunk_document(doc, self.settings.chunk, self.counter)
        part = {"doc": doc, "passages": passages, "seconds": {"chunk": time.process_time() - t0}}
        return {"part": pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL)}


class _Embed:
    """An actor holding the encoder: one document's passages and their sentence windows, in the
    local executor's blocks (stages.embed_document)."""

    def __init__(self, blob: bytes):
        from .index.encoder import get_encoder

        self.settings = pickle.loads(blob)
        self.encoder = get_encoder(self.settings.embed)

    def __call__(self, batch: dict) -> dict:
        from .stages import embed_document

        out = []
        for blob in batch["part"]:
            part = pickle.loads(blob)
            t0 = time.process_time()
            part["vectors"], part["windows"] = embed_document(part["passages"], part["doc"].text, self.encoder, self.settings)
            part["seconds"]["embed"] = time.process_time() - t0
            out.append(pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL))
        return {"part": np.array(out, dtype=object)}


class _Read:
    def __init__(self, blob: bytes):
        self.settings = pickle.loads(blob)

    def __call__(self, row: dict) -> dict:
        from .graph.extract_nlp import collect_mentions

        part = pickle.loads(row["part"])
        t0 = time.process_time()
        extract = self.settings.extract.model_copy(update={"n_process": 1})
        found = collect_mentions(part["passages"], extract)
        from .graph.extract_nlp import _Accumulator

        part["mentions"] = found.get(part["doc"].doc_id, _Accumulator())
        part["seconds"]["extract"] = time.process_time() - t0
        return {"part": pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL)}
