"""`pagerag ask` and `pagerag doctor` (registered in pagerag/cli.py). Heavy imports stay inside
the functions so `pagerag --help` stays fast."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from ..errors import ConfigError, InputError, PageRAGError
from . import check_local_repository

LLM_CHOICES = ("auto", "openai", "llamacpp", "extractive")
EXIT_WORDS = {"quit", "exit", ":q"}
# True when the command runs as the `pagerag` program (cli.main), in a process of its own that it
# may fork the question parser from; not when a caller runs it in its process (typer's test runner).
OWN_PROCESS = False


def ask(
    question: Optional[str] = typer.Argument(None, help="The question (omit with --interactive)."),
    repo: Path = typer.Option(..., "--repo", "-r", help="Repository directory."),
    pipeline: Optional[str] = typer.Option(None, "--pipeline", "-p", help="Pipeline preset (pipelines/<name>.toml); default full."),
    llm: Optional[str] = typer.Option(None, "--llm", help="LLM backend: auto (default), openai, llamacpp or extractive (no LLM)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    interactive: bool = typer.Option(False, "--interactive", "-i", help="Ask several questions; models stay loaded."),
    config: Optional[Path] = typer.Option(None, "--config", help="A pagerag.toml file (default: ./pagerag.toml if present)."),
    set_: Optional[List[str]] = typer.Option(None, "--set", help="Override a setting: section.field=value (repeatable)."),
    doc: Optional[List[str]] = typer.Option(None, "--doc", help="Limit the question to this document of the library "
                                            "(its id, see `pagerag docs`; repeatable). Default: the whole library."),
):
    """Answer a question with numbered citations, or refuse and say why."""
    if llm is not None and llm not in LLM_CHOICES:
        raise ConfigError(f"unknown --llm '{llm}' (choose {', '.join(LLM_CHOICES)})")
    if not interactive and (question is None or not question.strip()):
        raise InputError("the question is empty: give a question, or use --interactive")
    started = sys.stderr.isatty() and not as_json and not interactive  # at a terminal: say it has started,
    said = started and _say_started(repo)  # before the models and the repository load (seconds of a cold ask)
    rag = _open(repo, pipeline, llm, config, set_)
    if started and not said:
        typer.echo(f"asking {rag.state.path.name} ({len(rag.state.passages):,} passages) …", err=True)
    docs = doc or None
    if question is not None and question.strip():
        _answer_one(rag, question, as_json, docs)
    if interactive:
        _loop(rag, as_json, docs)


def _say_started(repo: Path) -> bool:
    """Print `asking NAME (N passages) …` from a local repository's manifest alone (its
    stats.passages, which opening the repository checks against the passages table); False when
    that cannot be read cheaply (object storage, no manifest): the caller says it once opened."""
    from ..objectstore import remote_uri

    if remote_uri(repo) is not None:
        return False
    try:
        passages = int(json.loads((Path(repo) / "manifest.json").read_text(encoding="utf-8"))["stats"]["passages"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    typer.echo(f"asking {Path(repo).resolve().name} ({passages:,} passages) …", err=True)
    return True


def _open(repo: Path, pipeline: Optional[str], llm: Optional[str], config: Optional[Path], sets: Optional[List[str]]):
    from ..api import PageRAG
    from ..settings import load_settings

    settings = load_settings(pipeline, config, sets=sets or (), llm=llm)
    check_local_repository(repo)  # a bad --repo: its one-line error before anything loads
    _prefetch_question_parser(settings)
    rag = PageRAG(repo, settings=settings)
    rag.state.prefetch(settings.retrieve.graph)  # the graph view, while the encoder loads
    return rag


def _prefetch_question_parser(settings) -> None:
    """A cold `ask` loads four models: spaCy's (the RCS features parse the question), the
    encoder, the reader and tiktoken's encoding. Start them all now, beside opening the repository
    and retrieving. spaCy, whose import and load are the largest part, in a forked process of its
    own where this process can fork (Linux, no other thread yet: text.nlp.start_parser_process),
    so it loads on another core; else in a thread, and then only on the ONNX and OpenVINO paths,
    where nothing else imports torch meanwhile (text.nlp). The others in threads: their runtimes
    release the GIL for much of their loading."""
    from ..index.encoder import choose, prefetch_encoder
    from ..offline import prefetch_encoding
    from ..read import prefetch_reader
    from ..text.nlp import prefetch_spacy, start_parser_process

    # first: before any thread starts
    forked = OWN_PROCESS and start_parser_process(settings.extract.spacy_model)
    backend = None
    if not forked:  # (forked: the encoder's thread chooses; nothing else here needs the choice)
        try:
            backend = choose(settings.embed.model, settings.embed.backend, settings.embed.precision).backend
        except PageRAGError:
            pass  # the encoder reports its own problem when it is built
    prefetch_encoder(settings.embed)
    prefetch_reader(settings.generate.reader)
    prefetch_encoding(settings.chunk.encoding)
    if backend in ("onnx", "openvino"):
        prefetch_spacy(settings.extract.spacy_model)


def _answer_one(rag, question: str, as_json: bool, docs: Optional[List[str]] = None) -> None:
    answer = rag.ask(question, docs=docs)
    if as_json:
        sys.stdout.write(json.dumps(answer.to_dict(), indent=2, ensure_ascii=False) + "\n")
    else:
        typer.echo(format_answer(answer))


def _loop(rag, as_json: bool, docs: Optional[List[str]] = None) -> None:
    """Read questions until EOF or `quit`; a bad question prints one line and the loop goes on."""
    typer.echo(f"pagerag ask --interactive: {rag.state.path} (pipeline {rag.settings.pipeline}); "
               "empty line or 'quit' to stop", err=True)
    while True:
        try:
            question = input("question> ")
        except (EOFError, KeyboardInterrupt):
            typer.echo("", err=True)
            return
        if not question.strip() or question.strip().lower() in EXIT_WORDS:
            return
        try:
            _answer_one(rag, question, as_json, docs)
        except PageRAGError as exc:
            typer.echo(f"error: {exc}", err=True)


# --------------------------------------------------------------------------------------------
# Text output


def format_answer(answer) -> str:
    from ..structure import cite_place

    lines: list[str] = []
    if answer.answered:
        lines.append(f"{answer.heading}: {answer.answer}")
        if answer.citations:
            lines.append("")
        for c in answer.citations:
            quote = " ".join(c.quote.split())
            lines.append(f"[{c.n}] \u201c{quote}\u201d")
            where = cite_place(c.page, c.page_label, c.section, c.line)
            lines.append(f"    {Path(c.file).name}, {where} (chars {c.start}-{c.end}, passage {c.passage_id})")
    else:
        lines.append(f"Refused ({answer.reason}): {answer.answer}")
    lines.append("")
    lines.extend(_diagnostics(answer))
    return "\n".join(lines)


def _diagnostics(answer) -> list[str]:
    plan = answer.plan or {}
    ops = ", ".join(op for op in (plan.get("operators") or []) if op != "rerank")
    rerank = " + rerank" if "rerank" in (plan.get("operators") or []) else ""
    out = [f"route: {plan.get('need', '?')}: {ops or 'no operator'}{rerank}, one ranked pool; budget {plan.get('budget_tokens', '?')} tokens"
           f"{' (widened once)' if answer.escalated else ''}"]
    if answer.rcs is not None and answer.tau is not None:
        relation = ">=" if answer.rcs >= answer.tau else "<"
        out.append(f"RCS {answer.rcs:.3f} {relation} tau {answer.tau:.3f}")
    else:
        out.append("RCS: not computed" + (" (evidence constraint off)" if answer.verdict and answer.verdict.method == "skipped" else ""))
    if answer.verdict is not None:
        v = answer.verdict
        detail = f"; {v.detail}" if v.detail else ""
        out.append(f"sufficiency: {v.method}: {'sufficient' if v.sufficient else 'insufficient'}{detail}")
    out.append(f"backend: {answer.backend}; pipeline: {answer.pipeline}")
    tokens = ", ".join(f"{stage} {t['prompt']}+{t['completion']}" for stage, t in answer.tokens.items()
                       if t["prompt"] or t["completion"])
    out.append(f"tokens (prompt+completion): {tokens or 'none (no LLM call)'}")
    latency = answer.latency_ms
    out.append("latency: " + ", ".join(f"{stage} {ms:.0f} ms" for stage, ms in latency.items())
               + f"; total {sum(latency.values()):.0f} ms")
    out.extend(f"note: {note}" for note in answer.notes)
    return out


# --------------------------------------------------------------------------------------------
# doctor


def doctor(
    pipeline: Optional[str] = typer.Option(None, "--pipeline", "-p", help="Pipeline preset to check."),
    config: Optional[Path] = typer.Option(None, "--config", help="A pagerag.toml file (default: ./pagerag.toml if present)."),
    set_: Optional[List[str]] = typer.Option(None, "--set", help="Override a setting: section.field=value (repeatable)."),
):
    """Say which LLM backend `auto` picks and why, and which models and data are available."""
    from ..settings import load_settings

    settings = load_settings(pipeline, config, sets=set_ or ())
    for label, status, detail in doctor_report(settings):
        typer.echo(f"{label:<16} {status:<9} {detail}")


def doctor_report(settings) -> list[tuple[str, str, str]]:
    """(what, ok|missing|info, detail) rows; nothing heavy is loaded."""
    import os

    from ..llm import describe_choice, endpoint_of, gguf_of

    rows: list[tuple[str, str, str]] = []
    backend, why = describe_choice(settings.llm)
    rows.append(("LLM backend", backend, why))
    gguf = gguf_of(settings.llm)
    if gguf:
        ok = Path(gguf).expanduser().is_file()
        rows.append(("GGUF", "ok" if ok else "missing", gguf))
    endpoint = endpoint_of(settings.llm)
    if endpoint:
        rows.append(("endpoint", "info", f"{endpoint} (model {settings.llm.model or 'first listed by the server'})"))
    rows.append(_embedder_row(settings.embed.model))
    rows.append(_spacy_row(settings.extract.spacy_model))
    rows.append(_tiktoken_row(settings.chunk.encoding))
    rows.append(_rcs_row(settings))
    rows.append(_reader_row(settings.generate.reader))
    rows.append(_llm_decision_row(settings, backend))
    rows.append(_prompts_row())
    data = os.environ.get("PAGERAG_DATA_DIR", "")
    if data and Path(data).is_dir():
        qa = sorted(p.name for p in (Path(data) / "qa").glob("*.qa.jsonl"))
        rows.append(("data", "ok", f"{data} ({len(qa)} question sets in qa/)"))
    else:
        rows.append(("data", "missing", "PAGERAG_DATA_DIR is not set or not a directory (only needed for eval/benchmarks)"))
    return rows


def _reader_row(directory: str) -> tuple[str, str, str]:
    """The reader model: its files present and matching their checksums (reads ~20 MB, no ONNX)."""
    from ..read.reader import MODEL_DIR, load_metadata

    where = Path(directory) if directory else MODEL_DIR
    try:
        meta = load_metadata(where)
    except PageRAGError as exc:
        return ("reader", "missing", str(exc))
    hyper = meta.get("hyper", {})
    return ("reader", "ok", f"{where} ({hyper.get('layers', '?')} layers, trained on {len(meta.get('books', []))} "
                            f"books, checksums ok)")


def _llm_decision_row(settings, backend: str) -> tuple[str, str, str]:
    """Whether `pagerag calibrate --llm` fitted the judge's threshold for the configured LLM (not
    built here: the file is named from the backend and model, which for openai may need the server)."""
    from ..generate.models import DECISION_FILE
    from ..offline import cache_root

    judge = settings.generate.judge
    if backend == "extractive" or judge == "model":
        return ("LLM judge", "info", "no LLM judge: the reader's model decides")
    found = sorted(p.name for p in (cache_root() / "calibration").glob(f"{backend}-*.{DECISION_FILE[judge]}.json"))
    if found:
        return ("LLM judge", "ok", f"{judge}, calibrated on pairs: {', '.join(found)} ({cache_root() / 'calibration'})")
    default = ("the threshold fitted for the local 1.5B (models/pick_decision.json)" if judge == "pick"
               else "it answers where an excerpt's P(yes) >= 0.5")
    return ("LLM judge", "info", f"{judge}, not calibrated for {backend}: {default}; "
                                 f"`pagerag calibrate --llm {backend}` fits the threshold on training-book pairs")


def _embedder_row(model: str) -> tuple[str, str, str]:
    from ..index.embedding_model import resolve_model_path

    try:
        return ("embedding model", "ok", f"{model} at {resolve_model_path(model)}")
    except (PageRAGError, ImportError) as exc:
        return ("embedding model", "missing", f"{model}: {exc}")


def _spacy_row(name: str) -> tuple[str, str, str]:
    import importlib.util

    found = importlib.util.find_spec(name) is not None
    return ("spaCy model", "ok" if found else "missing", name if found else f"{name} is not installed (pip install {name.replace('_', '-')})")


def _tiktoken_row(encoding: str) -> tuple[str, str, str]:
    try:
        from ..offline import count_tokens

        count_tokens("ok", encoding)
        return ("tiktoken", "ok", f"{encoding} (offline)")
    except Exception as exc:  # noqa: BLE001 - any failure here is what the user needs to see
        return ("tiktoken", "missing", f"{encoding}: {exc}")


def _rcs_row(settings) -> tuple[str, str, str]:
    from ..generate.gate import load_rcs_model

    try:
        model, where = load_rcs_model(settings, None)
    except PageRAGError as exc:
        return ("RCS model", "missing", str(exc))
    tau = model.tau_for(settings.generate.gate_cwar) if model.curve else model.tau
    off = "; generate.rcs_gate = off: it refuses nothing, the sufficiency model reads it" if settings.generate.rcs_gate == "off" else ""
    return ("RCS model", "ok", f"{where} (tau {tau:.3f}, {len(model.feature_names)} features){off}")


def _prompts_row() -> tuple[str, str, str]:
    from ..resources import resource_dir

    needed = ["answer", "judge_window", "quote_answer", "pick_sentence", "pick_answer"]
    folder = resource_dir("prompts")
    absent = [n for n in needed if not (folder / f"{n}.txt").is_file()]
    return ("prompts", "missing" if absent else "ok", f"{folder}" + (f" lacks {', '.join(absent)}" if absent else ""))
