"""Build jobs: `POST /v1/builds` from a file or folder under the build root, or from uploaded
.txt/.md files; progress as server-sent events; the built repository served when it is done.

One build runs at a time (the machine's cores are shared with the questions), each in its own
process (build_worker.py). Naming a served repository rebuilds it; its new version is swapped in
atomically (registry.py). A new name builds `<repos dir>/<name>.rag` and serves it.
"""
from __future__ import annotations

import asyncio
import json
import logging
import queue
import re
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from .config import REPO_NAME
from .errors import ApiError, one_line

log = logging.getLogger("pagerag.serve")
router = APIRouter(tags=["builds"])

TEXT_SUFFIXES = (".txt", ".md")
MAX_FILES = 100
SNIFF_BYTES = 8192
# Rough share of a build's time per stage (from the README's build table), for one overall bar.
STAGE_WEIGHTS = {"chunk": 1, "embed": 50, "index": 1, "extract": 20, "govern": 10, "communities": 3, "publish": 5}
HEARTBEAT_S = 15.0


@dataclass
class Job:
    id: str
    repo: str
    target: Path
    sources: list[str]
    kind: str  # path | upload
    status: str = "queued"  # queued | running | loading | done | failed
    created: float = field(default_factory=time.time)
    started: float | None = None
    finished: float | None = None
    error: str | None = None
    version: str | None = None
    stats: dict[str, Any] | None = None
    resumed: list[str] | None = None  # stages taken from the build cache
    progress: float = 0.0  # overall, 0..1
    stage: str | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    process: Any = None

    @property
    def done(self) -> bool:
        return self.status in ("done", "failed")

    def emit(self, event: str, **data: Any) -> None:
        self.events.append({"id": len(self.events), "event": event, **data})

    def set_status(self, status: str, **data: Any) -> None:
        self.status = status
        self.emit("status", status=status, **data)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "repo": self.repo, "status": self.status, "kind": self.kind,
                "sources": [Path(s).name for s in self.sources], "stage": self.stage,
                "progress": round(self.progress, 4), "error": self.error, "version": self.version,
                "stats": self.stats, "resumed": self.resumed, "created": self.created, "started": self.started, "finished": self.finished,
                "events_url": f"/v1/builds/{self.id}/events"}


class BuildManager:
    def __init__(self, server):
        self.server = server
        self.jobs: dict[str, Job] = {}
        self._queue: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, repo: str, sources: list[Path], kind: str) -> Job:
        registry = self.server.registry
        if repo in registry.names():
            target = registry.resolve(repo).source
        else:
            target = self.server.config.new_repos_dir / f"{repo}.rag"
        job = Job(uuid.uuid4().hex[:12], repo, target, [str(s) for s in sources], kind)
        job.emit("status", status="queued")
        with self._lock:
            self.jobs[job.id] = job
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="builds", daemon=True)
                self._thread.start()
        self._queue.put(job)
        return job

    def get(self, job_id: str) -> Job:
        job = self.jobs.get(job_id)
        if job is None:
            raise ApiError(404, f"no build job '{job_id}'")
        return job

    def _work(self) -> None:
        while True:
            job = self._queue.get()
            if job is None or self._closed:
                return
            try:
                self._run(job)
            except Exception as exc:  # never let one job stop the queue
                log.exception("build job %s failed", job.id)
                self._fail(job, f"{exc.__class__.__name__}: {exc}")

    def _run(self, job: Job) -> None:
        job.started = time.time()
        job.set_status("running")
        event = self._build(job)
        if event.get("event") != "done":
            return self._fail(job, event.get("message") or "the build process ended without a result")
        job.stats, job.resumed = event.get("stats"), event.get("resumed")
        job.set_status("loading")  # pin, open and warm the new version, then swap it in
        version = self.server.registry.add(job.repo, job.target)
        job.version = version.version
        job.progress, job.finished = 1.0, time.time()
        job.set_status("done", version=version.version, stats=job.stats, resumed=job.resumed)

    def _build(self, job: Job) -> dict[str, Any]:
        """Run the worker process; relay its progress; return its last event."""
        config = self.server.config
        cmd = [sys.executable, "-m", "pagerag.serve.build_worker", "--repo", str(job.target), *job.sources]
        if job.kind == "path":  # checked again while the files are read: a link made since cannot escape
            cmd += ["--root", str(config.build_root)]
        cmd += ["--llm", config.default_llm]  # the operator's backend, never one a request named
        if config.pipeline:
            cmd += ["--pipeline", config.pipeline]
        if config.config_file:
            cmd += ["--config", str(config.config_file)]
        for pair in config.sets:
            cmd += ["--set", pair]
        job.process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                       encoding="utf-8", errors="replace", stdin=subprocess.DEVNULL)
        tail: list[str] = []
        drain = threading.Thread(target=_keep_tail, args=(job.process.stderr, tail), daemon=True)
        drain.start()
        last: dict[str, Any] = {}
        for line in job.process.stdout:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            last = event
            if event.get("event") == "progress":
                self._progress(job, event)
        code = job.process.wait()
        drain.join(timeout=5)
        if code != 0 and last.get("event") != "error":
            last = {"event": "error", "message": (tail[-1] if tail else f"the build process exited with {code}")}
        return last

    def _progress(self, job: Job, event: dict[str, Any]) -> None:
        stage, done, total = event.get("stage"), event.get("completed") or 0, event.get("total")
        fraction = min(1.0, done / total) if total else 0.0
        weights = list(STAGE_WEIGHTS)
        before = sum(STAGE_WEIGHTS[s] for s in weights[: weights.index(stage)]) if stage in STAGE_WEIGHTS else 0
        overall = (before + STAGE_WEIGHTS.get(stage, 0) * fraction) / sum(STAGE_WEIGHTS.values())
        job.stage, job.progress = stage, max(job.progress, overall)
        job.emit("progress", stage=stage, completed=done, total=total, fraction=round(fraction, 4),
                 overall=round(job.progress, 4))

    def _fail(self, job: Job, message: str) -> None:
        job.error, job.finished = one_line(message), time.time()
        job.set_status("failed", error=job.error)

    def close(self) -> None:
        self._closed = True
        self._queue.put(None)
        for job in list(self.jobs.values()):
            if job.process is not None and job.process.poll() is None:
                job.process.terminate()  # the worker's staging dir is cleaned by the next build


def _keep_tail(stream, tail: list[str], keep: int = 40) -> None:
    for line in stream:
        line = line.strip()
        if line:
            tail.append(line)
            del tail[:-keep]


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

    files = [v for k, v in form.multi_items() if isinstance(v, UploadFile)]
    if not files:
        raise ApiError(400, "no files uploaded: send .txt or .md files in the multipart field 'files'")
    if len(files) > MAX_FILES:
        raise ApiError(413, f"too many files ({len(files)}; at most {MAX_FILES})")
    saved: list[Path] = []
    for upload in files:
        name = Path(upload.filename or "").name
        if not name.lower().endswith(TEXT_SUFFIXES):
            raise ApiError(415, f"'{name or '(no name)'}' is not a .txt or .md file")
        data = await upload.read()
        if b"\x00" in data[:SNIFF_BYTES]:
            raise ApiError(415, f"'{name}' is not a text file")
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).lstrip(".") or "upload.txt"
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / safe
        path.write_bytes(data)
        saved.append(path)
    return saved


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
        async with request.form(max_files=MAX_FILES + 1, max_fields=20) as form:
            repo = _check_repo_name(form.get("repo"))
            upload_dir = server.config.new_repos_dir / ".uploads" / uuid.uuid4().hex[:12]
            sources, kind = [upload_dir], "upload"
            await _save_uploads(form, upload_dir)
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
        sources, kind = [full], "path"
    else:
        raise ApiError(415, "send JSON {\"path\", \"repo\"} or a multipart upload of .txt/.md files")
    job = server.builds.submit(repo, sources, kind)
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
