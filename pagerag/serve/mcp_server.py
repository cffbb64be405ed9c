"""`pagerag mcp --repo DIR`: the repositories as Model Context Protocol tools over stdio.

Tools: `ask` (the `pagerag ask --json` object: an answer with numbered citations, or a refusal
with its reason) and `retrieve` (the cited evidence without deciding), plus `repos` (what is
served). stdout carries the protocol; everything else the libraries print goes to stderr. The
repositories are pinned and swapped on rebuild exactly as in `pagerag serve` (registry.py).
"""
from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, Optional

from .config import ServeConfig

INSTRUCTIONS = (
    "PAGE-RAG answers questions about the books it has indexed, citing passages (file; page and section "
    "for a PDF, EPUB, Word file or web page, else line; quote), "
    "or refuses and says why (low_retrieval_confidence, insufficient_evidence, unsupported_answer). "
    "A refusal is a finding, not a failure: the book does not support an answer. Call `repos` to see the books."
)


def build_server(config: ServeConfig, registry):
    """The MCP server object with its tools (separate from `run` so it can be tested in-process)."""
    import anyio
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    from ..errors import PageRAGError
    from . import public
    from .errors import ApiError, one_line

    server = MCPServer(name="pagerag", instructions=INSTRUCTIONS)
    limiter = anyio.CapacityLimiter(config.workers)

    async def run(repo: Optional[str], work, pipeline: Optional[str] = None) -> dict[str, Any]:
        def in_thread():
            settings = config.settings(pipeline)
            with registry.use(repo) as version:
                result = work(version.rag(settings))
                return {**result, "repo": version.repo, "version": version.version}

        try:
            return await anyio.to_thread.run_sync(in_thread, limiter=limiter)
        except ApiError as exc:
            raise ToolError(exc.message) from None
        except PageRAGError as exc:
            raise ToolError(one_line(exc)) from None

    def check(question: str) -> str:
        from .inputs import text_problem

        problem = text_problem(question) if isinstance(question, str) else None
        if problem is not None:
            raise ToolError(f"question: not valid text ({problem})")
        if len(question) > config.max_question_chars:
            raise ToolError(f"question too long: {len(question):,} characters (limit {config.max_question_chars:,})")
        return question

    @server.tool()
    async def ask(question: str, repo: Optional[str] = None, docs: Optional[list[str]] = None,
                  pipeline: Optional[str] = None) -> dict[str, Any]:
        """Answer a question about a book with numbered citations (quote, file, page and section or line), or refuse and say why.
        Without an LLM the answer is the closest passage, labelled so (`label`, `caveat`): nothing checks that it answers.
        `repo` names the book (see `repos`); it may be left out when one is served. `docs` limits the question to
        some documents of a library (their ids, see `repos`). `pipeline`: a preset (default `full`; `reader-decides`
        lets the offline reader refuse)."""
        check(question)
        return await run(repo, lambda rag: public.answer(rag.ask(question, docs=docs)), pipeline)

    @server.tool()
    async def retrieve(question: str, repo: Optional[str] = None, docs: Optional[list[str]] = None) -> dict[str, Any]:
        """The passages that bear on a question (cited spans with file, offsets, page and section) and how they were found,
        without answering. `docs` limits it to some documents of a library."""
        check(question)
        return await run(repo, lambda rag: public.retrieval(rag.retrieve(question, docs=docs)))

    @server.tool()
    async def repos() -> dict[str, Any]:
        """The books served: name, sources, statistics, version."""
        return {"repos": [registry.current(name).describe() for name in registry.names()]}

    return server


def run(config: ServeConfig) -> None:
    """Serve over stdio until the client closes the pipe."""
    from .registry import Registry

    protocol_out = os.dup(1)
    os.dup2(2, 1)  # loading prints nothing on stdout: it belongs to the protocol
    with contextlib.redirect_stdout(sys.stderr):
        registry = Registry(config).start()
    os.dup2(protocol_out, 1)
    os.close(protocol_out)
    try:
        build_server(config, registry).run("stdio")
    finally:
        registry.close()
