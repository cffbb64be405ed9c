"""The FastAPI application: JSON API, OpenAI-compatible chat, build jobs and the web page.

    config = ServeConfig(repos={"carol": Path("carol.rag")}).check()
    registry = Registry(config).start()          # pins, opens and warms every repository
    app = create_app(config, registry)           # uvicorn.run(app, host=..., port=...)

Questions run in worker threads (at most `config.workers` at once), never on the event loop.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .. import __version__
from .config import ServeConfig
from .public import STATIC, VERSION_HEADER  # noqa: F401 - VERSION_HEADER: still importable from here
from .registry import Registry, Version


@dataclass
class Server:
    """What the routes share: the configuration, the served repositories, the build jobs."""

    config: ServeConfig
    registry: Registry
    builds: Any = None  # jobs.BuildManager
    limiter: Any = None  # anyio.CapacityLimiter, made inside the event loop

    async def run(self, repo: str | None, pipeline: str | None, llm: str | None,
                  work: Callable[[Any], Any]) -> tuple[Version, Any]:
        """`work(rag)` on the current version of `repo`, in a worker thread."""
        import anyio

        settings = self.config.settings(pipeline, llm)
        if self.limiter is None:
            self.limiter = anyio.CapacityLimiter(self.config.workers)

        def in_thread():
            with self.registry.use(repo) as version:
                return version, work(version.rag(settings))

        return await anyio.to_thread.run_sync(in_thread, limiter=self.limiter)

    def check_question(self, question: str) -> None:
        from .errors import ApiError

        limit = self.config.max_question_chars
        if len(question) > limit:
            raise ApiError(413, f"question too long: {len(question):,} characters (limit {limit:,})")


def create_app(config: ServeConfig, registry: Registry):
    import contextlib

    from fastapi import FastAPI
    from fastapi.staticfiles import StaticFiles

    from . import builds, chat, docs, errors, routes
    from .guard import Guard
    from .jobs import BuildManager

    server = Server(config, registry)
    server.builds = BuildManager(server)

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        yield
        server.builds.close()
        registry.close()

    app = FastAPI(
        title="PAGE-RAG", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None,  # docs.py serves /docs
        description="Ask questions of whole books: answers with numbered citations, or a refusal that says why. "
                    "Every error is `{\"error\": {\"message\", \"type\", \"status\"}}`. With an API key configured, "
                    "send `Authorization: Bearer <key>` on every /v1/ request.",
    )
    app.state.server = server
    errors.install(app)
    app.include_router(routes.router)
    app.include_router(chat.router)
    app.include_router(builds.router)
    app.include_router(docs.router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.add_middleware(Guard, config=config)
    return app


def run(config: ServeConfig, registry: Registry, sock) -> None:
    """Serve on the bound socket `sock` (listen.py) until interrupted (the `pagerag serve` command)."""
    import uvicorn

    app = create_app(config, registry)
    server = uvicorn.Server(uvicorn.Config(app, host=config.host, port=sock.getsockname()[1], log_level="info",
                                           access_log=False, timeout_graceful_shutdown=10))
    server.run(sockets=[sock])
