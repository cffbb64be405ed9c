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
                           on_note=lambda note: typer.echo(f"note: {note}", err=True), prefetch=True)  # it only adds
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
    wide: bool = typer.Option(False, "--wide", help="Every column in full: the file, the whole sha256 and the "
                              "time added (the table may be wider than the terminal)."),
):
    """List the library's documents: id, title, format, words, passages, when added (--wide: the
    file and sha256 too). The table fits the terminal: ids are whole, titles are cut to fit."""
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
    _print_documents(listed, f"{repo}: {len(listed)} documents, version {version}", wide)
    typer.echo(f"{stored.describe()} (`pagerag gc` removes the old ones no reader holds)")


NUMERIC = ("words", "passages")
MIN_TITLE = 5  # cells: "A Ch…"


def _print_documents(listed: list[dict], heading: str, wide: bool) -> None:
    """One row a document, in the terminal's width (COLUMNS when not a terminal): ids are never
    cut (`pagerag remove` takes them), the title takes what the other columns leave and ends in
    "…" when it does not fit; `wide` adds the file and the whole sha256, and the time added."""
    from rich.cells import cell_len
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    names = (["id", "title", "file", "format", "words", "passages", "sha256", "added"] if wide
             else ["id", "title", "format", "words", "passages", "added"])
    rows = [{"id": d["doc_id"], "title": str(d["title"]), "file": d["file"], "format": d["format"],
             "words": f"{d['words'] or 0:,}", "passages": str(d["passages"] or ""), "sha256": d["sha256"] or "",
             "added": str(d["added"] or "") if wide else str(d["added"] or "")[:10]}  # the date alone
            for d in listed]
    natural = {n: max([cell_len(n)] + [cell_len(r[n]) for r in rows]) for n in names}
    others = sum(natural[n] for n in names if n != "title") + 2 * (len(names) - 1)  # two spaces between columns
    terminal = Console().width
    title = natural["title"] if wide else min(natural["title"], max(terminal - others, MIN_TITLE))
    table = Table(title=escape(heading), title_justify="left", box=None, pad_edge=False, padding=(0, 1))
    for n in names:
        table.add_column(n, justify="right" if n in NUMERIC else "left", no_wrap=True, overflow="ellipsis",
                         max_width=title if n == "title" else None)
    for r in rows:
        table.add_row(*(escape(r[n]) for n in names))
    # wider than the terminal only where ids (or --wide) need it: rich would cut every column
    Console(width=max(terminal, others + title)).print(table)


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
