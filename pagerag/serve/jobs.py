"""Build jobs: a bounded queue, one build at a time, each in its own process (build_worker.py).

- At most `config.max_builds` jobs are queued or running; one more is a 429 with Retry-After,
  and a second job for a repository that already has one is a 409.
- A job can be cancelled while queued or building (`cancel`): the worker removes its staging
  directory, so nothing is published; a cancel that arrives once the build is publishing is too
  late and the job ends `done`. A new repository whose build was cancelled or failed leaves
  nothing behind (its staging and build cache are removed).
- Uploaded files are deleted when their job ends, however it ends.
- Finished jobs are remembered up to `KEEP_FINISHED`, the oldest forgotten first.
"""
from __future__ import annotations

import json
import logging
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ApiError, one_line

log = logging.getLogger("pagerag.serve")

# Rough share of a build's time per stage (from the build table in docs/benchmarks.md), for one overall bar.
STAGE_WEIGHTS = {"chunk": 1, "embed": 50, "extract": 20, "govern": 10, "communities": 3, "publish": 5}
FINAL = ("done", "failed", "cancelled")
KEEP_FINISHED = 100
RETRY_AFTER_S = 60  # a small build takes about this long on two busy cores
KILL_AFTER_S = 30.0  # a worker that ignores SIGTERM this long is killed


@dataclass
class Job:
    id: str
    repo: str
    target: Path
    sources: list[str]  # what the worker reads
    kind: str  # path | upload
    shown: list[str] = field(default_factory=list)  # what clients see of the sources (no server paths)
    new_repo: bool = False  # the job creates a repository this server did not serve
    upload_dir: Path | None = None
    existed: bool = False  # the target directory was there before the job (never deleted by it)
    status: str = "queued"  # queued | running | loading | done | failed | cancelled
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
    cancel_requested: bool = False

    @property
    def done(self) -> bool:
        return self.status in FINAL

    def emit(self, event: str, **data: Any) -> None:
        self.events.append({"id": len(self.events), "event": event, **data})

    def set_status(self, status: str, **data: Any) -> None:
        self.status = status
        self.emit("status", status=status, **data)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "repo": self.repo, "status": self.status, "kind": self.kind,
                "sources": list(self.shown), "stage": self.stage,
                "progress": round(self.progress, 4), "error": self.error, "version": self.version,
                "stats": self.stats, "resumed": self.resumed, "created": self.created, "started": self.started,
                "finished": self.finished, "events_url": f"/v1/builds/{self.id}/events"}


class BuildManager:
    def __init__(self, server):
        self.server = server
        self.jobs: dict[str, Job] = {}
        self._queue: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False

    # ---- submitting and cancelling ---------------------------------------------------------

    def submit(self, repo: str, sources: list[Path], kind: str, shown: list[str],
               upload_dir: Path | None = None) -> Job:
        registry, config = self.server.registry, self.server.config
        new_repo = repo not in registry.names()
        target = self._target(repo) if not new_repo else config.new_repos_dir / f"{repo}.rag"
        job = Job(uuid.uuid4().hex[:12], repo, target, [str(s) for s in sources], kind, shown, new_repo, upload_dir,
                  existed=target.exists())
        with self._lock:
            self._check_room(repo)
            job.emit("status", status="queued")
            self.jobs[job.id] = job
            self._forget_old()
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="builds", daemon=True)
                self._thread.start()
        self._queue.put(job)
        return job

    def _target(self, repo: str) -> Path:
        return self.server.registry.resolve(repo).source

    def _check_room(self, repo: str) -> None:
        pending = [j for j in self.jobs.values() if not j.done]
        same = [j for j in pending if j.repo == repo]
        if same:
            raise ApiError(409, f"a build of '{repo}' is already {same[0].status} (job {same[0].id}): "
                                f"wait for it or cancel it (DELETE /v1/builds/{same[0].id})")
        limit = self.server.config.max_builds
        if len(pending) >= limit:
            raise ApiError(429, f"{len(pending)} builds are queued or running (limit {limit}); try again later",
                           headers={"Retry-After": str(RETRY_AFTER_S)})

    def pending_for(self, repo: str) -> Job | None:
        with self._lock:
            return next((j for j in self.jobs.values() if j.repo == repo and not j.done), None)

    def cancel(self, job_id: str) -> Job:
        """Cancel a queued or building job; ApiError(409) once it is loading or over."""
        job = self.get(job_id)
        with self._lock:
            if job.status == "queued" and not job.cancel_requested:
                job.cancel_requested = True
                self._end(job, "cancelled")  # the worker thread skips it when it comes up
                return job
            if job.status not in ("queued", "running"):
                hint = f"; remove the repository with DELETE /v1/repos/{job.repo}" if job.status == "done" else ""
                raise ApiError(409, f"build job {job.id} is {job.status}: nothing to cancel{hint}")
            job.cancel_requested = True
            process = job.process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)  # the worker removes its staging directory and exits
        return job

    def get(self, job_id: str) -> Job:
        job = self.jobs.get(job_id)
        if job is None:
            raise ApiError(404, f"no build job '{job_id}'")
        return job

    def _forget_old(self) -> None:
        finished = [j for j in self.jobs.values() if j.done]
        for job in sorted(finished, key=lambda j: j.finished or 0)[: max(0, len(finished) - KEEP_FINISHED)]:
            del self.jobs[job.id]

    # ---- running ---------------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            job = self._queue.get()
            if job is None or self._closed:
                return
            if job.done:  # cancelled while queued
                continue
            try:
                self._run(job)
            except Exception as exc:  # never let one job stop the queue
                log.exception("build job %s failed", job.id)
                self._end(job, "failed", f"{exc.__class__.__name__}: {exc}")

    def _run(self, job: Job) -> None:
        with self._lock:
            if job.done:  # cancelled while it was being taken off the queue
                return None
            if job.cancel_requested:
                return self._end(job, "cancelled")
            job.started = time.time()
            job.set_status("running")
        event = self._build(job)
        if event.get("event") != "done":
            if job.cancel_requested:
                return self._end(job, "cancelled")
            return self._end(job, "failed", event.get("message") or "the build process ended without a result")
        job.stats, job.resumed = event.get("stats"), event.get("resumed")
        job.set_status("loading")  # pin, open and warm the new version, then swap it in
        version = self.server.registry.add(job.repo, job.target, built_by_job=job.new_repo)
        job.version = version.version
        job.progress = 1.0
        self._end(job, "done", version=version.version, stats=job.stats, resumed=job.resumed)

    def _build(self, job: Job) -> dict[str, Any]:
        """Run the worker process; relay its progress; return its last event."""
        with self._lock:
            if job.cancel_requested:
                return {"event": "error", "message": "cancelled"}
            job.process = subprocess.Popen(self._command(job), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                           text=True, encoding="utf-8", errors="replace", stdin=subprocess.DEVNULL)
        tail: list[str] = []
        drain = threading.Thread(target=_keep_tail, args=(job.process.stderr, tail), daemon=True)
        drain.start()
        watchdog = threading.Thread(target=self._kill_if_stuck, args=(job,), daemon=True)
        watchdog.start()
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
        _remove_staging(job.target, job.process.pid)  # a worker killed hard cannot clean up after itself
        if code != 0 and last.get("event") != "error":
            last = {"event": "error", "message": (tail[-1] if tail else f"the build process exited with {code}")}
        return last

    def _command(self, job: Job) -> list[str]:
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
        return cmd

    def _kill_if_stuck(self, job: Job) -> None:
        """After a cancel, give the worker KILL_AFTER_S to clean up and exit, then kill it."""
        process = job.process
        while process.poll() is None:
            if job.cancel_requested:
                try:
                    process.wait(timeout=KILL_AFTER_S)
                except subprocess.TimeoutExpired:
                    process.kill()
                return
            time.sleep(0.2)

    def _progress(self, job: Job, event: dict[str, Any]) -> None:
        stage, done, total = event.get("stage"), event.get("completed") or 0, event.get("total")
        fraction = min(1.0, done / total) if total else 0.0
        weights = list(STAGE_WEIGHTS)
        before = sum(STAGE_WEIGHTS[s] for s in weights[: weights.index(stage)]) if stage in STAGE_WEIGHTS else 0
        overall = (before + STAGE_WEIGHTS.get(stage, 0) * fraction) / sum(STAGE_WEIGHTS.values())
        job.stage, job.progress = stage, max(job.progress, overall)
        job.emit("progress", stage=stage, completed=done, total=total, fraction=round(fraction, 4),
                 overall=round(job.progress, 4))

    def _end(self, job: Job, status: str, error: str | None = None, **data: Any) -> None:
        """Clean up, then say the job is over (a client that sees the final status finds
        nothing left behind)."""
        self._clean_up(job, status)
        job.finished = time.time()
        if error is not None:
            job.error = one_line(error)
            data["error"] = job.error
        job.set_status(status, **data)

    def _clean_up(self, job: Job, status: str) -> None:
        """Uploads go once their job is over; a new repository that was not built leaves nothing."""
        if job.upload_dir is not None:
            shutil.rmtree(job.upload_dir, ignore_errors=True)
        if job.new_repo and status in ("failed", "cancelled"):
            from ..build import cache_dir_for

            shutil.rmtree(cache_dir_for(job.target), ignore_errors=True)
            if not job.existed and job.repo not in self.server.registry.names():
                shutil.rmtree(job.target, ignore_errors=True)  # published as the cancel came: not served, so gone

    def close(self) -> None:
        self._closed = True
        self._queue.put(None)
        for job in list(self.jobs.values()):
            if job.process is not None and job.process.poll() is None:
                job.process.terminate()  # the worker removes its staging directory
            if job.upload_dir is not None:
                shutil.rmtree(job.upload_dir, ignore_errors=True)


def _keep_tail(stream, tail: list[str], keep: int = 40) -> None:
    for line in stream:
        line = line.strip()
        if line:
            tail.append(line)
            del tail[:-keep]


def _remove_staging(target: Path, pid: int) -> None:
    from ..repository import staging_dir

    shutil.rmtree(staging_dir(target, pid), ignore_errors=True)
