"""PAGE-RAG: long-document GraphRAG that answers only when its evidence is sufficient.

Heavy libraries (torch, spaCy, LanceDB) are imported lazily, inside the functions that use them,
so `import pagerag` and the CLI start fast.
"""
import os
import warnings

# ONNX Runtime (1.2x and later) sends usage events to Microsoft's collector a few seconds after
# its first inference session, and retries for minutes. A tool that reads private books offline
# must not phone home: the library reads this variable once, when it loads, so it is set here,
# before any module of ours can import it. A user who wants the events can set it to 0.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

# A build forks spaCy's workers after a thread has imported LanceDB, whose fork hook then warns
# (twice, in every build's output) that a forked child using LanceDB might deadlock. Our forked
# children (spaCy's workers, the question parser) never touch LanceDB.
warnings.filterwarnings("ignore", message="lancedb fork support is experimental", category=RuntimeWarning)

__version__ = "0.1.0"

__all__ = ["__version__"]
