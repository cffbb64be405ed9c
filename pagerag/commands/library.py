"""`pagerag add`, `pagerag remove`, `pagerag docs`, `pagerag gc`: the repository as a library of documents.

Each add or remove publishes a new version atomically (as a build does), under the
repository's writer lock; `docs` lists what the library holds; `gc` removes old versions no
reader holds. Register with `register(app)`.
"""
from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import List, Optional

import typer

ExecutorOption = typer.Option("local", "--executor", help="Where the text stages run: local (this machine's "
                              "cores) or ray (a Ray cluster: pip install \"pagerag[ray]\").")
RayAddressOption = typer.Option(None, "--ray-address", help="The Ray cluster to use with --executor ray "
                                "(e.g. ray://host:10001 or auto); default: start one on this machine.")
WaitOption = typer.Option(False, "--wait", help="If another build, add or remove is changing the repository, "
                          "wait for it instead of failing.")


def add(
    paths: List[Path] = typer.Argument(..., help="Files or folders to add (the formats `pagerag build` reads)."),
    repo: Path = typer.Option(..., "--repo", "-r", help="The library (a repository directory)."),
    executor: str = ExecutorOption,
    ray_address: Optional[str] = RayAddressOption,
    wait: bool = WaitOption,
    password: Optional[str] = typer.Option(None, "--password", envvar="PAGERAG_PDF_PASSWORD", show_envvar=True,
                                           help="Password of encrypted PDFs. Never stored."),
    pipeline: Optional[str] = typer.Option(None, "--pipeline", "-p", help="Pipeline preset (pipelines/<name>.toml)."),
    config: Optional[Path] = typer.Option(None, "--config", help="A pagerag.toml file (default: ./pagerag.toml if present)."),
    set_: Optional[List[str]] = typer.Option(None, "--set", help="Override a setting: section.field=value (repeatable)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
):
    """Add documents to a library: only they are chunked, embedded and read; the graph, its
    communities and the indexes are brought up to date; a new version is published atomically."""
    from ..build import add_documents
    from ..corpora import resolve_corpus_paths
    from ..settings import load_settings

    settings = load_settings(pipeline, config, sets=set_ or ())
    report = add_documents(resolve_corpus_paths([str(p) for p in paths]), repo, settings, show_progress=not quiet,
                           password=password, wait=wait, executor=executor, ray_address=ray_address,
                           on_note=lambda note: typer.echo(f"note: {note}", err=True))
    _say(report, repo, "add")


def remove(
    doc_ids: List[str] = typer.Argument(..., help="Document ids to remove (see `pagerag docs`)."),
    repo: Path = typer.Option(..., "--repo", "-r", help="The library (a repository directory)."),
    wait: bool = WaitOption,
    pipeline: Optional[str] = typer.Option(None, "--pipeline", "-p", help="Pipeline preset (pipelines/<name>.toml)."),
    config: Optional[Path] = typer.Option(None, "--config", help="A pagerag.toml file (default: ./pagerag.toml if present)."),
    set_: Optional[List[str]] = typer.Option(None, "--set", help="Override a setting: section.field=value (repeatable)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
):
    """Remove documents from a library: their passages, windows and provenance go, and so do
    entities and relations left without provenance; a new version is published atomically."""
    from ..build import remove_documents
    from ..settings import load_settings

    settings = load_settings(pipeline, config, sets=set_ or ())
    report = remove_documents(list(doc_ids), repo, settings, show_progress=not quiet, wait=wait)
    _say(report, repo, "remove")


def docs(
    repo: Path = typer.Option(..., "--repo", "-r", help="The library (a repository directory)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
):
    """List the library's documents: id, title, file, format, words, passages, sha256, when added."""
    from ..repository import Repository, document_list

    from ..versions import kept

    repository = Repository.open(repo)
    listed = document_list(repository.manifest)
    version = (repository.manifest.get("library") or {}).get("version", 1)
    stored = kept(repo)
    if as_json:
        sys.stdout.write(json.dumps({"version": version, "documents": listed, "kept": asdict(stored)},
                                    indent=2, ensure_ascii=False) + "\n")
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"{repo}: {len(listed)} documents, version {version}")
    for column, justify in (("id", "left"), ("title", "left"), ("file", "left"), ("format", "left"),
                            ("words", "right"), ("passages", "right"), ("sha256", "left"), ("added", "left")):
        table.add_column(column, justify=justify, overflow="fold")
    for d in listed:
        table.add_row(escape(d["doc_id"]), escape(str(d["title"])), escape(d["file"]), d["format"],
                      f"{d['words'] or 0:,}", str(d["passages"] or ""), (d["sha256"] or "")[:12], str(d["added"] or ""))
    Console().print(table)
    typer.echo(f"{stored.describe()} (`pagerag gc --repo {repo}` removes old ones no reader holds)")


def gc(
    repo: Path = typer.Option(..., "--repo", "-r", help="The library (a repository directory or s3://bucket/prefix)."),
    keep: Optional[int] = typer.Option(None, "--keep", help="Versions to keep, the current one included "
                                       "(default: the setting library.keep_versions, 2)."),
    wait: bool = WaitOption,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
):
    """Remove the versions older than the last --keep that no reader holds, and the files (on S3
    the blobs) no kept version references. The current version is never touched."""
    from ..settings import load_settings
    from ..versions import collect, human_bytes

    done = collect(repo, keep if keep is not None else load_settings().library.keep_versions, wait=wait)
    if as_json:
        sys.stdout.write(json.dumps(asdict(done), indent=2) + "\n")
        return
    removed = f"removed {_versions(done.removed)} ({human_bytes(done.bytes_freed)} freed)" if done.removed else "removed nothing"
    held = f"; {_versions(done.held)} held by a reader" if done.held else ""
    writing = "; a writer was publishing, so no blob was deleted (run gc again later)" if done.writing else ""
    typer.echo(f"{repo}: {removed}{held}{writing}; kept {_versions(done.kept)}: {human_bytes(done.bytes_kept)}")


def _versions(numbers: list) -> str:
    return f"version{'s' if len(numbers) != 1 else ''} {', '.join(map(str, numbers))}"


def _say(report, repo: Path, op: str) -> None:
    if report.unchanged:
        typer.echo(f"{repo}: nothing to {op}; the library is unchanged (version "
                   f"{(report.manifest.get('library') or {}).get('version', 1)})")
        return
    stats, library = report.manifest["stats"], report.manifest.get("library", {})
    did = [f"added {', '.join(report.added)}"] if report.added else []
    did += [f"removed {', '.join(report.removed)}"] if report.removed else []
    typer.echo(f"{repo}: {'; '.join(did)} → version {library.get('version')}: {stats['documents']} documents, "
               f"{stats['passages']} passages, {stats['entities']} entities, {stats['relations']} relations, "
               f"{stats['communities']} communities in {stats['build_seconds']:.1f}s")


def register(app: typer.Typer) -> None:
    app.command()(add)
    app.command()(remove)
    app.command()(docs)
    app.command()(gc)
