"""The corpus catalog: the packaged catalog matches the shared data byte for byte; fetch copies
from a mirror or downloads over real HTTP (a loopback server) and verifies sha256, never leaving
a wrong file in the cache; `corpus:NAME` resolves for build and eval."""
from __future__ import annotations

import functools
import hashlib
import http.server
import io
import threading
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pagerag.corpora import (cache_dir, entry_status, fetch, load_catalog, locate, resolve_corpus_paths,
                             resolve_question_files)
from pagerag.errors import ConfigError, InputError


@pytest.fixture()
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("PAGERAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PAGERAG_DATA_DIR", raising=False)
    return tmp_path / "cache"


def test_packaged_catalog_lists_the_shared_data_with_matching_sha256(data_dir):
    catalog = load_catalog()
    names = set(catalog.entries)
    assert {"christmas-carol", "moby-dick", "novel-44557", "graphrag-bench-novels", "hotpotqa", "musique",
            "2wikimultihopqa", "carol-qa", "cornwall-qa", "graphrag-bench-novel-questions"} <= names
    for entry in catalog.entries.values():
        assert entry.title and entry.licence and entry.format and entry.files
        for item in entry.files:
            assert locate(item, [data_dir]) is not None, f"{entry.name}: {item.path} differs from the shared copy"
    assert len(catalog.get("graphrag-bench-novels").files) == 20
    assert catalog.corpus_of(catalog.get("cornwall-qa")).name == "novel-44557"


def test_mirror_fetch_copies_verified_files_into_the_cache(cache, data_dir):
    paths = fetch("christmas-carol", mirror=data_dir)
    assert paths == [cache_dir() / "books" / "christmas_carol.txt", cache_dir() / "qa" / "christmas_carol.qa.jsonl"]
    assert paths[0].read_bytes() == (data_dir / "books" / "christmas_carol.txt").read_bytes()
    assert entry_status(load_catalog().get("christmas-carol"), mirrors=[]) == "fetched"
    assert resolve_corpus_paths(["corpus:christmas-carol", "other.txt"], mirrors=[]) == [paths[0], Path("other.txt")]
    assert resolve_corpus_paths(["corpus:carol-qa"], mirrors=[]) == [paths[0]]  # a question set means its book
    [qfile] = resolve_question_files(["corpus:christmas-carol"], mirrors=[])
    assert (qfile.path, qfile.name, qfile.corpus) == (paths[1], "carol-qa", "christmas-carol")


def test_unfetched_or_unbuildable_names_are_one_clear_error(cache, data_dir):
    with pytest.raises(InputError, match="pagerag corpus fetch moby-dick"):
        resolve_corpus_paths(["corpus:moby-dick"], mirrors=[])
    assert resolve_corpus_paths(["corpus:moby-dick"], mirrors=[data_dir]) == [data_dir / "books" / "melville-moby_dick.txt"]
    with pytest.raises(InputError, match="passages corpus"):
        resolve_corpus_paths(["corpus:hotpotqa"], mirrors=[data_dir])
    with pytest.raises(InputError, match="not a question set"):
        resolve_question_files(["corpus:hotpotqa"], mirrors=[data_dir])
    with pytest.raises(InputError, match="unknown corpus 'carol'.*christmas-carol"):
        resolve_corpus_paths(["corpus:carol"])
    with pytest.raises(InputError, match="no download URL"):
        fetch("cornwall-qa")


def write_catalog(folder: Path, files: str) -> Path:
    path = folder / "catalog.toml"
    path.write_text(f'[corpus.tiny]\ntitle = "Tiny"\nkind = "book"\nformat = "text"\nlicence = "CC0"\nsource = "test"\n'
                    f'question_sets = []\nfiles = [{files}]\n', encoding="utf-8")
    return path


@pytest.fixture()
def http_root(tmp_path):
    """A real HTTP server on 127.0.0.1 serving `root`."""
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep test output clean
        pass


def test_download_is_verified_and_a_mismatch_leaves_nothing(cache, tmp_path, http_root):
    root, base = http_root
    body = b"Marley was dead, to begin with.\n"
    (root / "tiny.txt").write_bytes(body)
    good = hashlib.sha256(body).hexdigest()
    catalog = load_catalog(write_catalog(tmp_path, f'{{ path = "books/tiny.txt", sha256 = "{good}", url = "{base}/tiny.txt" }}'))
    [path] = fetch("tiny", catalog=catalog)
    assert path.read_bytes() == body
    messages: list[str] = []
    fetch("tiny", catalog=catalog, report=messages.append)
    assert "already in the cache" in messages[0]

    wrong = load_catalog(write_catalog(tmp_path, f'{{ path = "books/wrong.txt", sha256 = "{"0" * 64}", url = "{base}/tiny.txt" }}'))
    with pytest.raises(InputError, match="sha256 mismatch"):
        fetch("tiny", catalog=wrong)
    assert not any((cache_dir() / "books").glob("wrong*")) and not any((cache_dir() / "books").glob(".*part"))
    missing = load_catalog(write_catalog(tmp_path, f'{{ path = "books/m.txt", sha256 = "{good}", url = "{base}/absent.txt" }}'))
    with pytest.raises(InputError, match="cannot download"):
        fetch("tiny", catalog=missing)


def test_zip_member_download(cache, tmp_path, http_root):
    root, base = http_root
    body = b"[Emma by Jane Austen 1816]\n"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as bundle:
        bundle.writestr("gutenberg/emma.txt", body)
        bundle.writestr("gutenberg/other.txt", b"x")
    (root / "gutenberg.zip").write_bytes(buffer.getvalue())
    sha = hashlib.sha256(body).hexdigest()
    catalog = load_catalog(write_catalog(tmp_path, f'{{ path = "books/emma.txt", sha256 = "{sha}", url = "{base}/gutenberg.zip", member = "gutenberg/emma.txt" }}'))
    [path] = fetch("tiny", catalog=catalog)
    assert path.read_bytes() == body


def test_bad_catalogs_are_one_clear_error(tmp_path):
    broken = tmp_path / "broken.toml"
    broken.write_text("[corpus.x\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="cannot read the corpus catalog"):
        load_catalog(broken)
    dangling = tmp_path / "dangling.toml"
    dangling.write_text('[corpus.x]\ntitle = "X"\nformat = "text"\nlicence = "-"\nquestion_sets = ["nope"]\n'
                        'files = [{ path = "a.txt", sha256 = "00" }]\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="unknown entry 'nope'"):
        load_catalog(dangling)


def test_corpus_commands(cache, data_dir):
    import typer

    from pagerag.commands.corpus import corpus_app

    app = typer.Typer()
    app.add_typer(corpus_app, name="corpus")
    runner = CliRunner()
    fetched = runner.invoke(app, ["corpus", "fetch", "cornwall-qa", "--mirror", str(data_dir)])
    assert fetched.exit_code == 0, fetched.output
    assert "sha256 ok" in fetched.stderr and "1 file(s) verified" in fetched.stdout
    listed = runner.invoke(app, ["corpus", "list", "--json"])
    rows = {row["name"]: row for row in __import__("json").loads(listed.stdout)}
    assert rows["cornwall-qa"]["status"] == "fetched" and rows["moby-dick"]["status"] == "missing"
