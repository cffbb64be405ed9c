"""The JSON API: ask, retrieve, the served repositories, a cited passage in its context, and
the web page at `/`."""
from __future__ import annotations

from typing import Literal, Optional

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import FileResponse
from pydantic import BaseModel, ConfigDict, Field

from . import public
from .errors import ApiError, one_line

router = APIRouter()
CONTEXT_CHARS = 700  # text shown on each side of a cited quote


class QuestionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(..., description="The question.", examples=["How much does Scrooge pay his clerk?"])
    repo: Optional[str] = Field(None, description="Repository name (see GET /v1/repos); optional when one is served.")
    pipeline: Optional[str] = Field(None, description="Pipeline preset, e.g. full or passages-only.")
    llm: Optional[Literal["auto", "openai", "llamacpp", "extractive"]] = Field(
        None, description="LLM backend, one of those the server offers (GET /v1/health: llms); "
                          "auto = the server's default; extractive = no LLM. Any other: 400.")
    docs: Optional[list[str]] = Field(None, description="Limit the question to these documents of the library "
                                      "(ids, see GET /v1/repos: sources); default: the whole library. Unknown id: 400.")


def _server(request: Request):
    return request.app.state.server


@router.get("/", include_in_schema=False)
async def page():
    return FileResponse(public.STATIC / "index.html", headers={"Cache-Control": "no-cache"})


@router.post("/v1/ask", tags=["questions"], summary="Answer with numbered citations, or refuse and say why")
async def ask(body: QuestionRequest, request: Request, response: Response) -> dict:
    """The `pagerag ask --json` object, except that a citation names its document (`file` is the
    file name, `doc_id` its id), never a path on the server. The header `X-PageRAG-Version`
    names the repository version that answered."""
    server = _server(request)
    _check(server, body)
    version, result = await server.run(body.repo, body.pipeline, body.llm, lambda rag: public.answer(rag.ask(body.question, docs=body.docs)))
    _stamp(response, version)
    return result


@router.post("/v1/retrieve", tags=["questions"], summary="The evidence for a question, without deciding")
async def retrieve(body: QuestionRequest, request: Request, response: Response) -> dict:
    """The `pagerag retrieve --json` object: analysis, plan, cited evidence (each naming its
    document, not a server path), hints, signals."""
    server = _server(request)
    _check(server, body)
    version, result = await server.run(body.repo, body.pipeline, body.llm,
                                       lambda rag: public.retrieval(rag.retrieve(body.question, docs=body.docs)))
    _stamp(response, version)
    return result


def _check(server, body: QuestionRequest) -> None:
    from .inputs import text_fields

    text_fields(question=body.question, repo=body.repo, pipeline=body.pipeline)
    server.check_question(body.question)


@router.get("/v1/repos", tags=["repositories"], summary="The served repositories and their statistics")
async def repos(request: Request) -> dict:
    registry = _server(request).registry
    out = []
    for name in registry.names():
        served = registry.resolve(name)
        entry = served.current.describe() if served.current is not None else {"name": name}
        entry["reloading"] = served.reloading
        if served.error:
            entry["error"] = one_line(served.error)
        out.append(entry)
    return {"repos": out}


@router.delete("/v1/repos/{repo}", tags=["repositories"],
               summary="Remove a repository that a build job created (when the server allows it)")
async def remove_repo(request: Request, repo: str) -> dict:
    """Stops serving it and deletes it from disk (its build cache too). Only with `--allow-remove`,
    and only a repository a build job of this server created: the operator's own (`--repo`)
    are never removed through the API. Questions in flight finish on it first."""
    import anyio

    from .inputs import text_fields

    text_fields(repo=repo)
    server = _server(request)
    if not server.config.allow_remove:
        raise ApiError(403, "removing repositories is off on this server (start it with --allow-remove)")
    served = server.registry.resolve(repo)
    if not served.built_by_job:
        raise ApiError(403, f"'{repo}' was given to this server by its operator: only a repository built "
                            "through /v1/builds can be removed")
    job = server.builds.pending_for(repo)
    if job is not None:
        raise ApiError(409, f"a build of '{repo}' is {job.status} (job {job.id}): cancel it first")
    server.registry.remove(repo)
    await anyio.to_thread.run_sync(_delete_repository, served.source)
    return {"removed": repo}


def _delete_repository(source) -> None:
    import shutil
    from pathlib import Path

    from ..build import cache_dir_for
    from ..repository import WriterLock
    from . import pins

    source = Path(source)
    with WriterLock(source, wait=True):  # after any writer (a CLI add); the lock file goes with it
        shutil.rmtree(source, ignore_errors=True)
        shutil.rmtree(cache_dir_for(source), ignore_errors=True)
        shutil.rmtree(source.parent / f".{source.name}.previous", ignore_errors=True)
        shutil.rmtree(source.parent / f".{source.name}.versions", ignore_errors=True)  # old versions (versions.py)
    pins.forget(source)


@router.get("/v1/repos/{repo}/passages/{passage_id}", tags=["repositories"],
            summary="A cited quote in its surrounding text, with its file, line, page and section")
async def passage(request: Request, response: Response, repo: str, passage_id: str,
                  start: Optional[int] = Query(None, ge=0, description="Start of the quote (character offset)."),
                  end: Optional[int] = Query(None, ge=0, description="End of the quote (character offset)."),
                  context: int = Query(CONTEXT_CHARS, ge=0, le=5000, description="Characters shown on each side.")) -> dict:
    import anyio

    from .inputs import text_fields

    text_fields(repo=repo, passage_id=passage_id)
    registry = _server(request).registry

    def in_thread():
        with registry.use(repo) as version:  # held, so a swap cannot delete its files meanwhile
            return version, _passage_in_context(version, passage_id, start, end, context)

    version, found = await anyio.to_thread.run_sync(in_thread)
    _stamp(response, version)
    return found


def _passage_in_context(version, passage_id: str, start: int | None, end: int | None, context: int) -> dict:
    from pathlib import Path

    repository = version.repository
    row = repository.passage_index.get(passage_id)
    if row is None:
        raise ApiError(404, f"no passage '{passage_id}' in {version.repo} (version {version.version}); "
                            "the repository may have been rebuilt: ask again")
    p = repository.passages[row]
    start = p.start if start is None else start
    end = p.end if end is None else end
    if not p.start <= start < end <= p.end:
        raise ApiError(400, f"start/end must lie inside passage {passage_id} ({p.start}-{p.end}), got {start}-{end}")
    source = repository.source_text(p.doc_id)
    place = repository.structure(p.doc_id).place(start)
    lo, hi = max(0, start - context), min(len(source), end + context)
    return {
        "repo": version.repo, "version": version.version, "passage_id": passage_id, "doc_id": p.doc_id,
        "file": Path(p.file).name,
        "line": source.count("\n", 0, start) + 1, "start": start, "end": end,
        "page": place.page, "page_label": place.page_label, "section": list(place.section),
        "before": source[lo:start], "quote": source[start:end], "after": source[end:hi],
        "passage_start": p.start, "passage_end": p.end,
    }


@router.get("/v1/health", tags=["repositories"], summary="Liveness and the served versions")
async def health(request: Request) -> dict:
    registry = _server(request).registry
    versions = {}
    for name in registry.names():
        current = registry.resolve(name).current
        versions[name] = current.version if current is not None else None
    config = _server(request).config
    return {"status": "ok", "repos": versions, "auth": bool(config.api_key), "llms": list(config.offered_llms)}


def _stamp(response: Response, version) -> None:
    response.headers[public.VERSION_HEADER] = f"{version.repo}@{version.version}"
