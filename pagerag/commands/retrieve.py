"""`pagerag retrieve "QUESTION" --repo R [--pipeline NAME] [--budget TOKENS] [--json]`.

Prints the analysis, the plan and the cited evidence (rich tables), or JSON with the keys
analysis, plan, evidence, hints, signals, timings_ms. Register with `app.command()(retrieve)`.
Heavy imports happen inside the function so `pagerag --help` stays fast.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from . import check_local_repository


def retrieve(
    question: str = typer.Argument(..., help="The question to find evidence for."),
    repo: Path = typer.Option(..., "--repo", "-r", help="Repository directory."),
    pipeline: Optional[str] = typer.Option(None, "--pipeline", "-p", help="Pipeline preset (pipelines/<name>.toml); default full."),
    budget: Optional[int] = typer.Option(None, "--budget", "-b", help="Evidence budget in tiktoken tokens (default: retrieve.budget_tokens, 2000)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON: analysis, plan, evidence, hints, signals, timings_ms."),
    config: Optional[Path] = typer.Option(None, "--config", help="A pagerag.toml file (default: ./pagerag.toml if present)."),
    set_: Optional[List[str]] = typer.Option(None, "--set", help="Override a setting: section.field=value (repeatable)."),
    doc: Optional[List[str]] = typer.Option(None, "--doc", help="Limit the question to this document of the library "
                                            "(its id, see `pagerag docs`; repeatable). Default: the whole library."),
) -> None:
    """Show how a question is routed and the cited evidence it gets (no answer is written; an LLM
    is used only when the pipeline routes with one, retrieve.router = llm)."""
    from ..api import PageRAG
    from ..errors import InputError
    from ..settings import load_settings

    if budget is not None and budget <= 0:
        raise InputError(f"--budget must be a positive number of tokens, got {budget}")
    settings = load_settings(pipeline, config, sets=set_ or ())
    check_local_repository(repo)  # a bad --repo: its one-line error before anything loads
    _prefetch(settings)
    rag = PageRAG(repo, settings=settings)
    rag.state.prefetch(settings.retrieve.graph)  # the graph view, while the encoder loads
    result = rag.retrieve(question, budget=budget, docs=doc or None)
    if as_json:
        sys.stdout.write(json.dumps(result.to_dict(), indent=2, ensure_ascii=False, default=str) + "\n")
        return
    print_retrieval(result)


def _prefetch(settings) -> None:
    """The encoder (its runtime's import and compiled model) and tiktoken's encoding load in
    background threads while the repository is opened (as `pagerag ask` does)."""
    from ..index.encoder import prefetch_encoder
    from ..offline import prefetch_encoding

    prefetch_encoder(settings.embed)
    prefetch_encoding(settings.chunk.encoding)


def print_retrieval(result) -> None:
    from rich.console import Console
    from rich.markup import escape  # book text and path labels contain [brackets]
    from rich.table import Table

    from ..structure import cite_place

    console = Console()
    a, p = result.analysis, result.plan
    links = ", ".join(f"{l.mention} → {l.name} ({l.method} {l.score:.2f})" for l in a.links) or "none"
    console.print(f"[bold]need[/bold] {a.need}  [dim]({a.decided_by}: {escape(a.reason)})[/dim]")
    console.print(f"[bold]entities[/bold] {escape(links)}")
    for note in a.notes:
        console.print(f"[yellow]note[/yellow] {escape(note)}")
    console.print(f"[bold]plan[/bold] {' → '.join(p.operators) or 'nothing'}  [dim]budget {p.budget_tokens} tokens; graph {p.graph}[/dim]")
    for reason in p.reasons[1:]:
        console.print(f"  [dim]- {escape(reason)}[/dim]")
    for hint in result.hints:
        console.print(f"[bold]{hint.kind}[/bold] {escape(hint.text)}  [dim](from {', '.join(hint.passage_ids[:4])})[/dim]")
    table = Table(title=f"evidence: {len(result.evidence)} spans, {result.evidence_tokens} tokens")
    table.add_column("#", justify="right")
    table.add_column("passage", no_wrap=True)
    placed = any(ev.page is not None or ev.section for ev in result.evidence)  # a PDF, EPUB, … not plain text
    if placed:
        table.add_column("where")
    table.add_column("span")
    table.add_column("found by")
    table.add_column("text", ratio=1, overflow="fold")
    for ev in result.evidence:
        text = " ".join(ev.text.split())
        found = ", ".join(ev.operators) + (f" (via {', '.join(ev.entities)})" if ev.entities else "")
        where = [escape(cite_place(ev.page, ev.page_label, ev.section))] if placed else []
        table.add_row(str(ev.rank), ev.passage_id, *where, f"{ev.start}-{ev.end}{' (part)' if ev.trimmed else ''}",
                      escape(found), escape(text if len(text) <= 200 else text[:199] + "…"))
    console.print(table)
    steps = {k: v for k, v in result.timings_ms.items() if k not in ("total",)}
    console.print("[dim]" + "  ".join(f"{k} {v:.0f} ms" for k, v in steps.items()) +
                  f"  | query {result.timings_ms.get('total', 0):.0f} ms[/dim]")
