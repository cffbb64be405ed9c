"""Query-adaptive retrieval: analyse the question, plan a route under an evidence budget, run the
text-floor and graph operators, fuse, rerank, and return cited evidence (see api.retrieve)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import retrieve
    from ..records import Analysis, Evidence, Plan, Retrieval

__all__ = ["retrieve", "Analysis", "Evidence", "Plan", "Retrieval"]


def __getattr__(name: str) -> Any:
    # Lazy: `import pagerag.retrieve` must not pull numpy/networkx into `pagerag --help`.
    if name == "retrieve":
        from .api import retrieve

        return retrieve
    if name in ("Analysis", "Evidence", "Plan", "Retrieval"):
        from .. import records

        return getattr(records, name)
    raise AttributeError(name)
