"""Book QA with learned, calibrated answer-or-refuse decisions, on books the models never saw.

    python benchmarks/book_qa.py --features /work/features --reads /work/features/reader \\
        --corpus /work/corpus/book_corpus.jsonl --repos /work/repos --out book-qa-out   # lobo + test + dev, extractive
    PAGERAG_LLM__GGUF=$(../shared/tools/local-llm) python benchmarks/book_qa.py ... --stages llm

Stages (`--stages`, comma-separated; results.jsonl in --out is appended as it goes and a re-run
skips what is there, so an interrupted run resumes):
  lobo  nested leave-books-out on the 15 training books (their GraphRAG-Bench corpus examples and
        their written question sets), from the feature tables and the reader's held-out scores:
        each book decided by models, priors and an operating point chosen on the other 14 only
        (pagerag.train.fit.nested)
  test  the five test books: every test-split corpus example (answerable, masked with its
        evidence hidden, swapped) through `ask` (extractive); the RCS against the paper's
        baselines from the test books' feature tables (`python -m pagerag.train.features --split test`)
  dev   both DEV sets ($PAGERAG_DATA_DIR/qa) through `ask` (extractive), RCS metrics from their
        retrieval (label: every gold quote inside the evidence; 0 when unanswerable)
  baseline  only the plain RAG baseline of the llm stage
  llm-dev   only the DEV part of the llm stage (its questions drawn as there), e.g. with
            `--pipeline no-evidence-constraint` beside a default run: issue 29's natural-set target
  llm-train the same on the training books' written sets (`--llm-train-per-book` each, their mix;
            `--train-repos` holds their repositories): where a change is seen before any DEV run
  report    nothing is run: the tables are printed again from --out (results.jsonl, report.json),
            e.g. for an earlier run's directory
  llm   the local model (llm.gguf / PAGERAG_LLM__GGUF) through `ask` on `--llm-dev-per-set` questions
        of each DEV set (drawn with a fixed seed, 60% answerable like the sets) and `--llm-per-book`
        examples per test book (half answerable), and the plain RAG baseline with
        the same model on the answerable ones (BM25 + dense fused, the top passages up to 1,500
        tokens, one answer prompt, no judge, no checks)
  --pair-out DIR  (repeatable) the pair tables of benchmarks/pair_qa.py runs, printed beside these
Nothing here fits or chooses anything: the test books and DEV sets are only run, once, to report.
Scores: correct refusal (unanswerable refused, any reason), false refusal (answerable refused),
strict (the gold answer inside the answer) and lenient (token recall >= 0.5) accuracy over the
answerable, BBS = 2 * lenient * refusal / (lenient + refusal); the AUC of P(sufficient) and the
reader's AUC (its best sentence's P on the default retrieval, answerable vs unanswerable);
latency medians per stage.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

# The preset of the test and dev stages (--pipeline); None is the package's default. Since the
# offline default shows the closest passage without refusing (docs/pairs.md), a comparison with a
# run before that change passes `--pipeline reader-decides`, the old default's behaviour.
PIPELINE: str | None = None

DEV = {"DEV-A": ("qa/christmas_carol.qa.jsonl", "books/christmas_carol.txt", "carol.rag"),
       "DEV-B": ("qa/cornwall.qa.jsonl", None, "Novel-44557.rag")}


def data_dir() -> Path:
    found = os.environ.get("PAGERAG_DATA_DIR") or str(REPO_ROOT.parent / "shared" / "data")
    os.environ["PAGERAG_DATA_DIR"] = found
    return Path(found)


class Results:
    """results.jsonl: one row per (system, set, id), appended as measured."""

    def __init__(self, out: Path):
        self.path = out / "results.jsonl"
        out.mkdir(parents=True, exist_ok=True)
        self.rows = [json.loads(x) for x in self.path.read_text().splitlines() if x.strip()] if self.path.is_file() else []
        self.done = {(r["system"], r["set"], r["id"]) for r in self.rows}

    def add(self, row: dict) -> None:
        self.rows.append(row)
        self.done.add((row["system"], row["set"], row["id"]))
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def reader_best(rag, question: str, exclude=None) -> float:
    """The reader's best P over the default retrieval's sentences (whatever the gate says)."""
    from pagerag.generate.sentences import read_evidence, read_sentences
    from pagerag.read import packaged_reader

    r = rag.retrieve(question, exclude=exclude)
    reading = read_evidence(r.question, r.evidence, rag.state, rag.settings.embed.model, rag.encode)
    ranked = read_sentences(r.question, reading.sentences, rag.state, packaged_reader())
    return ranked[0].prob if ranked else 0.0


def scored(system: str, set_name: str, qid: str, kind: str, golds: list[str], answer, started: float) -> dict:
    from pagerag.evaluate.scoring import lenient_by_recall, strict_match

    answered = answer.decision == "answered"
    ok = answered and kind == "answerable"
    return {"system": system, "set": set_name, "id": qid, "kind": kind, "answerable": kind == "answerable",
            "decision": answer.decision, "reason": answer.reason, "answer": answer.answer[:400],
            "strict": bool(ok and strict_match(answer.answer, golds)), "lenient": bool(ok and lenient_by_recall(answer.answer, golds)),
            "rcs": answer.rcs, "tau": answer.tau, "p": answer.verdict.score if answer.verdict else None,
            "reader_p": (answer.reader or {}).get("p"),
            "latency_ms": answer.latency_ms, "tokens": answer.prompt_tokens, "wall_ms": round((time.perf_counter() - started) * 1000, 1),
            "judged": answer.judged, "notes": answer.notes}


def summary(rows: list[dict]) -> dict:
    ans = [r for r in rows if r["answerable"]]
    una = [r for r in rows if not r["answerable"]]
    ref = sum(r["decision"] == "refused" for r in una) / len(una) if una else float("nan")
    fr = sum(r["decision"] == "refused" for r in ans) / len(ans) if ans else float("nan")
    strict = sum(r["strict"] for r in ans) / len(ans) if ans else float("nan")
    lenient = sum(r["lenient"] for r in ans) / len(ans) if ans else float("nan")
    bbs = 2 * lenient * ref / (lenient + ref) if ans and una and lenient + ref else float("nan")
    kinds = sorted({r["kind"] for r in rows})
    by_kind = {k: sum(r["decision"] == "refused" for r in rows if r["kind"] == k) / sum(r["kind"] == k for r in rows)
               for k in kinds}
    leaked = [r["p"] for r in una if r["decision"] == "answered" and r["p"] is not None]
    stages = defaultdict(list)
    for r in rows:
        for stage, ms in (r.get("latency_ms") or {}).items():
            stages[stage].append(ms)
        stages["wall"].append(r["wall_ms"])  # the whole ask, end to end
    return {"n": len(rows), "answerable": len(ans), "unanswerable": len(una), "correct_refusal": ref, "false_refusal": fr,
            "strict": strict, "lenient": lenient, "bbs": bbs, "p_auc": p_auc(rows), "reader_auc": p_auc(rows, "reader_best"),
            "refused_by_kind": by_kind,
            "refusal_reasons": {k: dict(Counter(r["reason"] for r in rows if r["kind"] == k and r["decision"] == "refused"))
                                for k in kinds},
            "p_answered_unanswerable": [min(leaked), max(leaked)] if leaked else [], "tokens": statistics.median([r.get("tokens", 0) for r in rows]) if rows else 0,
            "latency_ms": {s: statistics.median(v) for s, v in sorted(stages.items())}}


def p_auc(rows: list[dict], key: str = "p") -> float:
    """How well P(sufficient) (or the reader's best P) separates answerable from unanswerable
    questions (ROC AUC; a question the gate refused before any P was computed counts as P = 0)."""
    rows = [r for r in rows if key == "p" or r.get(key) is not None]
    pos = [r.get(key) or 0.0 for r in rows if r["answerable"]]
    neg = [r.get(key) or 0.0 for r in rows if not r["answerable"]]
    if not pos or not neg:
        return float("nan")
    return sum((a > b) + 0.5 * (a == b) for a in pos for b in neg) / (len(pos) * len(neg))


# --------------------------------------------------------------------------------------------
# Stages


def stage_lobo(features: Path, reads: Path) -> dict:
    """Nested leave-books-out on the training books (pagerag.train.fit.nested), with the packaged
    model's RCS features, and the held-out reader's AUC."""
    from pagerag.generate.models import SUFFICIENCY, packaged
    from pagerag.train.books import TRAIN_BOOKS
    from pagerag.train.features import read_tables
    from pagerag.train.fit import nested, rcs_report
    from pagerag.train.reader_scores import read_scores
    from pagerag.train.stack import Config, load_examples

    config = packaged(SUFFICIENCY).training["config"]
    cfg = Config(rcs_features=config["rcs_features"], rcs_prior=config["rcs_prior"])
    books = list(TRAIN_BOOKS)
    examples = load_examples(read_tables(features, books), read_scores(reads, books))
    result = nested(examples, cfg, log=lambda m: print(m, file=sys.stderr, flush=True))
    readers = {}
    for name in ("written", "graphrag"):
        rows = [{"answerable": e.answerable, "reader_best": float(e.variants["default"].reads["p"].max(initial=0.0))}
                for e in examples if e.question_set == name]
        readers[name] = p_auc(rows, "reader_best")
    return {"all": result["all"], "by_kind": result["by_kind"], "by_set": result["by_set"], "per_book": result["per_book"],
            "chosen_per_fold": result["chosen_per_fold"], "reader_auc": readers, "p_auc": result["p_auc_all"],
            "rcs": rcs_report(examples, cfg.rcs_features, cfg.rcs_prior)}


def test_examples(corpus: Path):
    from pagerag.train.corpus import read_corpus

    return [e for e in read_corpus(corpus) if e.split == "test"]


def stage_test(corpus: Path, repos: Path, results: Results, system: str = "extractive", examples=None, llm=None) -> None:
    from pagerag.api import PageRAG

    rags: dict[str, PageRAG] = {}
    todo = [e for e in (examples or test_examples(corpus)) if (system, e.book, e.id) not in results.done]
    for i, e in enumerate(todo, 1):
        if e.book not in rags:
            rags.clear()
            rags[e.book] = PageRAG(repos / f"{e.book}.rag", pipeline=PIPELINE, llm=llm or "extractive")
        started = time.perf_counter()
        answer = rags[e.book].ask(e.question, exclude=set(e.mask_passage_ids))
        row = scored(system, e.book, e.id, e.kind, e.golds, answer, started)
        if system == "extractive":  # the RCS metrics: its features and the training tables' label; the reader's best P
            row.update(test_rcs_row(rags[e.book], e))
            row["reader_best"] = reader_best(rags[e.book], e.question, set(e.mask_passage_ids))
        results.add(row)
        if i % 25 == 0:
            print(f"{system} test {i}/{len(todo)}", file=sys.stderr, flush=True)


def test_rcs_row(rag, e) -> dict:
    """RCS features of the example's retrieval (its mask hidden) and its retrieval-success label,
    by the same rule as the training tables (pagerag.train.features.example_labels); no label
    when the corpus could not locate an answerable question's evidence."""
    from pagerag.generate.gate import retrieval_features
    from pagerag.train.features import example_labels

    retrieval = rag.retrieve(e.question, exclude=set(e.mask_passage_ids))
    label = example_labels(e, retrieval.evidence)["rcs"]
    return {"rcs_features": retrieval_features(retrieval, rag.state, rag.encode), "rcs_label": label} if label is not None else {}


def dev_items():
    from pagerag.evaluate.formats import load_questions

    return {name: load_questions(data_dir() / qa).items for name, (qa, _, _) in DEV.items()}


def dev_repo(name: str, repos: Path, work: Path) -> Path:
    from pagerag.build import build_repository
    from pagerag.settings import load_settings

    _, book, repo_name = DEV[name]
    if book is None:
        return repos / repo_name
    repo = work / repo_name
    if not (repo / "manifest.json").is_file():
        build_repository([data_dir() / book], repo, load_settings(environ={}), show_progress=False)
    return repo


def stage_dev(repos: Path, work: Path, results: Results, system: str = "extractive", llm=None, items=None,
              repo_of=None) -> None:
    """Each set's questions through `ask`; `repo_of(set name)` is its repository (default: the DEV
    sets')."""
    from pagerag.api import PageRAG
    from pagerag.generate.gate import retrieval_features

    for name, questions in (items or dev_items()).items():
        rag = PageRAG(repo_of(name) if repo_of else dev_repo(name, repos, work), pipeline=PIPELINE, llm=llm or "extractive")
        for q in questions:
            if (system, name, q.id) in results.done:
                continue
            started = time.perf_counter()
            answer = rag.ask(q.question)
            row = scored(system, name, q.id, "answerable" if q.answerable else "unanswerable", q.answers, answer, started)
            if system == "extractive":  # the RCS metrics: features and the retrieval-success label
                row["reader_best"] = reader_best(rag, q.question)
                retrieval = rag.retrieve(q.question)
                text = [" ".join(e.text.split()) for e in retrieval.evidence]
                row["rcs_features"] = retrieval_features(retrieval, rag.state, rag.encode)
                row["rcs_label"] = int(q.answerable and all(any(" ".join(x.split()) in t for t in text) for x in q.evidence))
            results.add(row)


def dev_sample(per_set: int, seed: int = 0) -> dict:
    """Per DEV set, `per_set` questions in its own mix (60% answerable), drawn with a fixed seed."""
    rng = random.Random(seed)
    return {name: drawn(items, per_set, rng) for name, items in dev_items().items()}


def train_sample(per_book: int, seed: int = 0) -> dict:
    """Per training book, `per_book` questions of its written set (qa/train) in the set's mix (60%
    answerable), drawn with a fixed seed: the natural questions of the books the decision is
    fitted on, to see a change there before any DEV run."""
    from pagerag.evaluate.formats import load_questions
    from pagerag.train.books import TRAIN_BOOKS

    rng = random.Random(seed)
    return {book: drawn(load_questions(data_dir() / "qa" / "train" / f"{book}.qa.jsonl").items, per_book, rng)
            for book in sorted(TRAIN_BOOKS)}


def drawn(items: list, k: int, rng: random.Random) -> list:
    """`k` of a set's questions in its mix of answerable and unanswerable ones."""
    answerable = [q for q in items if q.answerable]
    unanswerable = [q for q in items if not q.answerable]
    rng.shuffle(answerable)
    rng.shuffle(unanswerable)
    n = round(k * len(answerable) / len(items))
    return answerable[:n] + unanswerable[: k - n]


def llm_sample(corpus: Path, per_book: int, seed: int = 0):
    rng = random.Random(seed)
    out = []
    by_book = defaultdict(lambda: defaultdict(list))
    for e in sorted(test_examples(corpus), key=lambda e: e.id):
        by_book[e.book]["answerable" if e.answerable else "negative"].append(e)
    for book in sorted(by_book):
        for kind in ("answerable", "negative"):
            pool = by_book[book][kind]
            rng.shuffle(pool)
            out += pool[: per_book // 2]
    return out


def local_llm() -> dict:
    from pagerag.settings import load_settings

    gguf = load_settings().llm.gguf
    if not gguf:
        raise SystemExit("error: the llm stage needs llm.gguf (PAGERAG_LLM__GGUF=$(../shared/tools/local-llm))")
    return {"backend": "llamacpp", "gguf": gguf}


def stage_llm(corpus: Path, repos: Path, work: Path, results: Results, per_book: int, per_set: int, baseline: bool) -> None:
    llm = local_llm()
    sample, dev = llm_sample(corpus, per_book), dev_sample(per_set)
    stage_dev(repos, work, results, "llm", llm, dev)
    stage_test(corpus, repos, results, "llm", sample, llm)
    if baseline:
        plain_rag(corpus, repos, work, results, llm, sample, dev)


def plain_rag(corpus: Path, repos: Path, work: Path, results: Results, llm: dict, sample, dev: dict) -> None:
    """BM25 + dense fused (no graph, no rerank), the top passages up to 1,500 tokens, one answer
    prompt (no way out offered), no judge, no checks: what a plain RAG system would answer."""
    from pagerag.api import PageRAG
    from pagerag.generate.answer import llm_answer
    from pagerag.records import Answer, Excerpt, StageCost

    def ask(rag, question, exclude=None):
        r = rag.retrieve(question, exclude=exclude)
        excerpts = [Excerpt(e.passage_id, e.doc_id, e.file, e.start, e.end, e.text, n=i) for i, e in enumerate(r.evidence, 1)]
        checked, completion = llm_answer(rag.llm, question, excerpts, max_tokens=rag.settings.generate.answer_max_tokens,
                                         temperature=0.0, allow_refusal=False)
        cost = StageCost(completion.prompt_tokens, completion.completion_tokens, completion.latency_ms)
        return Answer(question, "answered", completion.text, None, backend="llamacpp", costs={"answer": cost})

    settings = {"retrieve": {"operators": ["text"], "budget_tokens": 1500}}
    for name, questions in dev.items():
        rag = PageRAG(dev_repo(name, repos, work), pipeline="passages-only", llm=llm, **settings)
        for q in questions:
            if q.answerable and ("plain-rag", name, q.id) not in results.done:
                started = time.perf_counter()
                results.add(scored("plain-rag", name, q.id, "answerable", q.answers, ask(rag, q.question), started))
    rags: dict = {}
    for e in sample:
        if e.answerable and ("plain-rag", e.book, e.id) not in results.done:
            if e.book not in rags:
                rags.clear()
                rags[e.book] = PageRAG(repos / f"{e.book}.rag", pipeline="passages-only", llm=llm, **settings)
            started = time.perf_counter()
            results.add(scored("plain-rag", e.book, e.id, "answerable", [e.answer], ask(rags[e.book], e.question), started))


# --------------------------------------------------------------------------------------------
# RCS on the test sets, and the tables


def rcs_table(scores_by_method: dict, labels) -> dict:
    import numpy as np

    from pagerag.confidence.metrics import auc_ac, brier, ece

    y = np.asarray(labels, dtype=float)
    out = {m: {"auc_ac": auc_ac(np.asarray(s, dtype=float), y)} for m, s in scores_by_method.items()}
    out["RCS"].update(ece=ece(np.asarray(scores_by_method["RCS"]), y), brier=brier(np.asarray(scores_by_method["RCS"]), y))
    out["oracle"] = {"auc_ac": auc_ac(y, y)}
    out["n"], out["base_rate"] = int(y.size), float(y.mean())
    return out


def rcs_methods(feature_rows: list[dict]) -> dict:
    from pagerag.generate.models import book_rcs_model

    model = book_rcs_model()
    return {"RCS": [model.score(f) for f in feature_rows], "max-score": [f["hop1_max"] for f in feature_rows],
            "entropy": [1 - f["hop1_entropy"] for f in feature_rows],
            "query-len-inv": [1 / (1 + f["query_len"] / 20) for f in feature_rows]}


def rcs_test(features: Path, results: Results | None = None, kinds: tuple[str, ...] | None = None) -> dict:
    """The RCS table on the test books (`kinds`: only examples of those kinds)."""
    from pagerag.train.books import TEST_BOOKS
    from pagerag.train.features import read_tables

    measured = [r for r in (results.rows if results else []) if r["system"] == "extractive" and r["set"] in TEST_BOOKS
                and "rcs_features" in r and (kinds is None or r["kind"] in kinds)]
    if measured:  # recorded by the test stage itself
        return rcs_table(rcs_methods([r["rcs_features"] for r in measured]), [r["rcs_label"] for r in measured])
    rows = [r["variants"]["default"] for r in read_tables(features, list(TEST_BOOKS)) if kinds is None or r["kind"] in kinds]
    rows = [v for v in rows if v["labels"]["rcs"] is not None]
    return rcs_table(rcs_methods([v["rcs"] for v in rows]), [v["labels"]["rcs"] for v in rows]) if rows else {}


def rcs_dev(results: Results) -> dict:
    rows = [r for r in results.rows if r["system"] == "extractive" and r["set"] in DEV and "rcs_features" in r]
    return rcs_table(rcs_methods([r["rcs_features"] for r in rows]), [r["rcs_label"] for r in rows]) if rows else {}


def num(x) -> str:
    return "n/a" if x is None or x != x else f"{x:.3f}"


def pct(x: float) -> str:
    return "n/a" if x != x else f"{100 * x:.1f}"


def print_tables(report: dict) -> None:
    print("| set | system | n | correct refusal | false refusal | strict | lenient | BBS | AUC of P(sufficient) "
          "| reader's AUC | median latency (ms) per stage |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for key, s in report["qa"].items():
        lat = ", ".join(f"{k} {v:.0f}" for k, v in s["latency_ms"].items())
        print(f"| {key[0]} | {key[1]} | {s['n']} | {pct(s['correct_refusal'])} | {pct(s['false_refusal'])} | "
              f"{pct(s['strict'])} | {pct(s['lenient'])} | {pct(s['bbs'])} | {num(s.get('p_auc'))} | "
              f"{num(s.get('reader_auc'))} | {lat} |")
    print("\nrefused, by example kind (%); P(sufficient) range of the unanswerable questions answered; refusal reasons:")
    for key, s in report["qa"].items():
        kinds = ", ".join(f"{k} {pct(v)}" for k, v in s.get("refused_by_kind", {}).items())
        leaked = s.get("p_answered_unanswerable") or []
        reasons = "; ".join(f"{k}: " + ", ".join(f"{why} {n}" for why, n in sorted(v.items()))
                            for k, v in s.get("refusal_reasons", {}).items() if v)
        print(f"  {key[0]} / {key[1]}: {kinds}" + (f"; answered unanswerable P {leaked[0]:.2f}-{leaked[1]:.2f}" if leaked else "")
              + (f" (refused for: {reasons})" if reasons else ""))
    for name in ("rcs_lobo", "rcs_test", "rcs_test (no borrowed)", "rcs_dev"):
        table = report.get(name) or {}
        if not table:
            continue
        print(f"\n{name}: n={table.get('n', '')} base rate {table.get('base_rate', 0):.3f}")
        for method, m in table.items():
            if isinstance(m, dict) and "auc_ac" in m:
                extra = f" ECE {m['ece']:.3f} Brier {m['brier']:.3f}" if "ece" in m else ""
                print(f"  {method:24s} AUC-AC {m['auc_ac']:.3f}{extra}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--features", type=Path, required=True,
                    help="Feature tables (python -m pagerag.train.features): training books for lobo, test books for the RCS.")
    ap.add_argument("--reads", type=Path, help="The reader's held-out scores on the tables (pagerag.train.reader_scores), for lobo.")
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--repos", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--work", type=Path, default=Path("/tmp/pagerag-book-qa"), help="Where the DEV-A repository is built.")
    ap.add_argument("--stages", default="lobo,test,dev")
    ap.add_argument("--llm-per-book", type=int, default=8, help="Test-book examples per book for the LLM (half answerable).")
    ap.add_argument("--llm-dev-per-set", type=int, default=20, help="DEV questions per set for the LLM (its own mix).")
    ap.add_argument("--llm-train-per-book", type=int, default=10,
                    help="Training-book questions per book for llm-train (their written sets' mix).")
    ap.add_argument("--train-repos", type=Path, help="The training books' repositories (Novel-*.rag), for llm-train.")
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--pair-out", type=Path, action="append", default=[],
                    help="A benchmarks/pair_qa.py --out folder (repeatable): its pair table is printed beside these, "
                         "with the wording-only baseline (docs/pairs.md).")
    ap.add_argument("--pipeline", help="Preset of the test and dev stages (default: the package's default); "
                                       "reader-decides reproduces runs made before the offline default changed.")
    args = ap.parse_args()
    global PIPELINE
    PIPELINE = args.pipeline
    data_dir()
    args.work.mkdir(parents=True, exist_ok=True)
    results = Results(args.out)
    stages = set(args.stages.split(","))
    report: dict = {}
    report_path = args.out / "report.json"
    if report_path.is_file():
        report = json.loads(report_path.read_text())
    if "lobo" in stages:
        report["lobo"] = stage_lobo(args.features, args.reads)
        report["rcs_lobo"] = report["lobo"]["rcs"]
    if "test" in stages:
        stage_test(args.corpus, args.repos, results)
        report["rcs_test"] = rcs_test(args.features, results)
        report["rcs_test (no borrowed)"] = rcs_test(args.features, results, ("answerable", "masked", "swapped"))
    if "dev" in stages:
        stage_dev(args.repos, args.work, results)
        report["rcs_dev"] = rcs_dev(results)
    if "llm" in stages:
        stage_llm(args.corpus, args.repos, args.work, results, args.llm_per_book, args.llm_dev_per_set, not args.no_baseline)
    elif "llm-dev" in stages or "llm-train" in stages:  # natural sets alone: a preset against another (--pipeline)
        if "llm-train" in stages:
            if args.train_repos is None:
                raise SystemExit("error: the llm-train stage needs --train-repos (a folder of Novel-*.rag)")
            stage_dev(args.repos, args.work, results, "llm", local_llm(), train_sample(args.llm_train_per_book),
                      repo_of=lambda book: args.train_repos / f"{book}.rag")
        if "llm-dev" in stages:
            stage_dev(args.repos, args.work, results, "llm", local_llm(), dev_sample(args.llm_dev_per_set))
    elif "baseline" in stages:  # the plain RAG baseline alone (it needs no fitted model)
        plain_rag(args.corpus, args.repos, args.work, results, local_llm(), llm_sample(args.corpus, args.llm_per_book),
                  dev_sample(args.llm_dev_per_set))
    from pagerag.train.books import TRAIN_BOOKS

    groups = defaultdict(list)
    for r in results.rows:
        where = "DEV" if r["set"] in DEV else "training books" if r["set"] in TRAIN_BOOKS else "test books"
        groups[(r["set"], r["system"])].append(r)
        groups[(where, r["system"])].append(r)
        if where == "test books" and r["kind"] != "borrowed":  # comparable with a corpus without them
            groups[("test books, no borrowed", r["system"])].append(r)
    report["qa"] = {k: summary(v) for k, v in sorted(groups.items())}
    if "lobo" in report:
        lobo = report["lobo"]
        report["qa"][("training books, nested leave-books-out", "extractive")] = {
            **lobo["all"], "latency_ms": {}, "refused_by_kind": lobo["by_kind"], "p_auc": lobo["p_auc"]}
        for name, label in (("written", "training books' written sets"), ("graphrag", "training books' GraphRAG-Bench corpus")):
            report["qa"][(label + ", nested leave-books-out", "extractive")] = {
                **lobo["by_set"][name], "latency_ms": {}, "reader_auc": lobo["reader_auc"][name]}
    report_path.write_text(json.dumps({**report, "qa": {" / ".join(k): v for k, v in report["qa"].items()}}, indent=1,
                                      default=float) + "\n")
    print_tables(report)
    print_pair_tables(args.pair_out)
    return 0


def print_pair_tables(outs: list[Path]) -> None:
    """Answer-or-refuse on pairs (benchmarks/pair_qa.py), the figure the natural sets cannot give:
    only reading gets both sides of a pair right; a decision from the wording gets none."""
    from pair_qa import Rows, print_pairs, summaries  # benchmarks/ is on sys.path

    for out in outs:
        print_pairs(summaries(Rows(out).rows), title=f"pairs ({out})")
    if outs:
        print("wording only: both right 0.0 on every pair set (the same decision on both sides; "
              "`python benchmarks/pair_qa.py report --wording`)")


if __name__ == "__main__":
    sys.exit(main())
