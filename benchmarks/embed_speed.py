"""Embedding speed and agreement: torch (sentence-transformers) fp32 / bf16 vs ONNX Runtime fp32 / int8 vs OpenVINO bf16 / fp32.

    python benchmarks/embed_speed.py [--runs 3] [--books christmas_carol] [--batch-sizes 16 64]
                                     [--cold-runs 5] [--numpy-from 8c02288] [--build-runs 1]

Prints, per book (passages chunked exactly as a build chunks them):
  1. passages/s (wall) and passages per CPU-second for each backend/precision and batch size, the
     median of --runs interleaved runs, and the CPU ratio to torch fp32 (CPU time is what other
     jobs on a shared machine disturb least);
  2. agreement with torch fp32: cosine of the passage vectors (min / median), and top-10
     retrieval overlap over ~100 queries, both sides embedded with the same backend ("same") and
     each backend's queries against torch-fp32 passages ("mixed": a repository built before the switch);
  3. a cold single-question encode in a fresh process (import + model load + encode): OpenVINO vs ONNX vs
     torch, and the removed numpy encoder when --numpy-from names a commit that still has it;
  4. the whole `pagerag build` (fresh process, empty cache except the ONNX export) against a plain
     fp32 sentence-transformers encode of the same passages in a fresh process (the target: build
     <= 1.0x the encode).

Queries: for GraphRAG-Bench *training* books (e.g. Novel-47558) their questions from
graphrag-bench-novel/questions.json; for other books (Christmas Carol) the first sentence of every
third passage. The DEV sets in qa/ are not used.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

MODEL = "packaged:all-MiniLM-L6-v2"
CONFIGS = [("torch", "fp32"), ("torch", "bf16"), ("onnx", "fp32"), ("onnx", "int8"), ("openvino", "bf16"), ("openvino", "fp32")]
TEST_BOOKS = {"Novel-10762", "Novel-44557", "Novel-47676", "Novel-54537", "Novel-5956"}
QUESTION = "Which ship did the harbour master thank the keeper for saving?"


def data_dir() -> Path:
    return Path(os.environ.get("PAGERAG_DATA_DIR") or REPO_ROOT.parent / "shared" / "data")


def book_path(name: str) -> Path:
    for candidate in (data_dir() / "books" / f"{name}.txt", data_dir() / "graphrag-bench-novel" / "texts" / f"{name}.txt"):
        if candidate.is_file():
            return candidate
    raise SystemExit(f"book '{name}' not found under {data_dir()}")


def passages_of(path: Path) -> list[str]:
    from pagerag.index.embedding_model import get_wordpiece_counter
    from pagerag.settings import load_settings
    from pagerag.text.chunk import chunk_documents
    from pagerag.text.load import load_sources

    settings = load_settings(environ={})
    return [p.text for p in chunk_documents(load_sources([path], settings.chunk), settings.chunk,
                                            get_wordpiece_counter(MODEL))]


def queries_of(name: str, passages: list[str]) -> tuple[list[str], str]:
    if name in TEST_BOOKS:
        raise SystemExit(f"{name} is a GraphRAG-Bench test book: not used for measurements")
    questions = json.loads((data_dir() / "graphrag-bench-novel" / "questions.json").read_text())
    own = [q["question"] for q in questions if q["source"] == name]
    if own:
        return own, "its GraphRAG-Bench questions"
    firsts = [re.split(r"(?<=[.!?])\s", " ".join(p.split()), maxsplit=1)[0][:300] for p in passages[::3]]
    return [f for f in firsts if len(f.split()) >= 4], "first sentences of every third passage"


def encoder(backend: str, precision: str):
    from pagerag.index.encoder import get_encoder
    from pagerag.settings import load_settings

    return get_encoder(load_settings(environ={}, overrides={"embed": {"backend": backend, "precision": precision}}).embed)


def available_configs() -> list[tuple[str, str]]:
    from pagerag.index.embedding_model import resolve_model_path
    from pagerag.index.encoder import cpu_has_bf16
    from pagerag.index.onnx_export import ensure_export

    has_int8 = "int8" in ensure_export(str(resolve_model_path(MODEL)))["paths"]
    from pagerag.offline import import_openvino

    try:
        import_openvino()
        has_openvino = True
    except ImportError:
        has_openvino = False
    return [(b, p) for b, p in CONFIGS if (p != "bf16" or cpu_has_bf16()) and (p != "int8" or has_int8)
            and (b != "openvino" or has_openvino)]


def throughput(passages: list[str], configs, batch_sizes, runs: int) -> dict:
    """{(backend, precision, batch): (median passages/s wall, median passages per CPU-s)}."""
    samples: dict = {}
    for enc in {c: encoder(*c) for c in configs}.values():
        enc.encode(passages[:8], batch_size=8)  # warm: first-call allocations are not throughput
    for _ in range(runs):
        for config in configs:  # interleaved, so a burst of load hits every config alike
            for batch in batch_sizes:
                enc = encoder(*config)
                wall, cpu = time.perf_counter(), time.process_time()
                enc.encode(passages, batch_size=batch)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                samples.setdefault((*config, batch), []).append((len(passages) / wall, len(passages) / cpu))
    return {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in samples.items()}


def agreement(passages: list[str], queries: list[str], configs) -> dict:
    """Per config: cosine to torch fp32 (min, median) and top-10 overlap (same, mixed)."""
    vectors = {c: (encoder(*c).encode(passages), encoder(*c).encode(queries)) for c in configs}
    ref_p, ref_q = vectors[("torch", "fp32")]
    ref_top = _top10(ref_q, ref_p)
    out = {}
    for config, (p, q) in vectors.items():
        cosine = np.sum(p.astype(np.float64) * ref_p, axis=1)
        out[config] = (float(cosine.min()), float(np.median(cosine)),
                       _overlap(_top10(q, p), ref_top), _overlap(_top10(q, ref_p), ref_top))
    return out


def _top10(q: np.ndarray, p: np.ndarray) -> np.ndarray:
    return np.argsort(-(q.astype(np.float64) @ p.astype(np.float64).T), axis=1, kind="stable")[:, :10]


def _overlap(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean([len(set(x) & set(y)) / len(y) for x, y in zip(a, b)]))


COLD_CODE = """
import sys, time
t0 = time.perf_counter()
from pagerag.settings import load_settings
settings = load_settings(environ={})
if sys.argv[1] == "numpy":
    from pagerag.retrieve.api import single_threaded_blas
    from pagerag.retrieve.qencoder import get_numpy_encoder
    with single_threaded_blas():
        get_numpy_encoder(settings.embed.model).encode([sys.argv[2]])
else:
    from pagerag.index.encoder import get_encoder
    settings.embed.backend = sys.argv[1]
    get_encoder(settings.embed).encode([sys.argv[2]])
print(time.perf_counter() - t0, time.process_time(), "torch" in sys.modules)
"""


def cold_question(runs: int, numpy_tree: Path | None) -> dict:
    """Median seconds (wall, CPU) of a fresh process that embeds one question."""
    kinds = {"openvino": REPO_ROOT, "onnx": REPO_ROOT, "torch": REPO_ROOT} | ({"numpy": numpy_tree} if numpy_tree else {})
    samples: dict = {k: [] for k in kinds}
    for _ in range(runs):
        for kind, tree in kinds.items():
            env = dict(os.environ, PYTHONPATH=str(tree))
            started = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", COLD_CODE, kind, QUESTION], capture_output=True, text=True,
                                 env=env, cwd=tree)
            wall = time.perf_counter() - started
            if out.returncode != 0:
                raise SystemExit(f"cold {kind} failed: {out.stderr.strip().splitlines()[-1:]}")
            inside, cpu, torch_loaded = out.stdout.split()
            samples[kind].append((wall, float(cpu), torch_loaded == "True"))
    return {k: (statistics.median(w for w, _, _ in v), statistics.median(c for _, c, _ in v), v[0][2])
            for k, v in samples.items()}


def tree_at(rev: str, target: Path) -> Path:
    archive = subprocess.run(["git", "archive", rev], cwd=REPO_ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


ENCODE_CODE = """
import resource, sys, json
from pagerag.offline import forbid_hub_downloads
forbid_hub_downloads()
from sentence_transformers import SentenceTransformer
from pagerag.index.embedding_model import resolve_model_path
texts = json.load(open(sys.argv[1]))
SentenceTransformer(str(resolve_model_path("packaged:all-MiniLM-L6-v2")), device="cpu").encode(
    texts, batch_size=32, normalize_embeddings=True, show_progress_bar=False)
u = resource.getrusage(resource.RUSAGE_SELF)
print(u.ru_utime + u.ru_stime)
"""

BUILD_CODE = """
import resource, sys, runpy
sys.argv = ['pagerag', 'build', sys.argv[1], '--repo', sys.argv[2], '--quiet']
try:
    runpy.run_module('pagerag', run_name='__main__')
finally:
    u, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    print('CPU_S', u.ru_utime + u.ru_stime + c.ru_utime + c.ru_stime, file=sys.stderr)
"""


def build_vs_encode(book: Path, passages: list[str], runs: int) -> dict:
    """Median (wall, CPU) of a whole fresh build and of a plain fp32 sentence-transformers encode."""
    from pagerag.index.embedding_model import resolve_model_path
    from pagerag.index.onnx_export import ensure_export

    export = Path(ensure_export(str(resolve_model_path(MODEL)))["paths"]["fp32"]).parent
    samples: dict = {"build": [], "encode": []}
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            cache = Path(tmp) / "cache"
            # the one-time ONNX export is a per-machine cost, not a per-build one
            shutil.copytree(export, cache / "onnx" / export.name)
            env = dict(os.environ, PAGERAG_CACHE_DIR=str(cache), PYTHONPATH=str(REPO_ROOT))
            texts = Path(tmp) / "passages.json"
            texts.write_text(json.dumps(passages))
            started = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", ENCODE_CODE, str(texts)], capture_output=True, text=True, env=env, cwd=tmp)
            samples["encode"].append((time.perf_counter() - started, float(out.stdout.split()[-1])))
            started = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", BUILD_CODE, str(book), str(Path(tmp) / "b.rag")],
                                 capture_output=True, text=True, env=env, cwd=tmp)
            wall = time.perf_counter() - started
            if out.returncode != 0:
                raise SystemExit(f"build failed: {out.stderr.strip().splitlines()[-1:]}")
            cpu = float(next(l.split()[1] for l in out.stderr.splitlines() if l.startswith("CPU_S")))
            stages = json.loads((Path(tmp) / "b.rag" / "manifest.json").read_text())["stage_seconds"]
            samples["build"].append((wall, cpu, stages))
    return {k: (statistics.median(s[0] for s in v), statistics.median(s[1] for s in v), v[-1][2] if k == "build" else None)
            for k, v in samples.items()}


def report_book(name: str, args, configs) -> None:
    path = book_path(name)
    passages = passages_of(path)
    queries, how = queries_of(name, passages)
    print(f"\n## {name}: {len(passages)} passages; {len(queries)} queries ({how}); load {_load()}\n")
    speed = throughput(passages, configs, args.batch_sizes, args.runs)
    base = max(c for (b, p, _), (_, c) in speed.items() if (b, p) == ("torch", "fp32"))
    print("| backend | precision | batch | passages/s (wall) | passages per CPU-s | CPU-time speed-up vs best torch fp32 |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for (b, p, batch), (wall, cpu) in speed.items():
        print(f"| {b} | {p} | {batch or 'auto'} | {wall:.1f} | {cpu:.1f} | {cpu / base:.2f}x |")
    agree = agreement(passages, queries, configs)
    print("\n| backend | precision | cosine to torch fp32 min | median | top-10 overlap (same) | (its queries, torch fp32 passages) |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for (b, p), (lo, med, same, mixed) in agree.items():
        print(f"| {b} | {p} | {lo:.4f} | {med:.4f} | {same:.3f} | {mixed:.3f} |")
    if args.build_runs:
        res = build_vs_encode(path, passages, args.build_runs)
        (bw, bc, stages), (ew, ec, _) = res["build"], res["encode"]
        print(f"\nwhole build: {bw:.1f} s wall, {bc:.1f} CPU-s; plain fp32 sentence-transformers encode of the same "
              f"passages (fresh process): {ew:.1f} s wall, {ec:.1f} CPU-s; build / encode = {bw / ew:.2f} (wall), "
              f"{bc / ec:.2f} (CPU); load {_load()}")
        print("build stages (s):", ", ".join(f"{k} {v:.1f}" for k, v in stages.items()))


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--books", nargs="+", default=["christmas_carol", "Novel-47558"])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[0, 16, 64],
                        help="texts per batch; 0 = the backend's default (onnx and openvino: 2,048 word pieces, torch: 64)")
    parser.add_argument("--configs", nargs="+", default=[], help="backend:precision pairs (default: all "
                        "available); torch:fp32 is always included as the reference")
    parser.add_argument("--cold-runs", type=int, default=5)
    parser.add_argument("--numpy-from", default="", help="a commit that still has pagerag/retrieve/qencoder.py")
    parser.add_argument("--build-runs", type=int, default=1, help="0 skips the whole-build comparison")
    args = parser.parse_args()
    from pagerag.index.embedding_model import resolve_model_path
    from pagerag.index.onnx_export import ensure_export

    meta = ensure_export(str(resolve_model_path(MODEL)))
    print(f"# embedding speed ({os.cpu_count()} CPUs, load {_load()}); ONNX export checks: {meta['checks']}")
    configs = available_configs()
    if args.configs:
        wanted = {tuple(c.split(":")) for c in args.configs} | {("torch", "fp32")}
        configs = [c for c in configs if c in wanted]
    for name in args.books:
        report_book(name, args, configs)
    if args.cold_runs:
        report_cold(args)


def report_cold(args) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        numpy_tree = tree_at(args.numpy_from, Path(tmp)) if args.numpy_from else None
        cold = cold_question(args.cold_runs, numpy_tree)
    print(f"\n## cold single-question encode (fresh process: imports, model load, one encode; median of {args.cold_runs}; load {_load()})\n")
    print("| encoder | wall s | CPU s | torch imported |")
    print("| --- | ---: | ---: | --- |")
    for kind, (wall, cpu, torch_loaded) in cold.items():
        print(f"| {kind} | {wall:.2f} | {cpu:.2f} | {torch_loaded} |")

if __name__ == "__main__":
    main()
