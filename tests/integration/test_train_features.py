"""Feature tables on a real repository (the training-book excerpt printer_repo): the question path's own
features and the corpus labels line up -- an answerable question whose evidence is retrieved is
labelled a success and its answer sentence is found among the evidence sentences, its masked twin
(evidence hidden) is labelled a failure -- and the extraction is deterministic and resumable."""
from __future__ import annotations

import gzip
import json

import pytest

from pagerag.confidence.features import PAPER_FEATURES
from pagerag.generate.sentences import SENTENCE_FEATURES
from pagerag.settings import load_settings
from pagerag.train.corpus import build_book
from pagerag.train.features import SENT_LABELS, Extractor, main, read_tables

pytestmark = pytest.mark.slow

# Questions about the training-book excerpt (printer_repo) in GraphRAG-Bench's style, written here
QUESTIONS = [
    {"id": "printer-gold", "source": "Novel-10146", "question_type": "Fact Retrieval",
     "question": "How much gold did Mr. Moore bring down from the capitol for his employes?", "answer": "$4,000",
     "evidence": ["Mr. Moore brought a bag of gold containing $4,000 down from the capitol and divided it among his "
                  "employes."]},
    {"id": "printer-brother", "source": "Novel-10146", "question_type": "Complex Reasoning",
     "question": "Who managed the Daily Minnesotian when the narrator arrived, and how were they related?",
     "answer": "Geo. W. Moore, his brother",
     "evidence": ["The narrator arrived in St. Paul in April 1858 and commenced work on the Daily Minnesotian.",
                  "His brother Geo. W. Moore was part owner and manager of the paper."]},
]


@pytest.fixture(scope="module")
def examples(printer_repo):
    built, _ = build_book("Novel-10146", printer_repo, QUESTIONS, seed=0, split="train")
    return {e.id: e for e in built}


@pytest.fixture(scope="module")
def extractor(printer_repo):
    return Extractor(printer_repo, load_settings(pipeline="full", environ={}))


def test_answerable_example_with_retrieved_evidence_is_a_success(examples, extractor):
    row = extractor.example(examples["printer-gold"])
    assert row["kind"] == "answerable" and "answer_type" not in row and set(row["variants"]) == {"default", "widened"}
    v = row["variants"]["default"]
    assert set(PAPER_FEATURES) <= set(v["rcs"]) and set(v["level"]) == {"names_evidence", "attr_span"}
    assert v["labels"]["rcs"] == 1 and v["labels"]["suff"] == 1 and v["labels"]["answer_retrieved"] == 1
    assert all(len(s) == len(SENTENCE_FEATURES) for s in v["sents"]) and len(v["sents"]) == len(v["sent_labels"])
    answer = SENT_LABELS.index("answer")
    found = [i for i, labels in enumerate(v["sent_labels"]) if labels[answer]]
    assert found, "the sentence stating the $4,000 is among the evidence sentences"
    # its quote is right by the evaluation's own scoring
    assert all(v["sent_labels"][i][SENT_LABELS.index("lenient")] for i in found)


def test_masked_twin_is_a_failure_with_no_positive_sentence(examples, extractor):
    masked = examples["printer-gold:masked"]
    v = extractor.example(masked, variants=("default",))["variants"]["default"]
    assert v["labels"] == {"rcs": 0, "suff": 0, "located": 0, "answer_retrieved": 0}
    assert v["sents"] and not any(any(labels) for labels in v["sent_labels"])
    # the hidden passages really are gone: no evidence sentence states the sum any more
    answerable = extractor.example(examples["printer-gold"], variants=("default",))["variants"]["default"]
    assert answerable["level"] != v["level"] or answerable["sents"] != v["sents"]


def test_extraction_is_deterministic_and_resumable(examples, printer_repo, tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(e.to_dict()) + "\n" for e in examples.values()), encoding="utf-8")
    repos = tmp_path / "repos"
    repos.mkdir()
    (repos / "Novel-10146.rag").symlink_to(printer_repo, target_is_directory=True)
    out = tmp_path / "features"
    args = ["--corpus", str(corpus), "--repos", str(repos), "--out", str(out), "--books", "Novel-10146"]
    assert main(args) == 0
    table = out / "Novel-10146.jsonl.gz"
    first = gzip.decompress(table.read_bytes())
    rows = read_tables(out)
    assert [r["id"] for r in rows] == list(examples) and json.loads((out / "manifest.json").read_text())["variants"]
    stamp = table.stat().st_mtime_ns
    assert main(args) == 0 and table.stat().st_mtime_ns == stamp  # a finished book is skipped
    assert main(args + ["--force"]) == 0 and gzip.decompress(table.read_bytes()) == first
    assert main(["--corpus", str(corpus), "--repos", str(tmp_path / "none"), "--out", str(out)]) == 2
