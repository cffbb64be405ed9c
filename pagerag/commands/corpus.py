"""`pagerag corpus list` and `pagerag corpus fetch NAME [--mirror DIR]`.

Register with `app.add_typer(corpus_app, name="corpus")`. The catalog is corpora/catalog.toml;
see pagerag/corpora.py for where files go and how they are verified.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

corpus_app = typer.Typer(no_args_is_help=True, help="Named public corpora and question sets (corpora/catalog.toml).")


@corpus_app.command("list")
def corpus_list(
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    catalog_path: Optional[Path] = typer.Option(None, "--catalog", help="Another catalog TOML (default: the packaged one)."),
) -> None:
    """List the catalog: name, kind, whether it is fetched, question sets, title (--json adds licence and source)."""
    from ..corpora import entry_status, load_catalog

    catalog = load_catalog(catalog_path)
    rows = []
    for entry in catalog.entries.values():
        rows.append({"name": entry.name, "section": entry.section, "kind": entry.kind or "questions",
                     "format": entry.format, "status": entry_status(entry), "title": entry.title,
                     "question_sets": entry.question_sets, "corpus": entry.corpus, "licence": entry.licence,
                     "source": entry.source, "files": [f.path for f in entry.files]})
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2, ensure_ascii=False) + "\n")
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"corpora ({catalog.path})")
    for column in ("name", "kind", "status", "questions / corpus", "title"):
        table.add_column(column, overflow="fold", no_wrap=column != "title")
    for row in rows:
        link = ", ".join(row["question_sets"]) if row["section"] == "corpus" else f"asks about {row['corpus']}"
        table.add_row(row["name"], row["kind"], row["status"], link, row["title"])
    Console().print(table)
    typer.echo("status: fetched = verified in the cache; mirror = verified in $PAGERAG_DATA_DIR (used in place); "
               "missing = run `pagerag corpus fetch NAME`", err=True)


@corpus_app.command("fetch")
def corpus_fetch(
    name: str = typer.Argument(..., help="Catalog name (see `pagerag corpus list`)."),
    mirror: Optional[Path] = typer.Option(None, "--mirror", help="Copy from this directory (laid out like the catalog paths, e.g. $PAGERAG_DATA_DIR) instead of downloading."),
    catalog_path: Optional[Path] = typer.Option(None, "--catalog", help="Another catalog TOML (default: the packaged one)."),
    timeout: float = typer.Option(60.0, "--timeout", min=1.0, help="Download timeout in seconds."),
) -> None:
    """Download (or copy from --mirror) a corpus and its question sets into the cache, checking sha256."""
    from ..corpora import cache_dir, fetch, load_catalog

    catalog = load_catalog(catalog_path)
    paths = fetch(name, mirror=mirror, catalog=catalog, report=lambda message: typer.echo(message, err=True),
                  timeout_s=timeout)
    typer.echo(f"{name}: {len(paths)} file(s) verified in {cache_dir()}")
