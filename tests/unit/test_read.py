"""The reader (pagerag.read): its pair encoding, the packaged model loaded offline and read on text
the test writes, and a damaged model refused with one line."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time

import pytest
from helpers.network import ConnectionRecorder

from pagerag.errors import PageRAGError
from pagerag.read import Passage, Reader, around, forget_readers, packaged_reader
from pagerag.read.inputs import Limits, PairEncoder
from pagerag.read.reader import MODEL_DIR, MODEL_FILE, TOKENIZER_FILE

QUESTION = "How much did Ebenezer Crump pay for the grey mare?"
STATES = "At the Lammas fair Ebenezer Crump paid forty guineas for the grey mare, and thought it cheap."
NAMES_ONLY = "Ebenezer Crump rode the grey mare home through the rain, whistling a hymn to himself."


@pytest.fixture(scope="module")
def encoder() -> PairEncoder:
    return PairEncoder(MODEL_DIR / TOKENIZER_FILE, Limits())


def test_a_pair_marks_the_sentence_and_maps_its_pieces_back_to_characters(encoder):
    pair = encoder.encode(QUESTION, [Passage(STATES, before="It was market day. ", after=" He rode home.")])[0]
    sentence_types = pair.type_ids[pair.first: pair.last + 1]
    assert sentence_types and set(sentence_types) == {1}
    assert pair.type_ids.count(1) == len(pair.offsets)  # only the sentence is type 1
    assert pair.ids[0] == encoder.cls and pair.ids[-1] == encoder.sep
    start = STATES.index("forty")
    piece = next(i for i, (s, e) in enumerate(pair.offsets) if s <= start < e)
    assert STATES[pair.offsets[piece][0]: pair.offsets[piece][1]].lower() == "forty"


def test_limits_cut_the_question_and_the_context_not_the_sentence_start(encoder):
    long_question = " ".join(["word"] * 200) + "?"
    pair = encoder.encode(long_question, [Passage(STATES, before="x " * 500, after="y " * 500)])[0]
    lim = Limits()
    assert len(pair.ids) <= 4 + lim.question + lim.sentence + lim.before + lim.after
    assert pair.offsets[0][0] == 0  # the sentence is read from its first word


def test_context_is_the_book_text_around_the_sentence():
    source = "First sentence here. He was over eighty years old. Then he left."
    start = source.index("He was")
    end = source.index("Then") - 1
    ctx = around(source, start, end)
    assert ctx.sentence == "He was over eighty years old." and ctx.before.endswith("here. ")
    assert ctx.after.startswith(" Then")


def test_the_packaged_reader_loads_offline_and_reads_which_sentence_states_the_answer(monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("the reader tried to open a network connection")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(socket.socket, "connect", no_network)
    forget_readers()
    reader = packaged_reader()
    states, names_only = reader.read(QUESTION, [Passage(STATES), Passage(NAMES_ONLY)])
    assert states.p > names_only.p
    assert states.span is not None and "forty guineas" in STATES[states.span[0]: states.span[1]]
    assert states.margin > names_only.margin


def test_onnx_runtime_does_not_phone_home_once_pagerag_is_imported(tmp_path):
    """ONNX Runtime's own C++ code sends usage events to Microsoft's collector a few seconds after
    an inference session opens (no Python socket is involved, so the monkeypatch above cannot see
    it). Two fresh processes, each with an empty home (ORT keeps its event queue under
    ~/.cache), read with the packaged reader behind a recording proxy: with pagerag's default
    nothing arrives; the control, which turns the events back on, shows the recorder would have
    caught them. Where ORT sends nothing even for the control (it did not on one CI machine),
    the test cannot tell, and says so by skipping."""
    code = ("import time\n"
            "from pagerag.read import Passage, packaged_reader\n"
            f"packaged_reader().read({QUESTION!r}, [Passage({STATES!r})])\n"
            "time.sleep(60)\n")
    with ConnectionRecorder() as quiet, ConnectionRecorder() as control:
        children = [subprocess.Popen([sys.executable, "-c", code],
                                     env=_behind_proxy(recorder.url, events, tmp_path / name),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                    for recorder, events, name in ((quiet, None, "quiet"), (control, "0", "control"))]
        _wait_for_events(control, children, seconds=40)
        time.sleep(2)  # the quiet child has had as long as the control, and a little more
        for child in children:
            child.kill()
            child.communicate(timeout=30)
    assert quiet.seen == []
    if not control.seen:
        pytest.skip("ONNX Runtime sent no events here even with them turned on: nothing to tell apart")
    assert any(b"events.data.microsoft.com" in seen for seen in control.seen), control.seen


def _wait_for_events(recorder: ConnectionRecorder, children: list, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not recorder.seen and time.monotonic() < deadline:
        failed = [child.stderr.read() for child in children if child.poll() is not None]
        assert not failed, failed  # a child that ended before its sleep crashed
        time.sleep(0.5)


def _behind_proxy(proxy: str, telemetry: str | None, home) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if key not in ("ORT_DISABLE_TELEMETRY", "XDG_CACHE_HOME")}
    home.mkdir()
    env["HOME"] = str(home)
    env.update({name: proxy for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY",
                                         "https_proxy", "http_proxy", "all_proxy")})
    env.update(NO_PROXY="", no_proxy="")
    if telemetry is not None:
        env["ORT_DISABLE_TELEMETRY"] = telemetry
    return env


def test_a_damaged_model_is_refused_with_one_line(tmp_path):
    broken = tmp_path / "reader"
    shutil.copytree(MODEL_DIR, broken)
    data = bytearray((broken / MODEL_FILE).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (broken / MODEL_FILE).write_bytes(bytes(data))
    with pytest.raises(PageRAGError) as err:
        Reader(broken)
    assert "checksum" in str(err.value) and "\n" not in str(err.value)
    (broken / MODEL_FILE).unlink()
    with pytest.raises(PageRAGError, match="missing"):
        Reader(broken)


@pytest.mark.slow
def test_ask_with_a_damaged_reader_exits_with_one_line(carol_repo, tmp_path):
    broken = tmp_path / "reader"
    shutil.copytree(MODEL_DIR, broken)
    (broken / MODEL_FILE).write_bytes(b"not a model")
    done = subprocess.run([sys.executable, "-m", "pagerag", "ask", "Who was Marley?", "--repo", str(carol_repo),
                           "--set", f"generate.reader={broken}", "--set", "generate.rcs_gate=off"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("asking")]
    assert len(lines) == 1 and "checksum" in lines[0] and "Traceback" not in done.stderr
