"""PAGE-RAG: long-document GraphRAG that answers only when its evidence is sufficient.

Heavy libraries (torch, spaCy, LanceDB) are imported lazily, inside the functions that use them,
so `import pagerag` and the CLI start fast.
"""
import os

# ONNX Runtime (1.2x and later) sends usage events to Microsoft's collector a few seconds after
# its first inference session, and retries for minutes. A tool that reads private books offline
# must not phone home: the library reads this variable once, when it loads, so it is set here,
# before any module of ours can import it. A user who wants the events can set it to 0.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

__version__ = "0.1.0"

__all__ = ["__version__"]
