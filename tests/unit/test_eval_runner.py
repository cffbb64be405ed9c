"""Runner pieces that need no model: the run plan, torn results files, running figures."""
from __future__ import annotations

import json
from pathlib import Path

from pagerag.evaluate.formats import QAItem
from pagerag.evaluate.runner import EvalTask, plan_runs, read_results, running_figures


def items(n: int) -> list[QAItem]:
    return [QAItem(f"q{i}", "Why?", True, ["x"], [], "fact", "D") for i in range(n)]


def test_runs_go_question_by_question_with_a_rotating_pipeline_order():
    qs = items(4)
    runs = plan_runs([EvalTask("D", Path("repo"), qs[:3]), EvalTask("E", Path("repo2"), qs[3:])], ["a", "b", "c"])
    assert [(p, i.id) for p, _, i in runs] == [
        ("a", "q0"), ("b", "q0"), ("c", "q0"), ("b", "q1"), ("c", "q1"), ("a", "q1"),
        ("c", "q2"), ("a", "q2"), ("b", "q2"), ("a", "q3"), ("b", "q3"), ("c", "q3")]
    assert [t.dataset for _, t, _ in runs][-3:] == ["E"] * 3


def test_a_torn_last_line_is_dropped_and_cut_on_repair(tmp_path):
    path = tmp_path / "results.jsonl"
    good = [json.dumps({"pipeline": "full", "dataset": "D", "id": f"q{i}"}) + "\n" for i in range(2)]
    path.write_text("".join(good) + '{"pipeline": "full", "dat', encoding="utf-8")
    assert [r["id"] for r in read_results(path)] == ["q0", "q1"]
    assert path.read_text().endswith('"dat')  # reading alone changes nothing
    read_results(path, repair=True)
    assert path.read_text() == "".join(good)


def test_running_figures_count_accuracy_and_refusals():
    def row(answerable, strict=False, lenient=False, refused=False):
        return {"answerable": answerable, "score": {"strict": strict, "lenient": lenient,
                                                    "correct_refusal": refused if not answerable else None,
                                                    "false_refusal": refused if answerable else None}}
    rows = [row(True, True, True), row(True, False, True), row(True, refused=True), row(False, refused=True), row(False)]
    assert running_figures(rows) == "strict 1/3 lenient 2/3 · ref 1/2 · false ref 1"
    assert running_figures([]) == "waiting"
