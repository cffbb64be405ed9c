"""`pagerag calibrate --llm openai` through a real OpenAI-compatible server on loopback: the
judge's threshold is fitted on the packaged training-book pairs (one question asked of a book that
states its answer and of one that does not), from the LLM's reading of each of the first
`generate.judge_windows` excerpts of each side -- the pick's P(some sentence) (the default judge,
with the control text once a question) or yesno's P(yes); it is stored for that backend, model and
judge and then used by `ask`. A model that reads the excerpts gets most pairs right on both sides
held out by book; one that says yes to everything gets none, and the report says so."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from pagerag.evaluate.llm_calibration import read_sample
from pagerag.generate.context import fold_space
from pagerag.generate.models import CALIBRATION_SAMPLE
from pagerag.settings import load_settings
from tests.helpers.openai_server import LoopbackOpenAIServer

LIMIT = 20
YES = {"Yes": -0.05, "No": -3.0}  # P(yes) 0.95
NO = {"Yes": -3.0, "No": -0.05}  # P(yes) 0.05
FILE = "openai-loopback-model.windows.json"  # yesno's; the pick's is .pick.json
NUMBERED = re.compile(r"^\[(\d)\] (.*)$", re.M)

pytestmark = pytest.mark.skipif(not CALIBRATION_SAMPLE.is_file(), reason=f"{CALIBRATION_SAMPLE.name} not packaged")


def pairs() -> list[dict]:
    return read_sample(CALIBRATION_SAMPLE)[:LIMIT]


def asked_of(body: dict) -> tuple[str, str]:
    """(question, excerpt) of a judge request (prompts/judge_window)."""
    user = body["messages"][1]["content"]
    question = re.search(r"^Question: (.*)$", user, re.M).group(1)
    return question, user.split("<<<\n", 1)[1].split("\n>>>", 1)[0]


def gold_answers() -> dict[str, list[str]]:
    answers: dict[str, list[str]] = {}
    for row in pairs():
        answers.setdefault(fold_space(row["question"]), []).extend(fold_space(a).lower() for a in row["answers"] if a)
    return answers


def oracle():
    """A loopback LLM that says yes (log-probabilities) exactly where the excerpt it is shown
    contains one of the pair's gold answers: it reads the excerpt, not the question's wording."""
    answers = gold_answers()

    def logprobs(body: dict) -> dict[str, float]:
        question, excerpt = asked_of(body)
        return YES if any(a in excerpt.lower() for a in answers.get(fold_space(question), [])) else NO

    return logprobs


def run_cli(args: list[str], server: LoopbackOpenAIServer, cache, judge: str = "yesno") -> subprocess.CompletedProcess:
    env = {**os.environ, "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-loopback",
           "PAGERAG_CACHE_DIR": str(cache), "PAGERAG_LLM__CACHE": "false", "PAGERAG_LLM__MAX_RETRIES": "0",
           "PAGERAG_GENERATE__JUDGE": judge}
    return subprocess.run([sys.executable, "-m", "pagerag", *args], capture_output=True, text=True, env=env, timeout=600)


def excerpts_asked(windows: int) -> int:
    return sum(min(windows, len(r["says"])) + min(windows, len(r["silent"])) for r in pairs())


def held_out(stdout: str) -> dict[str, float]:
    """The report line's held-out figures, as fractions."""
    line = stdout[stdout.index("held out by book"):]
    found = re.search(r"says (\d+)%, refused where it does not (\d+)%, both (\d+)%", line)
    return dict(zip(("answered", "refused", "both"), (int(x) / 100 for x in found.groups())))


PROPOSED = re.compile(r"^Proposed answer: (.*)$", re.M)


def pick_oracle(names_always: bool = False):
    """A loopback LLM that names (log-probabilities over the numbers) the sentence holding one of
    the pair's gold answers, and 0 where none does -- on the control text too; with `names_always`,
    sentence 1 of every excerpt, answer or not (its pick does not read). Asked to confirm a short
    answer (prompts/confirm_answer), it says yes exactly when that answer is a gold one."""
    answers = gold_answers()

    def logprobs(body: dict) -> dict[str, float]:
        user = body["messages"][-1]["content"]
        question = fold_space(re.search(r"^Question: (.*)$", user, re.M).group(1))
        golds = answers.get(question, [])
        if PROPOSED.search(user):
            return YES if fold_space(PROPOSED.search(user).group(1)).lower() in golds else NO
        if names_always:
            return {"1": -0.05, "0": -3.0}
        naming = [n for n, sentence in NUMBERED.findall(user) if any(a in sentence.lower() for a in golds)]
        return {naming[0]: -0.05, "0": -3.0} if naming else {"0": -0.05, "1": -3.0}

    return logprobs


def is_confirm(body: dict) -> bool:
    return bool(PROPOSED.search(body["messages"][-1]["content"]))


def test_the_packaged_pairs_hold_both_sides_of_each_question():
    rows = pairs()
    assert len(rows) == LIMIT and len({r["book"] for r in rows}) > 1  # the sample interleaves the books
    for row in rows:
        assert row["question"] and row["answers"] and row["says"] and set(row) >= {"pair", "book", "kind", "silent"}


def test_calibrate_fits_and_stores_the_judges_threshold_for_the_backend_and_model(tmp_path):
    windows = load_settings(environ={}).generate.judge_windows
    with LoopbackOpenAIServer(top_logprobs=oracle()) as server:
        done = run_cli(["calibrate", "--llm", "openai", "--limit", str(LIMIT), "--quiet"], server, tmp_path)
        bodies = list(server.bodies)
    assert done.returncode == 0, done.stderr
    path = tmp_path / "calibration" / FILE
    assert path.is_file() and str(path) in done.stdout
    # one yes/no call (log-probabilities) per excerpt asked: judge_windows a side, fewer where a side has fewer
    assert len(bodies) == excerpts_asked(windows) and all(b.get("logprobs") and b["max_tokens"] == 1 for b in bodies)
    assert {fold_space(asked_of(b)[0]) for b in bodies} == {fold_space(r["question"]) for r in pairs()}
    decision = json.loads(path.read_text(encoding="utf-8"))
    assert 0.0 < decision["tau"] < 1.0 and decision["pairs"] == LIMIT and decision["windows"] == windows
    # a model that reads the excerpt gets most pairs right on both sides, on books the fit did not see
    figures = held_out(done.stdout)
    assert figures["both"] > 0.6 and decision["held_out_by_book"]["both"] == pytest.approx(figures["both"], abs=0.01)
    assert f"tau {decision['tau']:.3f}" in done.stdout and f"{LIMIT} pairs" in done.stdout


def pick_conversation_excerpt(body: dict) -> tuple[str, str]:
    """(question, excerpt text) of the pick conversation a short-answer request continues, or of
    the request asking the excerpt anew (prompts/answer_excerpt: the excerpt as it is)."""
    user = body["messages"][1]["content"]
    question = fold_space(re.search(r"^Question: (.*)$", user, re.M).group(1))
    if "<<<" in user:
        return question, user.split("<<<\n", 1)[1].split("\n>>>", 1)[0]
    return question, " ".join(sentence for _, sentence in NUMBERED.findall(user))


def short_answers(right: bool):
    """The short answer after the pick: a gold answer the excerpt holds (right=True), else NONE;
    with right=False, words of the excerpt that are not the answer (they check out, and are wrong)."""
    answers = gold_answers()

    def reply(body: dict) -> str:
        question, excerpt = pick_conversation_excerpt(body)
        held = [a for a in answers.get(question, []) if a in excerpt.lower()]
        if not right:
            return " ".join(w for w in excerpt.split()[:3] if w.lower() not in " ".join(held)) or "NONE"
        return held[0] if held else "NONE"

    return reply


def test_calibrate_fits_the_pick_judges_threshold_by_default(tmp_path):
    """With the short answer required (the default), a side answers only with a short answer that
    checks out, and the answering side counts only when that answer is right."""
    windows = load_settings(environ={}).generate.judge_windows
    with LoopbackOpenAIServer(top_logprobs=pick_oracle(), reply=short_answers(right=True)) as server:
        done = run_cli(["calibrate", "--llm", "openai", "--limit", str(LIMIT), "--quiet"], server, tmp_path,
                       judge="pick")
        bodies = list(server.bodies)
    assert done.returncode == 0, done.stderr
    path = tmp_path / "calibration" / "openai-loopback-model.pick.json"
    assert path.is_file() and str(path) in done.stdout and not (tmp_path / "calibration" / FILE).exists()
    # one numbered-sentence call an excerpt and one a question on the control text (log-probabilities),
    # then the short answer: at least one a side, at most answer_excerpts a side and the best excerpt asked anew
    picks = [b for b in bodies if b.get("logprobs") and not is_confirm(b)]
    answers = [b for b in bodies if not b.get("logprobs")]
    assert len(picks) == excerpts_asked(windows) + LIMIT
    assert all(b["max_tokens"] == 1 and "sentence by sentence" in b["messages"][-1]["content"] for b in picks)
    tries = load_settings(environ={}).generate.answer_excerpts
    assert 2 * LIMIT <= len(answers) <= 2 * LIMIT * (tries + 1)
    assert all("in a few words" in b["messages"][-1]["content"] or "Copy the few words" in b["messages"][-1]["content"]
               for b in answers)
    # every short answer that checks out is read again (a yes/no call), none that does not
    confirms = [b for b in bodies if is_confirm(b)]
    assert 0 < len(confirms) <= len(answers) and all(b.get("logprobs") and b["max_tokens"] == 1 for b in confirms)
    decision = json.loads(path.read_text(encoding="utf-8"))
    assert decision["judge"] == "pick" and decision["feature"] in ("null", "max", "contrast")
    assert decision["fitted_for"] == "checked answers" and decision["answer_tries"] == tries
    assert decision["pairs"] == LIMIT and all("null" in row and "says_right" in row for row in decision["p_yes"])
    figures = held_out(done.stdout)
    assert figures["both"] > 0.6 and decision["held_out_by_book"]["both"] == pytest.approx(figures["both"], abs=0.01)


def test_a_pick_that_reads_but_answers_wrong_gets_no_pair_right(tmp_path):
    """The same reading judge with short answers that check out but are not the answer: fitted for
    the answers ask gives, no pair is right on both sides (fitted for the decision alone, most were)."""
    with LoopbackOpenAIServer(top_logprobs=pick_oracle(), reply=short_answers(right=False)) as server:
        done = run_cli(["calibrate", "--llm", "openai", "--limit", str(LIMIT), "--quiet"], server, tmp_path,
                       judge="pick")
    assert done.returncode == 0, done.stderr
    decision = json.loads((tmp_path / "calibration" / "openai-loopback-model.pick.json").read_text(encoding="utf-8"))
    assert not any(row["says_right"] for row in decision["p_yes"])
    assert decision["held_out_by_book"]["both"] == 0.0 and held_out(done.stdout)["both"] == 0.0


def test_a_second_reading_that_rejects_wrong_answers_is_fitted_with_the_threshold(tmp_path, monkeypatch):
    """A pick that names a sentence on both sides (it does not read) and short answers that check
    out on both sides -- right where the book says, words of the excerpt where it does not: the
    threshold alone gets no pair right; with the second reading (yes only to a right answer) the
    fitted confirm threshold refuses the silent sides, and most pairs are right held out."""
    def reply(body: dict) -> str:
        question, excerpt = pick_conversation_excerpt(body)
        held = [a for a in gold_answers().get(question, []) if a in excerpt.lower()]
        return held[0] if held else " ".join(excerpt.split()[:3])

    with LoopbackOpenAIServer(top_logprobs=pick_oracle(names_always=True), reply=reply) as server:
        done = run_cli(["calibrate", "--llm", "openai", "--limit", str(LIMIT), "--quiet"], server, tmp_path,
                       judge="pick")
    assert done.returncode == 0, done.stderr
    decision = json.loads((tmp_path / "calibration" / "openai-loopback-model.pick.json").read_text(encoding="utf-8"))
    assert decision["confirm_at"] is not None and "second reading reaches" in done.stdout
    assert held_out(done.stdout)["both"] > 0.5
    monkeypatch.setenv("PAGERAG_GENERATE__CONFIRM_ANSWER", "false")  # the same, without the second reading
    with LoopbackOpenAIServer(top_logprobs=pick_oracle(names_always=True), reply=reply) as server:
        off = run_cli(["calibrate", "--llm", "openai", "--limit", str(LIMIT), "--quiet"], server, tmp_path, judge="pick")
        assert not any(is_confirm(b) for b in server.bodies)
    assert off.returncode == 0, off.stderr
    assert held_out(off.stdout)["both"] < held_out(done.stdout)["both"] and "second reading" not in off.stdout


def test_a_model_that_says_yes_to_everything_gets_no_pair_right(tmp_path):
    with LoopbackOpenAIServer(top_logprobs=YES) as server:
        done = run_cli(["calibrate", "--llm", "openai", "--limit", str(LIMIT), "--quiet"], server, tmp_path)
    assert done.returncode == 0, done.stderr
    figures = held_out(done.stdout)
    assert figures["both"] == 0.0 and figures["answered"] + figures["refused"] == pytest.approx(1.0, abs=0.01)
    decision = json.loads((tmp_path / "calibration" / FILE).read_text(encoding="utf-8"))
    assert decision["held_out_by_book"]["both"] == 0.0 and decision["in_sample"]["both"] == 0.0
    assert "warning" in done.stderr and "hardly depend" in done.stderr  # the user is told the judge does not read


def test_without_log_probabilities_the_yes_no_replies_are_calibrated(tmp_path):
    """A server that ignores `logprobs`: asked once, then each excerpt is judged by its text reply."""
    answers = gold_answers()

    def reply(body: dict) -> str:
        question, excerpt = asked_of(body)
        return "Yes" if any(a in excerpt.lower() for a in answers.get(fold_space(question), [])) else "No"

    windows = load_settings(environ={}).generate.judge_windows
    with LoopbackOpenAIServer(reply=reply, mode="ignore_logprobs") as server:
        done = run_cli(["calibrate", "--llm", "openai", "--limit", str(LIMIT), "--quiet"], server, tmp_path)
        bodies = list(server.bodies)
    assert done.returncode == 0, done.stderr
    assert [bool(b.get("logprobs")) for b in bodies] == [True] + [False] * excerpts_asked(windows)
    decision = json.loads((tmp_path / "calibration" / FILE).read_text(encoding="utf-8"))
    assert decision["held_out_by_book"]["both"] > 0.6
    assert {p for row in decision["p_yes"] for side in ("says", "silent") for p in row[side]} <= {0.0, 1.0}


def test_a_failing_backend_is_one_line_and_writes_nothing(tmp_path):
    with LoopbackOpenAIServer(mode="500") as server:
        done = run_cli(["calibrate", "--llm", "openai", "--limit", str(LIMIT), "--quiet"], server, tmp_path)
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "500" in lines[0] and "Traceback" not in done.stderr
    assert not (tmp_path / "calibration").exists()


@pytest.mark.slow
def test_ask_uses_the_threshold_once_calibrated(printer_repo, tmp_path, monkeypatch):
    from tests.helpers.questions import ANSWERABLE

    from pagerag.api import PageRAG

    judge = oracle()
    quote = "QUOTE: brought down a bag of gold from the capitol containing $4,000\nANSWER: $4,000"
    with LoopbackOpenAIServer(top_logprobs=lambda body: YES if asked_of(body)[0] == ANSWERABLE else judge(body),
                              reply=lambda body: quote) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback")
        monkeypatch.setenv("PAGERAG_CACHE_DIR", str(tmp_path))
        before = PageRAG(printer_repo, llm="openai", generate={"rcs_gate": "off", "judge": "yesno"}).ask(ANSWERABLE)
        assert before.verdict is not None and before.verdict.method == "llm-windows (uncalibrated)"
        assert "tau 0.50" in before.verdict.detail
        assert run_cli(["calibrate", "--llm", "openai", "--limit", str(LIMIT), "--quiet"], server, tmp_path).returncode == 0
        tau = json.loads((tmp_path / "calibration" / FILE).read_text(encoding="utf-8"))["tau"]
        after = PageRAG(printer_repo, llm="openai", generate={"rcs_gate": "off", "judge": "yesno"}).ask(ANSWERABLE)
    assert after.verdict is not None and after.verdict.method == "llm-windows"
    assert f"tau {tau:.2f}" in after.verdict.detail
