"""A repository on object storage: `--repo s3://bucket/prefix`.

Layout under the prefix (every object but LATEST and the leases is written once and never changed):

    blobs/<sha256>          the content of one file of some version (shared by every version holding it)
    versions/<n>.json       version n: {"version", "created", "files": {path: [sha256, bytes]}}
    LATEST                  {"version": n} — written last, with a conditional PUT
    leases/<kind>/<id>      who is reading a version (read-<n>), publishing (write) or collecting (gc)

A writer (build, add, remove) works on a local copy of the latest version, uploads the blobs the
new version adds (an add uploads its documents' files and BM25 shards, the new LanceDB fragments
and manifests, and the rewritten graph tables; never the unchanged rest), then versions/<n+1>.json
(`If-None-Match: *`: never over another writer's), and only then swaps LATEST from n to n+1 with
`If-Match` on the ETag it read (first version: `If-None-Match: *`). So a reader, which reads
LATEST, then the version file, then its blobs, sees a whole version, the old one or the new one:
never a half-written one; a killed writer leaves blobs that no version names; and of two writers
the second to publish fails with one line instead of overwriting. A reader materialises a version
once into the cache dir (blobs downloaded once, hard-linked into versions/<n>/, a marker written
last) and opens it as a local repository.

Old versions go only when `pagerag gc` removes them (`collect`). What it may not remove is told
by leases, objects a process renews every LEASE_SECONDS/4 from a thread while it works and
deletes when done (a killed one's lapses after LEASE_SECONDS, at once for the other processes
of its machine, which see that its pid is gone): a reader leases the version it
downloads, then reads LATEST again, and goes on only if it is still the latest (else it starts
over): gc reads LATEST before it lists leases, so it either sees the lease or kept that version as
the latest. A writer leases its publishing and gc its collecting, each before looking for the
other's: a writer that sees a gc waits for it to end; a gc that sees a writer deletes no blob
(the writer's new blobs are named by no version yet) and no version newer than the latest.

Credentials and endpoint come from boto3's usual settings (AWS_ACCESS_KEY_ID, …,
AWS_ENDPOINT_URL for an S3-compatible server). Only S3 is implemented; boto3 is imported only
for such a repository (`pip install "pagerag[s3]"`).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

from .errors import RepositoryError
from .resources import sha256_of

SCHEMES = ("s3",)
LATEST = "LATEST"
COMPLETE = ".complete"
LEASES = "leases"
# A lease not renewed for this long is taken for a dead holder's (holders renew every quarter of it;
# the clock is S3's own: its Date header against the lease's LastModified)
LEASE_SECONDS = 120
READ_ATTEMPTS = 5
DELETE_BATCH = 1000  # S3's most keys per DeleteObjects


def remote_uri(repo: str | Path) -> str | None:
    """The URI when `repo` names object storage (a Path turns "s3://b/p" into "s3:/b/p")."""
    text = str(repo)
    for scheme in SCHEMES:
        for lead in (f"{scheme}://", f"{scheme}:/"):
            if text.startswith(lead):
                return f"{scheme}://{text[len(lead):].strip('/')}"
    return None


class ObjectRepository:
    """One repository under s3://bucket/prefix."""

    def __init__(self, uri: str):
        from .offline import cache_root

        self.uri = uri
        rest = uri.split("://", 1)[1]
        self.bucket, _, prefix = rest.partition("/")
        if not self.bucket:
            raise RepositoryError(f"{uri}: no bucket in the repository URI (s3://bucket/prefix)")
        self.prefix = prefix.strip("/")
        self.local = cache_root() / "objectstore" / hashlib.sha1(uri.encode()).hexdigest()[:16]
        self._client = None

    # -- the client ------------------------------------------------------------------------

    @property
    def client(self):
        if self._client is None:
            try:
                import boto3
            except ImportError:
                raise RepositoryError(f'{self.uri}: a repository on S3 needs boto3 (pip install "pagerag[s3]")') from None
            self._client = boto3.client("s3")
        return self._client

    def key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def _get(self, name: str) -> tuple[bytes, str] | None:
        from botocore.exceptions import ClientError

        try:
            got = self.client.get_object(Bucket=self.bucket, Key=self.key(name))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise RepositoryError(f"{self.uri}: {exc.response.get('Error', {}).get('Message', exc)}") from None
        except Exception as exc:  # endpoint unreachable, no credentials, …: one line
            raise RepositoryError(f"{self.uri}: cannot read {name} ({str(exc).splitlines()[0]})") from None
        return got["Body"].read(), got.get("ETag", "")

    # -- reading ---------------------------------------------------------------------------

    def latest(self) -> tuple[int, str] | None:
        """(version, ETag of LATEST), or None when nothing was published here."""
        got = self._get(LATEST)
        if got is None:
            return None
        return int(json.loads(got[0])["version"]), got[1]

    def files(self, version: int) -> dict[str, list]:
        got = self._get(f"versions/{version:06d}.json")
        if got is None:
            raise RepositoryError(f"{self.uri}: version {version} is named by LATEST but has no version file")
        return json.loads(got[0])["files"]

    def materialise(self, version: int | None = None) -> Path:
        """The latest version as a local directory, downloaded once; with `version`, that one,
        which must still be the latest when it is downloaded (a writer's base)."""
        for _ in range(READ_ATTEMPTS):
            wanted = self._latest_version() if version is None else version
            target = self.local / "versions" / f"{wanted:06d}"
            if (target / COMPLETE).is_file():
                return target
            with Lease(self, f"read-{wanted:06d}"):
                # still the latest once leased: a gc either sees the lease or keeps it as the latest
                if self._latest_version() == wanted:
                    self._download(wanted, target)
                    return target
            if version is not None:
                raise RepositoryError(f"{self.uri}: another writer published a version first; nothing was "
                                      "published, run it again")
        raise RepositoryError(f"{self.uri}: the repository kept changing while it was being read; try again")

    def _latest_version(self) -> int:
        found = self.latest()
        if found is None:
            raise RepositoryError(f"{self.uri}: no repository here (run `pagerag build … --repo {self.uri}` first)")
        return found[0]

    def _download(self, version: int, target: Path) -> None:
        files = self.files(version)
        blobs = self.local / "blobs"
        blobs.mkdir(parents=True, exist_ok=True)
        mine = f"{os.getpid()}-{threading.get_ident()}"  # a server's threads may download the same version
        tmp = target.with_name(f"{target.name}.tmp{mine}")
        shutil.rmtree(tmp, ignore_errors=True)
        for rel, (sha, _size) in sorted(files.items()):
            blob = blobs / sha
            if not blob.is_file():
                got = self._get(f"blobs/{sha}")
                if got is None:
                    raise RepositoryError(f"{self.uri}: version {version} names a missing blob ({rel})")
                part = blob.with_name(f"{sha}.part{mine}")
                part.write_bytes(got[0])
                part.replace(blob)
            path = tmp / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            os.link(blob, path)
        (tmp / COMPLETE).write_text(str(version))
        shutil.rmtree(target, ignore_errors=True)
        tmp.replace(target)

    # -- writing ---------------------------------------------------------------------------

    def work_copy(self) -> tuple[Path, int, str | None, dict[str, list]]:
        """A private local copy of the latest version to change (an empty path when there is
        none), its version number, the ETag of LATEST it was read from, and its files."""
        found = self.latest()
        work = self.local / "work" / f"{os.getpid()}" / "repo.rag"
        shutil.rmtree(work.parent, ignore_errors=True)
        work.parent.mkdir(parents=True)
        if found is None:
            return work, 0, None, {}
        version, etag = found
        source = self.materialise(version)
        for here, _dirs, names in os.walk(source):
            target = work / Path(here).relative_to(source)
            target.mkdir(parents=True, exist_ok=True)
            for name in names:
                os.link(Path(here) / name, target / name)
        (work / COMPLETE).unlink(missing_ok=True)
        return work, version, etag, self.files(version)

    def work_copy_empty(self) -> tuple[Path, int, str | None]:
        """For a build: an empty local path, and the latest version and ETag it will replace."""
        found = self.latest()
        work = self.local / "work" / f"{os.getpid()}" / "repo.rag"
        shutil.rmtree(work.parent, ignore_errors=True)
        work.parent.mkdir(parents=True)
        return (work, 0, None) if found is None else (work, found[0], found[1])

    def publish(self, local: Path, previous: int, etag: str | None, previous_files: dict[str, list]) -> int:
        """Upload `local` as version previous+1 and make it the latest (see the module doc)."""
        version = previous + 1
        with Lease(self, "write") as lease:
            self._wait_for_gc()
            files = self._upload(local, {sha for sha, _ in previous_files.values()})
            record = {"version": version, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "files": files}
            self._put_version(version, json.dumps(record).encode(), etag, lease)
            self._swap_latest(version, etag)
        # the new version is the local copy: keep it as that version's materialisation
        target = self.local / "versions" / f"{version:06d}"
        if not (target / COMPLETE).is_file():
            shutil.rmtree(target, ignore_errors=True)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.rename(local, target)
            (target / COMPLETE).write_text(str(version))
        return version

    def _upload(self, local: Path, known: set[str]) -> dict[str, list]:
        """Upload the files of `local` whose content no blob in `known` holds; its file list."""
        files: dict[str, list] = {}
        for here, _dirs, names in os.walk(local):
            for name in sorted(names):
                path = Path(here) / name
                rel = path.relative_to(local).as_posix()
                if rel == COMPLETE:
                    continue
                sha = sha256_of(path)
                files[rel] = [sha, path.stat().st_size]
                if sha not in known:
                    self.client.upload_file(str(path), self.bucket, self.key(f"blobs/{sha}"))
                    known.add(sha)
        return files

    def _put_version(self, version: int, body: bytes, etag: str | None, lease: "Lease") -> None:
        """versions/<n>.json, never over another writer's: one already there is a live writer's
        (its lease is fresh: fail) or a killed writer's (no lease: replace it)."""
        key = self.key(f"versions/{version:06d}.json")
        try:
            self.client.put_object(Bucket=self.bucket, Key=key, Body=body, IfNoneMatch="*")
            return
        except Exception as exc:
            if not _precondition_failed(exc):
                raise
        found = self.latest()
        if (found[1] if found else None) != etag or any(
                held.kind == "write" and held.name != lease.name for held in self.leases() if held.fresh):
            raise RepositoryError(f"{self.uri}: another writer published a version first; nothing was "
                                  "published, run it again")
        got = self._get(f"versions/{version:06d}.json")
        self.client.put_object(Bucket=self.bucket, Key=key, Body=body, **({"IfMatch": got[1]} if got else {}))

    def _swap_latest(self, version: int, etag: str | None) -> None:
        condition: dict[str, Any] = {"IfMatch": etag} if etag else {"IfNoneMatch": "*"}
        try:
            self.client.put_object(Bucket=self.bucket, Key=self.key(LATEST),
                                   Body=json.dumps({"version": version}).encode(), **condition)
        except Exception as exc:
            if _precondition_failed(exc):
                raise RepositoryError(f"{self.uri}: another writer published a version first; nothing was "
                                      "published, run it again") from None
            raise

    def _wait_for_gc(self) -> None:
        """Wait while a gc is collecting (it may be deleting blobs this version would name)."""
        while any(held.kind == "gc" for held in self.leases() if held.fresh):
            time.sleep(0.5)

    # -- leases and collection -------------------------------------------------------------

    def leases(self) -> list["LeaseInfo"]:
        """Every lease, fresh when renewed within LEASE_SECONDS by a holder that may be alive."""
        listed, now = self._list(f"{LEASES}/")
        out = []
        for name, _size, modified in listed:
            kind = name.split("/")[1] if name.count("/") >= 2 else ""
            recent = (now - modified).total_seconds() < LEASE_SECONDS
            out.append(LeaseInfo(name, kind.split("-")[0], int(kind.split("-")[1]) if kind.startswith("read-") else None,
                                 recent and not self._holder_gone(name)))
        return out

    def _holder_gone(self, name: str) -> bool:
        """A lease of a process of this machine that is no more (killed): no need to wait for it
        to lapse. Another machine's is taken as alive until it lapses."""
        got = self._get(name)
        try:
            holder = json.loads(got[0]) if got else {}
        except ValueError:
            return False
        return holder.get("host") == HOST and isinstance(holder.get("pid"), int) and not _pid_alive(holder["pid"])

    def version_numbers(self) -> list[int]:
        listed, _now = self._list("versions/")
        return sorted(int(Path(name).stem) for name, _size, _m in listed if Path(name).stem.isdigit())

    def stored(self) -> "Stored":
        """How many versions and blob bytes are stored under the prefix."""
        blobs, _now = self._list("blobs/")
        return Stored(len(self.version_numbers()), sum(size for _n, size, _m in blobs))

    def collect(self, keep: int) -> "Collected":
        """Delete the versions older than the last `keep` that no reader leases, then the blobs
        no remaining version names (see the module doc for the order of the steps)."""
        with Lease(self, "gc") as lease:
            done, named = self._plan(keep, lease)
            self._delete([f"versions/{n:06d}.json" for n in done.removed])  # first: a killed gc leaves only loose blobs
            blobs, _now = self._list("blobs/")
            doomed = [] if done.writing else [(name, size) for name, size, _m in blobs if Path(name).name not in named]
            self._delete([name for name, _size in doomed])
            self._delete([held.name for held in self.leases() if not held.fresh])  # dead holders' leases
        done.blobs_removed, done.bytes_freed = len(doomed), sum(size for _n, size in doomed)
        done.bytes_kept = sum(size for _n, size, _m in blobs) - done.bytes_freed
        return done

    def _plan(self, keep: int, lease: "Lease") -> tuple["Collected", set[str]]:
        """Which versions stay and go, and the blobs the staying ones name."""
        latest = self._latest_version()  # before the leases are listed (see the module doc)
        numbers = self.version_numbers()
        leases = [held for held in self.leases() if held.fresh]
        if any(held.kind == "gc" and held.name != lease.name for held in leases):
            raise RepositoryError(f"{self.uri}: another gc is collecting this repository; try again when it has finished")
        writing = any(held.kind == "write" for held in leases)
        read = {held.version for held in leases if held.kind == "read"}
        newest = range(latest - keep + 1, latest + 1)
        # a version newer than the latest is a writer's about to be published, or a killed one's
        kept = [n for n in numbers if n in newest or n in read or (writing and n > latest)]
        named = {sha for n in kept for sha, _size in self.files(n).values()}
        return Collected(kept=kept[::-1], held=[n for n in kept[::-1] if n in read and n not in newest],
                         removed=[n for n in numbers[::-1] if n not in kept], writing=writing), named

    def _list(self, prefix: str) -> tuple[list[tuple[str, int, datetime]], datetime]:
        """(name under the prefix, size, last modified) of every object under `prefix`, and the
        server's time of the listing."""
        out, now, token = [], None, None
        while True:
            extra = {"ContinuationToken": token} if token else {}
            got = self.client.list_objects_v2(Bucket=self.bucket, Prefix=self.key(prefix), **extra)
            now = now or _server_time(got)
            skip = len(self.key(""))
            out += [(o["Key"][skip:], o["Size"], o["LastModified"]) for o in got.get("Contents", [])]
            if not got.get("IsTruncated"):
                return out, now
            token = got["NextContinuationToken"]

    def _delete(self, names: list[str]) -> None:
        for i in range(0, len(names), DELETE_BATCH):
            batch = [{"Key": self.key(name)} for name in names[i:i + DELETE_BATCH]]
            self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})


@dataclass
class LeaseInfo:
    name: str  # leases/<kind>/<id>
    kind: str  # read, write or gc
    version: int | None  # a read lease's version
    fresh: bool


@dataclass
class Stored:
    versions: int
    bytes: int


@dataclass
class Collected:
    """What a gc kept and removed (version numbers, newest first)."""

    kept: list[int]
    held: list[int]  # kept only because a reader held them
    removed: list[int]
    writing: bool = False  # a writer was publishing: no blob was deleted
    bytes_kept: int = 0
    bytes_freed: int = 0
    blobs_removed: int = 0


class Lease:
    """leases/<kind>/<id> while a block runs: put, renewed from a thread, deleted at the end."""

    def __init__(self, remote: ObjectRepository, kind: str):
        self.remote = remote
        self.name = f"{LEASES}/{kind}/{uuid.uuid4().hex}"
        self.key = remote.key(self.name)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "Lease":
        self._put()
        self._thread = threading.Thread(target=self._renew, name="pagerag-lease", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        try:
            self.remote.client.delete_object(Bucket=self.remote.bucket, Key=self.key)
        except Exception:
            pass  # it lapses after LEASE_SECONDS

    def _put(self) -> None:
        body = json.dumps({"host": HOST, "pid": os.getpid()}).encode()
        self.remote.client.put_object(Bucket=self.remote.bucket, Key=self.key, Body=body)

    def _renew(self) -> None:
        while not self._stop.wait(LEASE_SECONDS / 4):
            try:
                self._put()
            except Exception:
                pass  # the next renewal may get through; a lapsed lease only lets gc go further


def _host() -> str:
    """This machine and pid namespace (containers may share a host name, not these)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        boot, namespace = "", 0
    return f"{os.uname().nodename}:{boot}:{namespace}"


HOST = _host()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # one we may not signal
    return True


def _precondition_failed(exc: Exception) -> bool:
    code = getattr(exc, "response", {}).get("Error", {}).get("Code")
    return code in ("PreconditionFailed", "412", "ConditionalRequestConflict")


def _server_time(response: dict) -> datetime:
    try:
        return parsedate_to_datetime(response["ResponseMetadata"]["HTTPHeaders"]["date"])
    except (KeyError, TypeError, ValueError):
        return datetime.now(timezone.utc)


def local_version(repo: str | Path) -> Path:
    """Where a repository is read: itself, or a remote one's latest version, materialised."""
    uri = remote_uri(repo)
    return Path(repo) if uri is None else ObjectRepository(uri).materialise()
