"""The ONNX Runtime encoder: a checksummed export that is redone when damaged, vectors that match
sentence-transformers on a real book, the fallback to torch without onnxruntime, and a cold
`pagerag ask` (on the default encoder: OpenVINO running the same export, or ONNX Runtime) that never
imports torch. Real model, real export, real subprocesses."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from helpers.questions import ANSWERABLE  # Novel-10146-a02 (training set)

from pagerag.index import onnx_export
from pagerag.index.embedding_model import resolve_model_path
from pagerag.index.torch_encoder import get_embedder
from pagerag.index.encoder import get_encoder
from pagerag.settings import load_settings

MODEL = "packaged:all-MiniLM-L6-v2"
REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def export() -> dict:
    return onnx_export.ensure_export(str(resolve_model_path(MODEL)))


@pytest.fixture(scope="module")
def book_passages(data_dir: Path) -> list[str]:
    """Every third passage of A Christmas Carol, chunked as a build chunks it."""
    from pagerag.index.embedding_model import get_wordpiece_counter
    from pagerag.text.chunk import chunk_documents
    from pagerag.text.load import load_sources

    settings = load_settings(environ={})
    docs = load_sources([data_dir / "books" / "christmas_carol.txt"], settings.chunk)
    return [p.text for p in chunk_documents(docs, settings.chunk, get_wordpiece_counter(MODEL))][::3]


def _onnx(precision: str):
    settings = load_settings(environ={}, overrides={"embed": {"backend": "onnx", "precision": precision}})
    return get_encoder(settings.embed)


def test_export_records_the_sha256_of_the_source_and_of_each_file(export):
    directory = Path(export["paths"]["fp32"]).parent
    meta = json.loads((directory / onnx_export.METADATA).read_text())
    source = resolve_model_path(MODEL) / "model.safetensors"
    assert meta["source"]["sha256"] == onnx_export.sha256_of(source)
    assert set(meta["files"]) == {Path(p).name for p in export["paths"].values()}
    for name, record in meta["files"].items():
        assert record["sha256"] == onnx_export.sha256_of(directory / name)
    assert meta["checks"]["fp32_vs_torch_cosine_min"] >= onnx_export.MIN_FP32_COSINE
    assert ("int8" in export["paths"]) == (meta["checks"]["int8_vs_fp32_cosine_min"] >= onnx_export.MIN_INT8_COSINE)


def _copied_cache(export, tmp_path: Path, monkeypatch) -> Path:
    """This session's export, copied into a fresh cache dir (the copy is what the test damages)."""
    directory = Path(export["paths"]["fp32"]).parent
    monkeypatch.setenv("PAGERAG_CACHE_DIR", str(tmp_path))
    copy = onnx_export.export_dir(resolve_model_path(MODEL))
    shutil.copytree(directory, copy)
    onnx_export.ensure_export.cache_clear()
    return copy


def test_a_touched_export_is_rehashed_not_redone(export, tmp_path, monkeypatch, capfd):
    copy = _copied_cache(export, tmp_path, monkeypatch)
    target = copy / onnx_export.FP32
    os.utime(target, ns=(1, 1))  # same bytes, another mtime
    try:
        meta = onnx_export.ensure_export(str(resolve_model_path(MODEL)))
    finally:
        onnx_export.ensure_export.cache_clear()
    assert "exporting" not in capfd.readouterr().err
    assert meta["files"][onnx_export.FP32]["stamp"][1] == 1  # the new stamp is recorded


def test_a_truncated_export_fails_verification(export, tmp_path, monkeypatch):
    copy = _copied_cache(export, tmp_path, monkeypatch)
    target = copy / onnx_export.FP32
    target.write_bytes(target.read_bytes()[:1000])
    assert onnx_export._verified(copy, resolve_model_path(MODEL)) is None


def test_a_corrupted_export_is_detected_and_redone(export, tmp_path, monkeypatch, capfd):
    copy = _copied_cache(export, tmp_path, monkeypatch)
    name = onnx_export.INT8 if onnx_export.INT8 in export["files"] else onnx_export.FP32
    target = copy / name
    data = bytearray(target.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 8] = bytes(b ^ 0xFF for b in data[middle : middle + 8])  # same size
    target.write_bytes(data)
    try:
        meta = onnx_export.ensure_export(str(resolve_model_path(MODEL)))
    finally:
        onnx_export.ensure_export.cache_clear()
    assert "exporting the embedding model to ONNX" in capfd.readouterr().err
    assert onnx_export.sha256_of(target) == meta["files"][name]["sha256"] != hashlib.sha256(data).hexdigest()


def test_quantising_leaves_no_handler_on_the_root_logger(export, tmp_path):
    """ONNX Runtime's quantiser calls `logging.warning`, which gives a bare root logger a stderr
    handler; left there it would print libraries' DEBUG lines for the rest of a fresh install's
    first build (bm25s's "Building index from tokens")."""
    import logging

    root = logging.getLogger()
    saved, root.handlers = root.handlers, []  # bare, as in a command (pytest's capture handlers aside)
    try:
        onnx_export.quantise_int8(Path(export["paths"]["fp32"]), tmp_path / "model.int8.onnx")
        left = list(root.handlers)
    finally:
        root.handlers = saved
    assert left == []


def test_onnx_matches_sentence_transformers_on_book_passages(export, book_passages):
    edge_cases = ["How is Scrooge related to his nephew Fred?", "Fred", "斯克鲁奇的外甥叫什么名字？",
                  "Marley was dead: to begin with. " * 80]  # the last one is truncated at 256 word pieces
    texts = book_passages + edge_cases
    reference = get_embedder(MODEL, 0, "fp32").encode(texts)
    fp32 = _onnx("fp32").encode(texts)
    assert fp32.dtype == np.float32 and fp32.shape == reference.shape == (len(texts), 384)
    assert np.min(np.sum(fp32 * reference, axis=1)) > 0.9999
    if "int8" not in export["paths"]:
        pytest.skip(f"the int8 export failed its check here: {export['checks']}")
    int8 = _onnx("int8").encode(texts)
    assert int8.shape == reference.shape
    cosine = np.sum(int8 * reference, axis=1)
    # the opt-in int8 model: median 0.997 on three books, worst passage 0.994 (Carol) to 0.987 (Moby Dick)
    assert np.median(cosine) >= 0.995 and np.min(cosine) >= 0.985, f"int8 cosine: {np.median(cosine):.4f} / {np.min(cosine):.4f}"


def _run(code: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                          cwd=REPO_ROOT, timeout=600)


# Makes `import onnxruntime` fail in the child, as on a machine without it (pagerag is untouched).
NO_ONNXRUNTIME = "import sys; sys.modules['onnxruntime'] = None\n"


def test_auto_falls_back_to_torch_without_onnxruntime():
    out = _run(NO_ONNXRUNTIME + (
        "from pagerag.settings import load_settings\n"
        "from pagerag.index.encoder import get_encoder\n"
        "encoder = get_encoder(load_settings(environ={}).embed)\n"
        "print(encoder.backend, encoder.encode(['Scrooge']).shape)\n"
    ))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["torch", "(1,", "384)"]
    assert "embed.backend = auto uses torch: onnxruntime is not installed" in out.stderr


def test_forced_onnx_without_onnxruntime_is_one_clear_line(printer_repo):
    out = _run(NO_ONNXRUNTIME + (
        "from pagerag.cli import main\n"
        "sys.argv = ['pagerag', 'ask', 'Who was Dr. Foster?', '--repo', sys.argv[1], '--llm', 'extractive',"
        " '--set', 'embed.backend=onnx']\n"
        "main()\n"
    ), str(printer_repo))
    assert out.returncode != 0
    assert "Traceback" not in out.stderr and out.stderr.strip().count("\n") == 0
    assert "embed.backend = onnx: onnxruntime is not installed" in out.stderr


def test_a_cold_ask_imports_neither_torch_nor_lancedb(printer_repo):
    """The real command in a new process (it ends with os._exit, so nothing can run after it):
    `-X importtime` lists every module the process imported. Below the ANN threshold a question
    reads the passages, vectors and lexical shards from the snapshot and the repository's files,
    so LanceDB (1.7 s of a 2.3 s cold ask on Moby Dick when the lexical index asked the table for
    its doc ids) is not imported either."""
    from pagerag.index.encoder import choose

    manifest = json.loads((printer_repo / "manifest.json").read_text())
    default = choose(MODEL, "auto", "auto").backend  # openvino where it is installed, else onnx
    assert default in ("openvino", "onnx")
    assert manifest["embedding"]["backend"] == default  # the build used it too (and exported the model)
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "pagerag", "ask",
                          ANSWERABLE, "--repo", str(printer_repo),
                          "--llm", "extractive"], capture_output=True, text=True, timeout=600, cwd=REPO_ROOT,
                         env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert "[1]" in out.stdout  # an answer with a citation
    imported = {line.split("|")[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    assert "spacy" in imported and "onnxruntime" in imported  # the list is real
    # a bare "torch" line is thinc's import attempt that text.nlp turns into an ImportError; a
    # real import of torch loads its submodules
    assert not {m for m in imported if m.split(".")[0] in ("torch", "transformers", "sentence_transformers")} - {"torch"}
    assert not {m for m in imported if m.split(".")[0] in ("lancedb", "lance")}


def test_processes_compiling_the_model_first_at_once_share_the_cache(export, tmp_path, monkeypatch):
    """OpenVINO writes its compiled-model cache without a lock: two test workers (or a server and
    a build) opening the encoder first at once wrote the same blob over each other and one failed
    ("cannot set permissions"). Six processes start 0.3 s apart on a cache holding only the
    export; all six embed, and their vectors are the same."""
    from pagerag.index.encoder import choose

    if choose(MODEL, "auto", "auto").backend != "openvino":
        pytest.skip("OpenVINO is not the default encoder here: no compiled-model cache to share")
    copy = _copied_cache(export, tmp_path, monkeypatch)
    shutil.rmtree(copy / "openvino", ignore_errors=True)  # the compiled model this cache had
    code = ("from pagerag.settings import load_settings\n"
            "from pagerag.index.encoder import get_encoder\n"
            "import sys\n"
            "sys.stdout.write(get_encoder(load_settings().embed).encode(['Scrooge']).tobytes().hex())\n")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PAGERAG_CACHE_DIR": str(tmp_path)}
    children = []
    for _ in range(6):  # staggered: a process that finds another's blob half written removed it
        children.append(subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         text=True, env=env, cwd=REPO_ROOT))
        time.sleep(0.3)
    outputs = [child.communicate(timeout=300) for child in children]
    assert [child.returncode for child in children] == [0] * 6, [err[-1500:] for _, err in outputs]
    assert len({out for out, _ in outputs}) == 1
    assert any((copy / "openvino").iterdir())  # the compiled model was cached
