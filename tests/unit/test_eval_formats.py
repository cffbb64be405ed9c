"""Question-set loading: both formats detected (on the real files and on small ones), malformed
records reported with their line number and skipped, GraphRAG-Bench questions kept only for the
repository's documents, and --limit mixing question types."""
from __future__ import annotations

import json

import pytest

from pagerag.errors import InputError
from pagerag.evaluate.formats import (GRAPHRAG_BENCH, PAGERAG_JSONL, detect_format, load_questions,
                                      select_for_sources, take_mixed)

GOOD = {"id": "A-1", "book": "SET-A", "question": "How much does Ned earn?", "answerable": True, "type": "fact",
        "answers": ["twelve pence"], "evidence": ["twelve pence a week"]}
UNANSWERABLE = {"id": "A-u1", "book": "SET-A", "question": "What was Silas's surname?", "answerable": False,
                "type": "unanswerable", "answers": [], "evidence": []}
BENCH = {"id": "Novel-1", "source": "Novel-10146", "question": "Which tree grows by the mill?",
         "answer": "a walnut", "question_type": "Fact Retrieval", "evidence": ["a paraphrase"]}


def write_lines(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_project_jsonl_is_detected_and_parsed(tmp_path):
    path = write_lines(tmp_path / "set.qa.jsonl", [json.dumps(GOOD), json.dumps(UNANSWERABLE)])
    qa = load_questions(path)
    assert qa.format == PAGERAG_JSONL == detect_format(path) and not qa.problems
    first, second = qa.items
    assert (first.answerable, first.answers, first.dataset, first.evidence_verbatim) == (True, ["twelve pence"], "SET-A", True)
    assert (second.answerable, second.type, second.answers) == (False, "unanswerable", [])


@pytest.mark.parametrize("layout", ["array", "lines"])
def test_graphrag_bench_is_detected_as_array_or_lines(tmp_path, layout):
    other = dict(BENCH, id="Novel-2", answer="a heath", source="Novel-1")
    path = tmp_path / "questions.json"
    if layout == "array":
        path.write_text(json.dumps([BENCH, other], indent=1), encoding="utf-8")
    else:
        write_lines(path, [json.dumps(BENCH), json.dumps(other)])
    qa = load_questions(path)
    assert qa.format == GRAPHRAG_BENCH and len(qa.items) == 2
    item = qa.items[0]
    assert (item.answerable, item.answers, item.type, item.source, item.dataset) == \
        (True, ["a walnut"], "Fact Retrieval", "Novel-10146", "Novel-10146")
    assert item.evidence_verbatim is False  # paraphrased: evidence recall is not measured


def test_malformed_lines_are_reported_with_line_numbers_and_skipped(tmp_path):
    lines = [json.dumps(GOOD), "{not json", "", json.dumps(dict(GOOD, id="A-2", answerable="yes")),
             json.dumps(dict(GOOD, id="A-3", answers=[])), json.dumps(dict(GOOD, id="A-4", question="  ")),
             "[1, 2]", json.dumps(GOOD), json.dumps(UNANSWERABLE)]
    qa = load_questions(write_lines(tmp_path / "bad.qa.jsonl", lines))
    assert [i.id for i in qa.items] == ["A-1", "A-u1"]
    where = [p.split(":")[1] for p in qa.problems]
    assert where == ["2", "4", "5", "6", "7", "8"]
    text = "\n".join(qa.problems)
    assert "not valid JSON" in text and "'answerable'" in text and "at least one answer" in text
    assert "'question'" in text and "expected an object" in text and "duplicate id 'A-1'" in text


def test_unreadable_or_unknown_files_are_one_clear_error(tmp_path):
    with pytest.raises(InputError, match="not found"):
        load_questions(tmp_path / "missing.jsonl")
    with pytest.raises(InputError, match="unknown question format"):
        load_questions(write_lines(tmp_path / "odd.jsonl", [json.dumps({"q": 1})]))
    with pytest.raises(InputError, match="no question records"):
        load_questions(write_lines(tmp_path / "junk.jsonl", ["nope", "still nope"]))
    broken = tmp_path / "broken.json"
    broken.write_text('[\n{"id": 1},\n{oops}\n]', encoding="utf-8")
    with pytest.raises(InputError, match=r"broken.json:3"):
        load_questions(broken)


def test_the_shared_question_sets_load_cleanly(data_dir):
    carol = load_questions(data_dir / "qa" / "christmas_carol.qa.jsonl")
    assert carol.format == PAGERAG_JSONL and not carol.problems
    assert sum(i.answerable for i in carol.items) == 30 and sum(not i.answerable for i in carol.items) == 20
    bench = load_questions(data_dir / "graphrag-bench-novel" / "questions.json")
    assert bench.format == GRAPHRAG_BENCH and len(bench.items) == 2009
    # the published set reuses one id for two different questions: the second is reported, skipped
    assert bench.problems == ["questions.json[871]: duplicate id 'Novel-55f0c0e2' (first occurrence kept)"]


def test_graphrag_questions_are_kept_for_the_repository_documents_only(tmp_path):
    other = dict(BENCH, id="Novel-2", source="Novel-1")
    qa = load_questions(write_lines(tmp_path / "q.jsonl", [json.dumps(BENCH), json.dumps(other)]))
    kept, note = select_for_sources(qa.items, ["novel-10146", "Novel-10146"])
    assert [i.id for i in kept] == ["Novel-1"] and "kept 1 of 2" in note
    with pytest.raises(InputError, match="none of the 2 GraphRAG-Bench questions"):
        select_for_sources(qa.items, ["some_other_book"])
    own = load_questions(write_lines(tmp_path / "own.jsonl", [json.dumps(GOOD)])).items
    assert select_for_sources(own, ["anything"]) == (own, None)


def test_limit_takes_questions_round_robin_across_types_in_file_order(tmp_path):
    lines = [json.dumps(dict(GOOD, id=f"f{i}")) for i in range(4)]
    lines += [json.dumps(dict(GOOD, id=f"m{i}", type="multi-hop")) for i in range(2)]
    lines += [json.dumps(dict(UNANSWERABLE, id=f"u{i}")) for i in range(3)]
    items = load_questions(write_lines(tmp_path / "mix.jsonl", lines)).items
    assert [i.id for i in take_mixed(items, 5)] == ["f0", "f1", "m0", "u0", "u1"]
    assert [i.id for i in take_mixed(items, 3)] == ["f0", "m0", "u0"]
    assert [i.id for i in take_mixed(items, 2)] == ["f0", "u0"]  # the smallest slice still has both kinds
    assert take_mixed(items, None) == items and take_mixed(items, 100) == items

