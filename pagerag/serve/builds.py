"""Build jobs over HTTP: `POST /v1/builds` from a file or folder under the build root, or from
uploaded files (.txt, .md, .pdf, .epub, .html, .docx); progress as server-sent events; `DELETE /v1/builds/{id}` cancels.

The jobs themselves (a bounded queue, one build at a time in its own process, cancelling,
cleaning up) are jobs.py. Naming a served repository rebuilds it; its new version is swapped in
atomically (registry.py). A new name builds `<repos dir>/<name>.rag` and serves it.
"""
from __future__ import annotations

import asyncio
import json
import re
import shutil
import uuid
from pathlib import Path
from typing import Any, Optional

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from .config import REPO_NAME
from .errors import ApiError
from .jobs import Job

router = APIRouter(tags=["builds"])

MAX_FILES = 100
SNIFF_BYTES = 8192
HEARTBEAT_S = 15.0
CANCEL_WAIT_S = 20.0  # how long DELETE /v1/builds/{id} waits for a running build to stop


# --------------------------------------------------------------------------------------------
# Where a build may read from


def confined(root: Optional[Path], requested: str) -> Path:
    """`requested` (relative to the root, or absolute) resolved, if it lies under the root and so
    does every file and folder the build would read below it (symbolic links resolved at every
    depth). The build process checks again as it reads."""
    from ..errors import InputError
    from ..text.load import OutsideRootError, collect_files

    if root is None:
        raise ApiError(403, "builds from server paths are off: start the server with --build-root DIR "
                            "(or upload the files)")
    if not requested or "\x00" in requested:
        raise ApiError(400, "path: give a file or folder under the build root")
    candidate = Path(requested)
    full = (candidate if candidate.is_absolute() else root / candidate).resolve()
    if full != root and root not in full.parents:
        raise ApiError(403, f"path '{requested}' is outside the build root")
    if not full.exists():
        raise ApiError(404, f"path '{requested}' does not exist under the build root")
    try:
        collect_files([full], root)
    except OutsideRootError as exc:
        raise ApiError(403, str(exc)) from None
    except InputError as exc:
        raise ApiError(400, str(exc)) from None
    return full


def _check_repo_name(name: Any) -> str:
    from .inputs import text_field

    text_field("repo", name)
    if not isinstance(name, str) or not REPO_NAME.match(name):
        raise ApiError(400, "repo: give a repository name (letters, digits, - and _, at most 64)")
    return name


async def _save_uploads(form, directory: Path) -> list[Path]:
    from starlette.datastructures import UploadFile

    from ..text.load import SUPPORTED_SUFFIXES

    files = [v for k, v in form.multi_items() if isinstance(v, UploadFile)]
    if not files:
        raise ApiError(400, "no files uploaded: send .txt, .md, .pdf, .epub, .html or .docx files in the "
                            "multipart field 'files'")
    if len(files) > MAX_FILES:
        raise ApiError(413, f"too many files ({len(files)}; at most {MAX_FILES})")
    saved: list[Path] = []
    for upload in files:
        name = Path(upload.filename or "").name
        if not name.lower().endswith(SUPPORTED_SUFFIXES):
            raise ApiError(415, f"'{name or '(no name)'}' is not a supported file (.txt, .md, .pdf, .epub, .html, .docx)")
        data = await upload.read()
        _sniff(name, data)
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).lstrip(".") or "upload.txt"
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / safe
        path.write_bytes(data)
        saved.append(path)
    return saved


def _sniff(name: str, data: bytes) -> None:
    """Refuse, before a job is queued, a file whose first bytes are not of the kind its name
    says (the build reads it fully, and says more, in its own process)."""
    suffix = Path(name).suffix.lower()
    if suffix == ".pdf":
        ok, kind = b"%PDF-" in data[:1024], "a PDF"
    elif suffix == ".epub":
        ok, kind = data.startswith(b"PK\x03\x04"), "an EPUB (a zip file)"
    elif suffix == ".docx":
        ok, kind = data.startswith(b"PK\x03\x04"), "a Word file (a zip file)"
    else:
        ok, kind = b"\x00" not in data[:SNIFF_BYTES], "a text file"
    if not ok:
        raise ApiError(415, f"'{name}' is not {kind}")


# --------------------------------------------------------------------------------------------
# Routes


class PathBuild(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(..., description="A file or folder under the server's build root (relative to it, or absolute).")
    repo: str = Field(..., description="A served repository (rebuilt and swapped in) or a new name.")


_UPLOAD_DOC = {"requestBody": {"content": {
    "application/json": {"schema": PathBuild.model_json_schema()},
    "multipart/form-data": {"schema": {"type": "object", "required": ["repo", "files"], "properties": {
        "repo": {"type": "string"}, "files": {"type": "array", "items": {"type": "string", "format": "binary"}}}}},
}}}


@router.post("/v1/builds", status_code=202, summary="Start a build job (server path or upload)", openapi_extra=_UPLOAD_DOC)
async def start_build(request: Request):
    server = request.app.state.server
    if not server.config.allow_builds:
        raise ApiError(403, "builds are off on this server")
    content_type = request.headers.get("content-type", "")
    if content_type.startswith("multipart/form-data"):
        upload_dir = server.config.new_repos_dir / ".uploads" / uuid.uuid4().hex[:12]
        try:
            async with request.form(max_files=MAX_FILES + 1, max_fields=20) as form:
                repo = _check_repo_name(form.get("repo"))
                saved = await _save_uploads(form, upload_dir)
            job = server.builds.submit(repo, [upload_dir], "upload", [p.name for p in saved], upload_dir=upload_dir)
        except BaseException:
            shutil.rmtree(upload_dir, ignore_errors=True)  # a refused upload leaves nothing behind
            raise
    elif content_type.startswith("application/json"):
        try:
            body = PathBuild.model_validate(await request.json())
        except json.JSONDecodeError:
            raise ApiError(422, "the body is not valid JSON") from None
        except ValueError as exc:
            from .errors import validation_message

            raise ApiError(422, validation_message(getattr(exc, "errors", lambda: [])())) from None
        repo = _check_repo_name(body.repo)
        import anyio

        from .inputs import text_field

        text_field("path", body.path)
        # walking a large folder must not hold the event loop
        full = await anyio.to_thread.run_sync(confined, server.config.build_root, body.path)
        root = server.config.build_root
        job = server.builds.submit(repo, [full], "path", [str(full.relative_to(root)) if full != root else "."])
    else:
        raise ApiError(415, "send JSON {\"path\", \"repo\"} or a multipart upload of files")
    return JSONResponse(job.to_dict(), status_code=202, headers={"Location": f"/v1/builds/{job.id}"})


@router.get("/v1/builds", summary="All build jobs of this server")
async def list_builds(request: Request) -> dict:
    return {"builds": [job.to_dict() for job in request.app.state.server.builds.jobs.values()]}


@router.get("/v1/builds/{job_id}", summary="A build job (server-sent events with Accept: text/event-stream)",
            response_model=None)
async def get_build(job_id: str, request: Request):
    job = request.app.state.server.builds.get(job_id)
    if "text/event-stream" in request.headers.get("accept", ""):
        return _event_stream(job, request)
    return job.to_dict()


@router.delete("/v1/builds/{job_id}", summary="Cancel a queued or running build job", response_model=None)
async def cancel_build(job_id: str, request: Request):
    """A queued job is dropped; a running one stops and removes its staging directory, so nothing
    is published (a build already publishing finishes: its job ends `done`). 200 with the job
    once it has ended, 202 while it is still stopping; 409 once it is loading or over."""
    import anyio

    job = request.app.state.server.builds.cancel(job_id)
    deadline = anyio.current_time() + CANCEL_WAIT_S
    while not job.done and anyio.current_time() < deadline:
        await asyncio.sleep(0.1)
    return JSONResponse(job.to_dict(), status_code=200 if job.done else 202)


@router.get("/v1/builds/{job_id}/events", summary="A build job's progress as server-sent events")
async def build_events(job_id: str, request: Request):
    return _event_stream(request.app.state.server.builds.get(job_id), request)


def _event_stream(job: Job, request: Request) -> StreamingResponse:
    last = request.headers.get("last-event-id", "")
    start = int(last) + 1 if last.isdigit() else 0

    async def events():
        seen, quiet = start, 0.0
        while True:
            batch = job.events[seen:]
            for event in batch:
                yield f"id: {event['id']}\nevent: {event['event']}\ndata: {json.dumps(event)}\n\n"
            seen += len(batch)
            if job.done and seen >= len(job.events):
                return
            await asyncio.sleep(0.2)
            quiet = 0.0 if batch else quiet + 0.2
            if quiet >= HEARTBEAT_S:
                quiet = 0.0
                yield ": still building\n\n"

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
