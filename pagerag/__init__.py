"""PAGE-RAG: long-document GraphRAG that answers only when its evidence is sufficient.

Heavy libraries (torch, spaCy, LanceDB) are imported lazily, inside the functions that use them,
so `import pagerag` and the CLI start fast.
"""
__version__ = "0.1.0"

__all__ = ["__version__"]
