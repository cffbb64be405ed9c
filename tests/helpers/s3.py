"""moto's S3 server on loopback, for the tests of repositories on object storage."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

# one bucket name per test session: a reader's local copies of a version (the cache dir, which may
# outlive the session) are named by the repository URI and version number
BUCKET = f"library-{os.getpid()}-{int(time.time())}"


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory):
    """moto's S3 server on a free loopback port; the boto3 settings of this process point at it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=open(log, "w"), stderr=subprocess.STDOUT)
    env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
           "AWS_DEFAULT_REGION": "us-east-1"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        import boto3

        deadline = time.time() + 60
        while True:
            try:
                boto3.client("s3").create_bucket(Bucket=BUCKET)
                break
            except Exception:
                if time.time() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"moto server did not start: {log.read_text()[-500:]}")
                time.sleep(0.3)
        yield env
        forget_local_copies()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def forget_local_copies() -> None:
    """Remove this process's local copies (under the cache dir) of the repositories in BUCKET."""
    import shutil

    import boto3

    from pagerag.objectstore import ObjectRepository

    pages = boto3.client("s3").get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
    for key in {o["Key"] for page in pages for o in page.get("Contents", []) if o["Key"].endswith("LATEST")}:
        prefix = key[: -len("LATEST")].rstrip("/")
        shutil.rmtree(ObjectRepository(f"s3://{BUCKET}/{prefix}").local, ignore_errors=True)
