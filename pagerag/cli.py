"""The `pagerag` command line. Heavy imports happen inside commands so `pagerag --help` is fast.

Errors a user can act on (PageRAGError) print as one line on stderr with a non-zero exit; so does
anything unexpected (set PAGERAG_DEBUG=1 to see the traceback).
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import List, Optional

import typer

from .commands.library import ExecutorOption, RayAddressOption, WaitOption
from .errors import PageRAGError

app = typer.Typer(
    add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
    help="PAGE-RAG: ask questions of whole books; answers with citations, or refuses and says why.",
)
config_app = typer.Typer(no_args_is_help=True, help="Show the effective configuration.")
app.add_typer(config_app, name="config")

RepoOption = typer.Option(..., "--repo", "-r", help="Repository directory.")
PipelineOption = typer.Option(None, "--pipeline", "-p", help="Pipeline preset (pipelines/<name>.toml); default full.")
ConfigOption = typer.Option(None, "--config", help="A pagerag.toml file (default: ./pagerag.toml if present).")
SetOption = typer.Option(None, "--set", help="Override a setting: section.field=value (repeatable).")


def _settings(pipeline: Optional[str], config: Optional[Path], sets: Optional[List[str]], extra: dict | None = None):
    """Settings from the common flags; `extra` holds a command's own flags as sections (None = not given)."""
    from .settings import load_settings

    given = {section: {k: v for k, v in values.items() if v is not None} for section, values in (extra or {}).items()}
    return load_settings(pipeline, config, overrides={k: v for k, v in given.items() if v}, sets=sets or ())


def _print_json(data) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


@app.command()
def build(
    paths: List[Path] = typer.Argument(..., help="Files (.txt, .md, .pdf, .epub, .html, .docx) or folders of them "
                                       "(other files are listed and skipped), or corpus:NAME (see `pagerag corpus list`)."),
    repo: Path = RepoOption,
    pipeline: Optional[str] = PipelineOption,
    extractor: Optional[str] = typer.Option(None, "--extractor", help="Graph extractor: nlp (spaCy, default) or llm."),
    password: Optional[str] = typer.Option(None, "--password", envvar="PAGERAG_PDF_PASSWORD", show_envvar=True,
                                           help="Password of encrypted PDFs (the environment variable keeps it "
                                                "out of the process list). Never stored."),
    config: Optional[Path] = ConfigOption,
    set_: Optional[List[str]] = SetOption,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
    executor: str = ExecutorOption,
    ray_address: Optional[str] = RayAddressOption,
    wait: bool = WaitOption,
):
    """Build a repository: passages, governed graph, communities, provenance; published atomically."""
    from .build import build_repository
    from .corpora import resolve_corpus_paths

    settings = _settings(pipeline, config, set_, {"extract": {"extractor": extractor}})
    sources = resolve_corpus_paths([str(p) for p in paths])  # corpus:NAME → its verified files
    report = build_repository(sources, repo, settings, show_progress=not quiet, password=password,
                              on_note=lambda note: typer.echo(f"note: {note}", err=True), wait=wait,
                              executor=executor, ray_address=ray_address, prefetch=True)  # a process that only builds
    stats = report.manifest["stats"]
    resumed = f" (resumed: {', '.join(report.resumed_stages)} from cache)" if report.resumed_stages else ""
    typer.echo(
        f"built {repo}: {stats['passages']} passages, {stats['entities']} entities, {stats['relations']} relations, "
        f"{stats['communities']} communities from {stats['words']:,} words in {stats['build_seconds']:.1f}s, "
        f"{stats['build_tokens']} LLM tokens{resumed}"
    )


INSPECT_KEYS = ["passages", "entities_raw", "entities", "relations_raw", "relations", "communities_raw",
                "communities", "isolated_raw", "isolated", "build_seconds", "build_tokens", "words"]


@app.command()
def inspect(repo: Path = RepoOption, as_json: bool = typer.Option(False, "--json", help="Print JSON.")):
    """Print a repository's statistics (raw vs governed graph, build cost)."""
    from .repository import Repository

    from .versions import human_bytes, kept

    repository = Repository.open(repo)
    stats = repository.stats()
    stored = kept(repo)
    if as_json:
        _print_json({**{key: stats.get(key) for key in INSPECT_KEYS}, "versions_kept": stored.versions,
                     "bytes_kept": stored.bytes, "raw_graph": repository.manifest.get("raw_graph", "stored")})
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{repo}")
    table.add_column("")
    table.add_column("raw", justify="right")
    table.add_column("governed", justify="right")
    for name in ("entities", "relations", "communities", "isolated"):
        raw_count = stats.get(f"{name}_raw")
        table.add_row(name, "on demand" if raw_count is None and name == "communities" else str(raw_count),
                      str(stats.get(name)))
    table.add_row("passages", "", str(stats.get("passages")))
    table.add_row("words", "", f"{stats.get('words', 0):,}")
    table.add_row("build seconds", "", str(stats.get("build_seconds")))
    table.add_row("build LLM tokens", "", str(stats.get("build_tokens")))
    table.add_row("versions kept", "", str(stored.versions))
    table.add_row("bytes kept", "", human_bytes(stored.bytes))
    if repository.derived("raw"):
        table.caption = "the raw graph is not stored: it is made from the documents' mention parts when read"
    Console().print(table)
    stages = repository.manifest.get("stage_seconds", {})
    if stages:
        typer.echo("stage seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in stages.items()))


@app.command()
def export(
    repo: Path = RepoOption,
    graphml: Path = typer.Option(..., "--graphml", help="Write the governed graph as GraphML here."),
    raw: bool = typer.Option(False, "--raw", help="Export the raw (ungoverned) graph instead."),
):
    """Export the graph for Gephi or networkx."""
    from .graph.export import write_graphml
    from .repository import Repository

    repository = Repository.open(repo)
    graph = repository.graph("raw" if raw else "governed")
    if not graph.communities and graph.relations:  # the raw graph's are found when first read
        from .graph.communities import detect_communities

        graph.communities = detect_communities(graph, repository.community_settings())
    count = write_graphml(graph, graphml)
    typer.echo(f"wrote {graphml}: {count['nodes']} nodes, {count['edges']} edges")


@config_app.command("show")
def config_show(
    pipeline: Optional[str] = PipelineOption,
    config: Optional[Path] = ConfigOption,
    set_: Optional[List[str]] = SetOption,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
):
    """Print the effective settings with their help text."""
    from .settings import describe_settings

    settings = _settings(pipeline, config, set_)
    if as_json:
        _print_json(settings.model_dump())
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"effective settings (pipeline: {settings.pipeline})", show_lines=False)
    for column in ("setting", "value", "help"):
        table.add_column(column, overflow="fold")
    for name, value, help_text in describe_settings(settings):
        table.add_row(name, json.dumps(value), help_text)
    Console().print(table)


@config_app.command("pipelines")
def config_pipelines():
    """List the pipeline presets."""
    from .settings import available_pipelines, pipeline_description

    for name in available_pipelines():
        typer.echo(f"{name:<24} {pipeline_description(name)}")


def _register_commands() -> None:
    """Commands that live in pagerag/commands/ (each module imports only typer at load time)."""
    from .commands.ask import ask, doctor
    from .commands.corpus import corpus_app
    from .commands.eval import eval_command
    from .commands.library import register as library_commands
    from .commands.rcs import calibrate, rcs_eval
    from .commands.retrieve import retrieve
    from .commands.serve import mcp, serve

    app.command()(retrieve)
    app.command()(ask)
    app.command("eval")(eval_command)
    app.command("rcs-eval")(rcs_eval)
    app.command()(calibrate)
    app.command()(doctor)
    app.add_typer(corpus_app, name="corpus")
    app.command()(serve)
    app.command()(mcp)
    library_commands(app)


_register_commands()


def main() -> None:
    """Entry point: run the app, turning errors into one clear line and an exit code."""
    from .commands import ask as ask_command

    ask_command.OWN_PROCESS = True  # the `pagerag` program: its process is its own (commands.ask)
    debug = os.environ.get("PAGERAG_DEBUG") == "1"
    try:
        app(standalone_mode=False)
        if len(sys.argv) > 1 and sys.argv[1] in QUICK_EXIT and not debug:
            _exit_now()
    except PageRAGError as exc:
        _fail(f"error: {exc}", exc.exit_code)
    except KeyboardInterrupt:
        _fail("interrupted: nothing was published; any previous repository is intact", 130)
    except SystemExit:
        raise
    except Exception as exc:  # click's usage errors and anything unexpected
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        if isinstance(exc, click.exceptions.Abort):
            _fail("aborted", 130)
        if debug:
            raise
        _fail(f"error: {exc.__class__.__name__}: {exc} (set PAGERAG_DEBUG=1 for details)", 1)


# One-shot question commands: everything they write is written when they return, and tearing
# down the loaded models and the ONNX/BLAS thread pools is a noticeable part of a cold `ask`.
QUICK_EXIT = ("ask", "retrieve")


def _exit_now() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _fail(message: str, code: int) -> None:
    sys.stderr.write(message.splitlines()[0] if message else "error" )
    sys.stderr.write("\n")
    sys.exit(code)


if __name__ == "__main__":
    main()
