"""Question sets: the project's JSONL and GraphRAG-Bench's novel JSON, detected automatically.

The project's format (`$PAGERAG_DATA_DIR/qa/README.md`), one object per line:
    {"id", "book", "question", "answerable", "type", "answers": [gold, alias...], "evidence": [quote...]}
GraphRAG-Bench's novel set, a JSON array (or one object per line):
    {"id", "source", "question", "answer", "question_type", "evidence": [paraphrase...]}
Every GraphRAG-Bench question is answerable, and its evidence is paraphrased, so evidence recall
(verbatim quotes inside the cited spans) is not measured for it.

A malformed record is reported with its line number (or array index) and skipped; it never stops
the run. Only a file that cannot be read at all is an error.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError

PAGERAG_JSONL = "pagerag-jsonl"
GRAPHRAG_BENCH = "graphrag-bench-json"
FORMATS = (PAGERAG_JSONL, GRAPHRAG_BENCH)
UNANSWERABLE = "unanswerable"


@dataclass
class QAItem:
    id: str
    question: str
    answerable: bool
    answers: list[str]  # gold answer first, then aliases; empty when unanswerable
    evidence: list[str]  # gold evidence quotes
    type: str  # fact | relational | multi-hop | global | unanswerable | a GraphRAG-Bench type
    dataset: str  # what the report groups by: the `book` field, else the source, else the file stem
    evidence_verbatim: bool = True  # False: paraphrased evidence, recall not measured
    source: str = ""  # GraphRAG-Bench `source` (the novel the question is about)
    where: str = ""  # file:line, for messages

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "question": self.question, "answerable": self.answerable, "answers": list(self.answers),
                "evidence": list(self.evidence), "type": self.type, "dataset": self.dataset,
                "evidence_verbatim": self.evidence_verbatim, "source": self.source}


@dataclass
class QASet:
    path: Path
    format: str
    items: list[QAItem] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # "file:line: what is wrong" per skipped record


# --------------------------------------------------------------------------------------------
# Detection and loading


def load_questions(path: str | Path) -> QASet:
    """All well-formed questions of `path` (either format) and one message per skipped record."""
    path = Path(path)
    text = _read(path)
    fmt, records = _records(path, text)
    qa = QASet(path=path, format=fmt)
    seen: set[str] = set()
    for where, record in records:
        if isinstance(record, str):  # a parse error message
            qa.problems.append(f"{where}: {record}")
            continue
        try:
            item = _parse(record, fmt, path, where)
        except ValueError as exc:
            qa.problems.append(f"{where}: {exc}")
            continue
        if item.id in seen:
            qa.problems.append(f"{where}: duplicate id '{item.id}' (first occurrence kept)")
            continue
        seen.add(item.id)
        qa.items.append(item)
    return qa


def detect_format(path: str | Path) -> str:
    """PAGERAG_JSONL or GRAPHRAG_BENCH, from the first well-formed record."""
    path = Path(path)
    return _records(path, _read(path))[0]


def _read(path: Path) -> str:
    if not path.is_file():
        raise InputError(f"{path}: question file not found")
    try:
        return path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read question file: {exc}") from None


def _records(path: Path, text: str) -> tuple[str, list[tuple[str, Any]]]:
    """(format, [(where, record dict | error message)])."""
    if text.lstrip().startswith("["):
        records = _json_array(path, text)
    else:
        records = _json_lines(path, text)
    first = next((r for _, r in records if isinstance(r, dict)), None)
    if first is None:
        raise InputError(f"{path}: no question records found (expected JSON lines or a JSON array of objects)")
    return _format_of(path, first), records


def _json_array(path: Path, text: str) -> list[tuple[str, Any]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    out: list[tuple[str, Any]] = []
    for index, record in enumerate(data):
        where = f"{path.name}[{index}]"
        out.append((where, record if isinstance(record, dict) else f"expected an object, got {type(record).__name__}"))
    return out


def _json_lines(path: Path, text: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path.name}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            out.append((where, f"not valid JSON ({exc.msg} at column {exc.colno})"))
            continue
        out.append((where, record if isinstance(record, dict) else f"expected an object, got {type(record).__name__}"))
    return out


def _format_of(path: Path, record: dict) -> str:
    if "answerable" in record or "answers" in record:
        return PAGERAG_JSONL
    if "question_type" in record or ("answer" in record and "source" in record):
        return GRAPHRAG_BENCH
    raise InputError(f"{path}: unknown question format (keys {sorted(record)}); expected the project's JSONL "
                     "{id, question, answerable, answers, evidence, type} or GraphRAG-Bench's "
                     "{id, source, question, answer, question_type, evidence}")


# --------------------------------------------------------------------------------------------
# Records


def _parse(record: dict, fmt: str, path: Path, where: str) -> QAItem:
    if fmt == PAGERAG_JSONL:
        return _parse_pagerag(record, path, where)
    return _parse_graphrag(record, path, where)


def _parse_pagerag(record: dict, path: Path, where: str) -> QAItem:
    qid, question = _text(record, "id"), _text(record, "question")
    answerable = record.get("answerable")
    if not isinstance(answerable, bool):
        raise ValueError("'answerable' must be true or false")
    answers = _strings(record, "answers")
    if answerable and not answers:
        raise ValueError("an answerable question needs at least one answer in 'answers'")
    kind = str(record.get("type") or ("fact" if answerable else UNANSWERABLE))
    return QAItem(qid, question, answerable, answers if answerable else [], _strings(record, "evidence"), kind,
                  dataset=str(record.get("book") or path.name.split(".")[0]), where=where)


def _parse_graphrag(record: dict, path: Path, where: str) -> QAItem:
    qid, question = _text(record, "id"), _text(record, "question")
    answer = record.get("answer")
    answers = [answer.strip()] if isinstance(answer, str) and answer.strip() else _strings(record, "answer")
    if not answers:
        raise ValueError("'answer' is missing or empty")
    source = str(record.get("source") or "")
    return QAItem(qid, question, True, answers, _strings(record, "evidence"), str(record.get("question_type") or "unknown"),
                  dataset=source or path.name.split(".")[0], evidence_verbatim=False, source=source, where=where)


def _text(record: dict, key: str) -> str:
    value = record.get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and key == "id":
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"'{key}' is missing or empty")
    return value.strip()


def _strings(record: dict, key: str) -> list[str]:
    value = record.get(key, [])
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"'{key}' must be a list of strings")
    return [v.strip() for v in value if v.strip()]


# --------------------------------------------------------------------------------------------
# Selection


def select_for_sources(items: list[QAItem], documents: list[str]) -> tuple[list[QAItem], str | None]:
    """Keep the GraphRAG-Bench questions whose `source` is a document of the repository (its set
    covers 20 novels; a repository usually holds one). Items without a source are kept.
    Returns (kept items, a note when some were dropped)."""
    names = {d.lower() for d in documents}
    sourced = [i for i in items if i.source]
    if not sourced:
        return items, None
    kept = [i for i in items if not i.source or i.source.lower() in names]
    dropped = len(items) - len(kept)
    if dropped and len(kept) == len(items) - len(sourced):
        sources = sorted({i.source for i in sourced})
        raise InputError(f"none of the {len(sourced)} GraphRAG-Bench questions is about a document of the repository "
                         f"(their sources: {', '.join(sources[:5])}{'…' if len(sources) > 5 else ''}; the repository "
                         f"holds: {', '.join(documents[:5])})")
    note = f"kept {len(kept) - (len(items) - len(sourced))} of {len(sourced)} GraphRAG-Bench questions (those about documents of the repository)" if dropped else None
    return kept, note


def take_mixed(items: list[QAItem], limit: int | None) -> list[QAItem]:
    """The first `limit` questions taken round-robin across question types (in file order), so a
    small run still mixes answerable and unanswerable questions: unanswerable questions come
    second in each round. Deterministic."""
    if limit is None or limit >= len(items):
        return list(items)
    by_type: dict[str, list[QAItem]] = {}
    for item in items:
        by_type.setdefault(item.type, []).append(item)
    answerable = [q for q in by_type.values() if q[0].answerable]
    unanswerable = [q for q in by_type.values() if not q[0].answerable]
    queues = answerable[:1] + unanswerable + answerable[1:]
    picked: list[QAItem] = []
    depth = 0
    while len(picked) < limit:
        for queue in queues:
            if depth < len(queue) and len(picked) < limit:
                picked.append(queue[depth])
        depth += 1
    chosen = {id(i) for i in picked}
    return [i for i in items if id(i) in chosen]  # keep file order
