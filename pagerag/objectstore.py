"""A repository on object storage: `--repo s3://bucket/prefix`.

Layout under the prefix (every object but LATEST is written once and never changed):

    blobs/<sha256>          the content of one file of some version (shared by every version holding it)
    versions/<n>.json       version n: {"version", "created", "files": {path: [sha256, bytes]}}
    LATEST                  {"version": n} — written last, with a conditional PUT

A writer (build, add, remove) works on a local copy of the latest version, uploads the blobs the
new version adds (an add uploads its documents' files, the new LanceDB fragments and manifests,
and the rewritten graph tables and BM25; never the unchanged rest), then versions/<n+1>.json,
and only then swaps LATEST from n to n+1 with `If-Match` on the ETag it read (first version:
`If-None-Match: *`). So a reader, which reads LATEST, then the version file, then its blobs,
sees a whole version, the old one or the new one: never a half-written one; a killed writer
leaves blobs that no version names; and of two writers the second to publish fails with one line
instead of overwriting. A reader materialises a version once into the cache dir (blobs
downloaded once, hard-linked into versions/<n>/, a marker written last) and opens it as a local
repository. Nothing is ever deleted (old versions stay readable; no garbage collection yet).

Credentials and endpoint come from boto3's usual settings (AWS_ACCESS_KEY_ID, …,
AWS_ENDPOINT_URL for an S3-compatible server). Only S3 is implemented; boto3 is imported only
for such a repository (`pip install "pagerag[s3]"`).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from .errors import RepositoryError
from .resources import sha256_of

SCHEMES = ("s3",)
LATEST = "LATEST"
COMPLETE = ".complete"


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
        """The version (default: the latest) as a local directory, downloaded once."""
        if version is None:
            found = self.latest()
            if found is None:
                raise RepositoryError(f"{self.uri}: no repository here (run `pagerag build … --repo {self.uri}` first)")
            version = found[0]
        target = self.local / "versions" / f"{version:06d}"
        if (target / COMPLETE).is_file():
            return target
        files = self.files(version)
        blobs = self.local / "blobs"
        blobs.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f"{target.name}.tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        for rel, (sha, _size) in sorted(files.items()):
            blob = blobs / sha
            if not blob.is_file():
                got = self._get(f"blobs/{sha}")
                if got is None:
                    raise RepositoryError(f"{self.uri}: version {version} names a missing blob ({rel})")
                part = blob.with_name(f"{sha}.part{os.getpid()}")
                part.write_bytes(got[0])
                part.replace(blob)
            path = tmp / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            os.link(blob, path)
        (tmp / COMPLETE).write_text(str(version))
        shutil.rmtree(target, ignore_errors=True)
        tmp.replace(target)
        return target

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
        from botocore.exceptions import ClientError

        files: dict[str, list] = {}
        known = {sha for sha, _ in previous_files.values()}
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
        version = previous + 1
        record = {"version": version, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "files": files}
        self.client.put_object(Bucket=self.bucket, Key=self.key(f"versions/{version:06d}.json"),
                               Body=json.dumps(record).encode())
        condition: dict[str, Any] = {"IfMatch": etag} if etag else {"IfNoneMatch": "*"}
        try:
            self.client.put_object(Bucket=self.bucket, Key=self.key(LATEST),
                                   Body=json.dumps({"version": version}).encode(), **condition)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("PreconditionFailed", "412", "ConditionalRequestConflict"):
                raise RepositoryError(f"{self.uri}: another writer published a version first; nothing was "
                                      "published, run it again") from None
            raise
        # the new version is the local copy: keep it as that version's materialisation
        target = self.local / "versions" / f"{version:06d}"
        if not (target / COMPLETE).is_file():
            shutil.rmtree(target, ignore_errors=True)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.rename(local, target)
            (target / COMPLETE).write_text(str(version))
        return version



def local_version(repo: str | Path) -> Path:
    """Where a repository is read: itself, or a remote one's latest version, materialised."""
    uri = remote_uri(repo)
    return Path(repo) if uri is None else ObjectRepository(uri).materialise()
