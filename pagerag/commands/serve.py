"""`pagerag serve` (HTTP API, OpenAI-compatible chat, web page) and `pagerag mcp` (MCP over
stdio), registered in pagerag/cli.py. The server's libraries are imported only when they run."""
from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional

import typer

RepoOption = typer.Option(..., "--repo", "-r", help="Repository directory, or NAME=DIR (repeatable).")
PipelineOption = typer.Option(None, "--pipeline", "-p", help="Default pipeline preset; default full.")
LlmOption = typer.Option(None, "--llm", help="Default LLM backend: auto (default), openai, llamacpp or extractive.")
ConfigOption = typer.Option(None, "--config", help="A pagerag.toml file (default: ./pagerag.toml if present).")
SetOption = typer.Option(None, "--set", help="Override a setting: section.field=value (repeatable).")


def serve(
    repo: List[str] = RepoOption,
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind; anything but loopback needs an API key."),
    port: int = typer.Option(8000, "--port", help="Port to bind (0: any free port)."),
    api_key: Optional[str] = typer.Option(None, "--api-key", envvar="PAGERAG_API_KEY",
                                          help="Bearer token every /v1/ request must carry (env PAGERAG_API_KEY)."),
    build_root: Optional[Path] = typer.Option(None, "--build-root",
                                              help="Builds may read server files only under this folder (off when unset)."),
    repos_dir: Optional[Path] = typer.Option(None, "--repos-dir",
                                             help="Where repositories built under a new name go (default: beside the first --repo)."),
    no_builds: bool = typer.Option(False, "--no-builds", help="Refuse build jobs."),
    max_builds: int = typer.Option(3, "--max-builds", help="Build jobs queued or running at once; one more is "
                                   "refused with 429 and Retry-After."),
    allow_remove: bool = typer.Option(False, "--allow-remove", help="Let DELETE /v1/repos/NAME remove (unserve and "
                                      "delete) a repository that a build job of this server created."),
    workers: int = typer.Option(1, "--workers", help="Questions answered at once (threads); more wait their turn. "
                                "1 is fastest for the extractive and local backends (the work holds the GIL: "
                                "2 threads gave 4.4 answers/s against 5.4 on 2 cores); raise it for a remote LLM."),
    max_upload_mb: float = typer.Option(20.0, "--max-upload-mb", help="Largest upload accepted, in MB."),
    pipeline: Optional[str] = PipelineOption,
    llm: Optional[str] = LlmOption,
    allow_llm: Optional[List[str]] = typer.Option(
        None, "--allow-llm", help="Another LLM backend a request may choose with \"llm\" (repeatable): openai, "
        "llamacpp or extractive. Requests may use only the --llm backend (auto resolved at start), these, and "
        "extractive."),
    config: Optional[Path] = ConfigOption,
    set_: Optional[List[str]] = SetOption,
):
    """Serve repositories: JSON API (/docs), OpenAI-compatible chat (/v1/chat/completions), web page (/)."""
    from ..serve.config import MB
    from ..serve.registry import Registry

    cfg = _config(repo, pipeline, llm, config, set_, host=host, port=port, api_key=api_key or None,
                  build_root=build_root, repos_dir=repos_dir, allow_builds=not no_builds, workers=workers,
                  max_builds=max_builds, allow_remove=allow_remove,
                  max_upload_bytes=int(max_upload_mb * MB), allow_llms=list(allow_llm or []))
    _check_repos(cfg)
    from ..serve.listen import bind, url_of

    sock = bind(cfg.host, cfg.port)  # a port in use fails here, before loading and before any URL is shown
    _prepare_process()
    typer.echo(f"pagerag serve: loading {', '.join(cfg.repos)} …", err=True)
    registry = Registry(cfg).start()
    typer.echo(f"pagerag serve: {url_of(sock, cfg.host)}  (API docs /docs; "
               f"{'API key required' if cfg.api_key else 'no API key: loopback only'})", err=True)
    from ..serve.app import run

    run(cfg, registry, sock)


def mcp(
    repo: List[str] = RepoOption,
    pipeline: Optional[str] = PipelineOption,
    llm: Optional[str] = LlmOption,
    config: Optional[Path] = ConfigOption,
    set_: Optional[List[str]] = SetOption,
):
    """Serve repositories as MCP tools (ask, retrieve, repos) over stdio, for agents."""
    cfg = _config(repo, pipeline, llm, config, set_)
    _check_repos(cfg)
    _prepare_process()
    from ..serve.mcp_server import run

    run(cfg)


def _config(repo, pipeline, llm, config, sets, **more):
    from ..serve.config import ServeConfig, parse_repos

    return ServeConfig(repos=parse_repos(list(repo)), pipeline=pipeline, llm=llm, config_file=config,
                       sets=list(sets or []), **more).check()


def _check_repos(cfg) -> None:
    """A missing, foreign or newer-format repository: its one-line error before anything loads."""
    from ..repository import Repository

    for path in cfg.repos.values():
        Repository.open(path)


def _prepare_process() -> None:
    """A server's log is for requests and swaps, not for libraries' progress bars; and its
    questions run side by side in threads, so matrix products use one thread each (the query
    path's matrices are small: more BLAS threads only contend for the cores)."""
    import logging

    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    for name in ("httpx", "sentence_transformers", "lancedb"):
        logging.getLogger(name).setLevel(logging.WARNING)
