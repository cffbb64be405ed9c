"""Feature tables for the book models: run the question path on every corpus example and record
what `pagerag ask` would see, with the labels the corpus gives.

    python -m pagerag.train.features --corpus /work/corpus/book_corpus.jsonl --repos /work/repos --out /work/features
    # one file per book: <out>/<book>.jsonl.gz (one example per line), written when the book is
    # done; a re-run skips finished books (--force redoes them); <out>/manifest.json says what
    # produced them (settings, code version, corpus checksum)

Per example and per retrieval variant (`default`: the `full` pipeline as `ask` runs it;
`widened`: the escalated route the gate tries once when RCS < tau), with the example's mask
hidden from every operator:
  rcs        every RCS feature (generate.gate.retrieval_features: phi1-phi9 and the extras)
  level      the evidence-level features of the sufficiency model (sufficiency.evidence_level)
  sents      per evidence sentence, the ranker's features (sentences.SENTENCE_FEATURES)
  texts      per evidence sentence, [sentence, before, after]: what the reader reads
             (pagerag.read.around), so reader scores can be added without running retrieval again
             (pagerag.train.reader_scores)
  sent_labels per sentence: [answer sentence, located evidence sentence, the quote is leniently /
             strictly right, the same for the quote extended when short]
  labels     rcs: every evidence statement located in the retrieved evidence (0 for masked and
             swapped; None for answerable questions whose evidence the corpus could not locate);
             suff: the evidence supports an answer (rcs label, or an answer sentence retrieved)
Features are computed by the runtime modules themselves, from what `ask` has (no gold); labels
use the gold. The same settings, repositories and corpus give the same bytes (no timings are
recorded here: latency is measured by benchmarks/book_qa.py on `ask` itself).
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from ..evaluate.scoring import EVIDENCE_LOCATED, lenient_by_recall, statement_located, strict_match
from .books import TEST_BOOKS, TRAIN_BOOKS
from .corpus import read_corpus
from .examples import CorpusExample

VARIANTS = ("default", "widened")
SENT_LABELS = ("answer", "evidence", "lenient", "strict", "lenient_ext", "strict_ext")
MANIFEST = "manifest.json"


def _overlaps(a: tuple[str, int, int], b: tuple[str, int, int]) -> bool:
    """Same document and at least half of the shorter span shared."""
    if a[0] != b[0]:
        return False
    shared = min(a[2], b[2]) - max(a[1], b[1])
    return shared > 0 and shared >= 0.5 * min(a[2] - a[1], b[2] - b[1])


def sentence_labels(ex: CorpusExample, sentences, extend) -> list[list[int]]:
    """SENT_LABELS per sentence (all 0 for an unanswerable example)."""
    from ..generate.extractive import quote_text

    answers = [(s.doc_id, s.start, s.end) for s in ex.answer_spans]
    located = [(s.doc_id, s.start, s.end) for s in ex.evidence_spans if s.score >= EVIDENCE_LOCATED]
    rows = []
    for s in sentences:
        if not ex.answerable:
            rows.append([0] * len(SENT_LABELS))
            continue
        key = (s.window.doc_id, s.start, s.end)
        plain, longer = quote_text(s, False), quote_text(s, extend)
        rows.append([int(any(_overlaps(key, a) for a in answers)), int(any(_overlaps(key, e) for e in located)),
                     int(lenient_by_recall(plain, ex.golds)), int(strict_match(plain, ex.golds)),
                     int(lenient_by_recall(longer, ex.golds)), int(strict_match(longer, ex.golds))])
    return rows


def example_labels(ex: CorpusExample, evidence) -> dict:
    """The retrieval-success (rcs) and supports-an-answer (suff) labels of one retrieval."""
    if not ex.answerable:
        return {"rcs": 0, "suff": 0, "located": 0, "answer_retrieved": 0}
    texts = [e.text for e in evidence]
    found = sum(statement_located(s, texts) for s in ex.evidence)
    spans = [(e.doc_id, e.start, e.end) for e in evidence]
    answer_retrieved = any(a.doc_id == d and a.start < end and start < a.end
                           for a in ex.answer_spans for d, start, end in spans)
    rcs = int(found == len(ex.evidence)) if ex.located else None
    suff = 1 if (rcs == 1 or answer_retrieved) else (0 if ex.located else None)
    return {"rcs": rcs, "suff": suff, "located": found / max(len(ex.evidence), 1), "answer_retrieved": int(answer_retrieved)}


def _round(values) -> list[float]:
    return [round(float(v), 5) for v in values]


class Extractor:
    """Runs retrieval and feature extraction for the examples of one book repository."""

    def __init__(self, repo: Path, settings):
        from ..retrieve.api import get_encoder
        from ..retrieve.state import get_state
        from ..retrieve.windows import build_window_index

        self.settings = settings
        self.state = get_state(repo)
        # the session's encoder, as `ask` has it (ONNX by default); every window embedded once,
        # the same way, before any question
        self.encode = get_encoder(settings)
        build_window_index(self.state, settings.embed.model, self.encode)

    def variant(self, ex: CorpusExample, widened: bool) -> dict:
        from ..generate.gate import retrieval_features
        from ..generate.sentences import SENTENCE_FEATURES, read_evidence
        from ..generate.sufficiency import evidence_level
        from ..read import around
        from ..retrieve.api import retrieve, single_threaded_blas

        r = retrieve(ex.question, self.state, self.settings, escalate=widened, encode=self.encode,
                     exclude=set(ex.mask_passage_ids))
        with single_threaded_blas():
            rcs = retrieval_features(r, self.state, self.encode, self.settings.extract.spacy_model)
            reading = read_evidence(r.question, r.evidence, self.state, self.settings.embed.model, self.encode)
        return {
            "rcs": {k: round(float(v), 6) for k, v in rcs.items()},
            "level": {k: round(float(v), 6) for k, v in evidence_level(reading.terms, r.evidence, reading.idf).items()},
            "sents": [_round(s.features[n] for n in SENTENCE_FEATURES) for s in reading.sentences],
            "sent_labels": sentence_labels(ex, reading.sentences, True),
            "texts": [[c.sentence, c.before, c.after] for c in
                      (around(self.state.source_text(x.window.doc_id), x.start, x.end) for x in reading.sentences)],
            "graph": {k: round(float(v), 6) for k, v in r.graph_features.items()},
            "labels": example_labels(ex, r.evidence),
            "need": r.plan.need, "n_evidence": len(r.evidence), "evidence_tokens": r.evidence_tokens,
        }

    def example(self, ex: CorpusExample, variants=VARIANTS) -> dict:
        return {"id": ex.id, "book": ex.book, "split": ex.split, "kind": ex.kind, "question": ex.question,
                "question_type": ex.question_type, "source_id": ex.source_id, "located": ex.located,
                "variants": {v: self.variant(ex, v == "widened") for v in variants}}


def code_version() -> str:
    try:
        here = Path(__file__).resolve().parent
        return subprocess.run(["git", "describe", "--always", "--dirty"], cwd=here, capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def extract(corpus: Path, repos: Path, out: Path, books: list[str], force: bool = False, log=print) -> None:
    from ..generate.sentences import SENTENCE_FEATURES
    from ..settings import load_settings

    settings = load_settings(pipeline="full", environ={})
    examples = read_corpus(corpus)
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST).write_text(json.dumps({
        "corpus": str(corpus), "corpus_sha256": hashlib.sha256(corpus.read_bytes()).hexdigest(),
        "settings": settings.model_dump(), "code": code_version(), "variants": list(VARIANTS),
        "sentence_features": list(SENTENCE_FEATURES), "sentence_labels": list(SENT_LABELS),
    }, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    for book in books:
        target = out / f"{book}.jsonl.gz"
        if target.is_file() and not force:
            log(f"{book}: done already ({target})")
            continue
        mine = [e for e in examples if e.book == book]
        t0 = time.perf_counter()
        extractor = Extractor(repos / f"{book}.rag", settings)
        tmp = target.with_name(target.name + ".tmp")
        # mtime=0: the gzip header carries no time, so the same tables are the same bytes
        with io.TextIOWrapper(gzip.GzipFile(tmp, "wb", mtime=0), encoding="utf-8") as fh:
            for i, ex in enumerate(mine, 1):
                fh.write(json.dumps(extractor.example(ex), ensure_ascii=False) + "\n")
                if i % 50 == 0:
                    log(f"{book}: {i}/{len(mine)} [{time.perf_counter() - t0:.0f}s]")
        tmp.replace(target)
        log(f"{book}: {len(mine)} examples [{time.perf_counter() - t0:.0f}s]")


def read_tables(out: Path, books: list[str] | None = None) -> list[dict]:
    """Every example row of the feature tables in `out` (optionally of some books only). Tables
    written with other sentence features (the manifest names them) are read with the current
    SENTENCE_FEATURES, picked by name; a table lacking one of them is an error."""
    columns = _sentence_columns(Path(out))
    rows = []
    for path in sorted(Path(out).glob("*.jsonl.gz")):
        book = path.name[: -len(".jsonl.gz")]
        if books is None or book in books:
            with gzip.open(path, "rt", encoding="utf-8") as fh:
                rows.extend(_with_columns(json.loads(line), columns) for line in fh if line.strip())
    return rows


def _sentence_columns(out: Path) -> list[int] | None:
    """Where each of SENTENCE_FEATURES sits in the tables' rows (None: as written)."""
    from ..errors import PageRAGError
    from ..generate.sentences import SENTENCE_FEATURES

    manifest = out / MANIFEST
    written = json.loads(manifest.read_text(encoding="utf-8")).get("sentence_features") if manifest.is_file() else None
    if not written or list(written) == list(SENTENCE_FEATURES):
        return None
    missing = [f for f in SENTENCE_FEATURES if f not in written]
    if missing:
        raise PageRAGError(f"{out}: the feature tables lack sentence feature(s) {', '.join(missing)}; "
                           "run python -m pagerag.train.features --force")
    return [list(written).index(f) for f in SENTENCE_FEATURES]


def _with_columns(row: dict, columns: list[int] | None) -> dict:
    if columns is not None:
        for v in row["variants"].values():
            v["sents"] = [[s[i] for i in columns] for s in v["sents"]]
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pagerag.train.features", description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", required=True, help="book_corpus.jsonl (python -m pagerag.train.corpus).")
    ap.add_argument("--repos", required=True, help="Folder holding <Novel-id>.rag repositories.")
    ap.add_argument("--out", required=True, help="Output folder of the feature tables.")
    ap.add_argument("--split", choices=("train", "test", "all"), default="all", help="Which books (default: all).")
    ap.add_argument("--books", default="", help="Comma-separated book ids (overrides --split).")
    ap.add_argument("--force", action="store_true", help="Redo books whose table exists.")
    args = ap.parse_args(argv)
    books = [b for b in args.books.split(",") if b] or sorted(
        (TRAIN_BOOKS if args.split != "test" else ()) + (TEST_BOOKS if args.split != "train" else ()))
    from ..errors import PageRAGError

    try:
        missing = [b for b in books if not (Path(args.repos) / f"{b}.rag").is_dir()]
        if missing:
            raise PageRAGError(f"{args.repos}: no repository {missing[0]}.rag")
        if not Path(args.corpus).is_file():
            raise PageRAGError(f"{args.corpus}: corpus file not found")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        extract(Path(args.corpus), Path(args.repos), Path(args.out), books, args.force,
                log=lambda m: print(m, file=sys.stderr, flush=True))
    except PageRAGError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
