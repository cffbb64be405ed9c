"""A library grown from 1 to all 26 books of $PAGERAG_DATA_DIR, a few at a time.

    nice -n 19 python benchmarks/library.py --work /tmp/libbench            # local executor
    nice -n 19 python benchmarks/library.py --work /tmp/libbench-ray --executor ray
    python benchmarks/library.py --work DIR --cold-command ask              # once `pagerag ask` works again
    python benchmarks/library.py --work DIR --report                        # print the table of a run again
    python benchmarks/library.py --work DIR --remeasure                     # warm/cold/recall again, this code
    nice -n 19 python benchmarks/library.py --work DIR --redo-last          # the last add again, this code
    python benchmarks/library.py --work DIR --project RAY_DIR                # a 1,000-book library on 32 cores
    nice -n 19 python benchmarks/library.py --work DIR --split-words 1500 --steps 50x20 --ann-min-rows 5000
                                     # ~1,000 documents: every book cut into parts of ~1,500 words, adds of 50

Books: the 20 GraphRAG-Bench novels and the 6 others in books/; the first step builds one book
(Novel-44557, a test book), each later step runs `pagerag add` on the next few. Per step:
  add s/100k   wall seconds of that step's build or add per 100k words it added
  peak RSS     of the add process (os.wait4), MB
  disk         the repository's size on disk, MB
  warm p50/p95 `retrieve` (the full pipeline's `total` timing) over the fixed question set of the
               books in the library: up to --per-book GraphRAG-Bench questions with evidence per
               novel, plus DEV-A (qa/christmas_carol.qa.jsonl) once A Christmas Carol is in
  cold         wall time of a new `pagerag retrieve` process (--cold-command ask: `pagerag ask`),
               median of 3 questions
  recall       evidence recall at the budget (a statement counts as recalled when 60% of its content
               words are in one returned span, as in benchmarks/retrieval.py; DEV-A's quotes verbatim);
               "first book" is the first book's questions alone: at step 1 that is its one-book repository
  ANN r@10     with an ANN index (past embed.ann_min_rows; --ann-min-rows), the overlap of its top 10
               with exact search over the questions' vectors
  exact search with an ANN index, warm p50/p95 again with retrieve.dense_search = memory (exact
               search over the vectors in memory, what the default does below 100,000 passages)
With --split-words N every book is cut at paragraph ends into documents of about N words
(<work>/parts/<book>-pNNN.txt, a book's parts in order, books in the order above), and --steps
counts documents (`50x20`: twenty adds of 50); a book's questions join the fixed set once its last
part is in, and its "own book" is any of its parts. The table then also gives each add's driver
seconds (the global stages: lexical index, raw graph, governance, communities, entity vectors).
Everything is appended to <work>/library.jsonl as it goes, so a partial run is a partial table.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
FIRST = "Novel-44557"
STEPS = (1, 1, 2, 3, 4, 5, 5, 5)  # books added per step: 1 → 26


def books(data_dir: Path) -> list[Path]:
    novels = sorted((data_dir / "graphrag-bench-novel" / "texts").glob("Novel-*.txt"))
    others = sorted(p for p in (data_dir / "books").glob("*.txt") if "README" not in p.name)
    first = [p for p in novels if p.stem == FIRST]
    rest = [p for p in novels if p.stem != FIRST]
    # others interleaved with the novels, so every step mixes kinds of book
    mixed: list[Path] = []
    while rest or others:
        mixed += rest[:3]
        rest = rest[3:]
        if others:
            mixed.append(others.pop(0))
    return first + mixed


def split_books(all_books: list[Path], words: int, out: Path) -> list[Path]:
    """Each book cut at sentence ends (pagerag's sentence splitter; the novels are one line each)
    into parts of about `words` words, the book's own text between the cuts (a short remainder
    joins the last part); written once to `out`; the parts in book order."""
    sys.path.insert(0, str(REPO_ROOT))
    from pagerag.text.sentences import split_sentences

    out.mkdir(parents=True, exist_ok=True)
    parts: list[Path] = []
    for book in all_books:
        text = book.read_text(encoding="utf-8", errors="replace")
        cuts, count = [0], 0
        for start, end in split_sentences(text):
            count += len(text[start:end].split())
            if count >= words:
                cuts.append(end)
                count = 0
        if count < words // 3 and len(cuts) > 1:
            cuts.pop()  # the remainder joins the last part
        cuts.append(len(text))
        for i, (a, b) in enumerate(zip(cuts, cuts[1:]), start=1):
            path = out / f"{book.stem}-p{i:03d}.txt"
            if not path.is_file():
                path.write_text(text[a:b].strip() + "\n", encoding="utf-8")
            parts.append(path)
    return parts


def book_of(path: Path, split: bool) -> str:
    return path.stem.rsplit("-p", 1)[0] if split else path.stem


def step_sizes(spec: str) -> list[int]:
    """`1,1,2` or `50x20` (twenty steps of 50)."""
    if "x" in spec:
        size, count = spec.split("x")
        return [int(size)] * int(count)
    return [int(s) for s in spec.split(",")]


def questions(data_dir: Path, stem: str, per_book: int) -> list[dict]:
    if stem == "christmas_carol":
        out = []
        for line in (data_dir / "qa" / "christmas_carol.qa.jsonl").read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            if row.get("answerable") and row.get("evidence"):
                out.append({"book": stem, "question": row["question"], "gold": row["evidence"], "match": "exact"})
        return out[:per_book]
    rows = json.loads((data_dir / "graphrag-bench-novel" / "questions.json").read_text(encoding="utf-8"))
    rows = sorted((r for r in rows if r.get("source") == stem and any(e.strip() for e in r.get("evidence") or [])),
                  key=lambda r: r["id"])
    return [{"book": stem, "question": r["question"], "gold": [e for e in r["evidence"] if e.strip()], "match": "fuzzy"}
            for r in rows[:per_book]]


def run_with_rss(cmd: list[str], env: dict) -> tuple[float, float, int, str]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - t0, usage.ru_maxrss / 1024, proc.returncode, err[-400:]


WARM = r'''
import json, statistics, sys, time
import numpy as np
from pagerag.api import PageRAG
from pagerag.evaluate.scoring import statement_located
repo, qfile = sys.argv[1], sys.argv[2]
qs = [json.loads(l) for l in open(qfile)]
rag = PageRAG(repo, pipeline="full", llm="extractive")
rag.retrieve("Who is the main character?")
rows = []
for q in qs:
    r = rag.retrieve(q["question"])
    spans = [e.text for e in r.evidence]
    if q["match"] == "exact":
        hit = [any(" ".join(g.split()) in " ".join(s.split()) for s in spans) for g in q["gold"]]
    else:
        hit = [statement_located(g, spans) for g in q["gold"]]
    rows.append({"book": q["book"], "ms": r.timings_ms["total"], "recall": sum(hit) / len(hit),
                 "own_book": any(e.doc_id == q["doc_id"] or e.doc_id.startswith(q["doc_id"] + "-p") for e in r.evidence)})
ann = None
state = rag.state
if (state.manifest.get("ann") or {}).get("rows"):
    vecs = rag.encode([q["question"] for q in qs])
    overlap = []
    for v in vecs:
        exact = set(np.argsort(-(state.vectors @ v))[:10].tolist())
        got = {r for r, _ in state.repo.store.search("passages", v, 10)}
        overlap.append(len(exact & got) / 10)
    ann = sum(overlap) / len(overlap)
print(json.dumps({"rows": rows, "ann_recall10": ann, "passages": len(state.passages)}))
'''


def warm_and_recall(repo: Path, qs: list[dict], work: Path, env: dict) -> dict:
    qfile = work / "questions.jsonl"
    qfile.write_text("".join(json.dumps(q) + "\n" for q in qs), encoding="utf-8")
    out = subprocess.run([sys.executable, "-c", WARM, str(repo), str(qfile)], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"warm retrieval failed: {out.stderr[-600:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def exact_search_ms(repo: Path, qs: list[dict], work: Path, env: dict, warm: dict) -> dict:
    """With an ANN index, warm retrieval again with dense search exact over the vectors in memory
    (retrieve.dense_search = memory; what `auto` does below embed.ann_min_rows): the index's cost."""
    if warm["ann_recall10"] is None:
        return {}
    ms = [r["ms"] for r in warm_and_recall(repo, qs, work, {**env, "PAGERAG_RETRIEVE__DENSE_SEARCH": "memory"})["rows"]]
    return {"p50_memory_ms": pct(ms, 0.5), "p95_memory_ms": pct(ms, 0.95)}


def cold(repo: Path, qs: list[dict], command: str, env: dict) -> float:
    times = []
    for q in qs[:3]:
        cmd = [sys.executable, "-m", "pagerag.cli", command, q["question"], "--repo", str(repo)]
        if command == "ask":
            cmd += ["--llm", "extractive"]
        t0 = time.perf_counter()
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            return float("nan")
        times.append(time.perf_counter() - t0)
    return statistics.median(times) if times else float("nan")


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))] if values else float("nan")


def disk_mb(path: Path) -> float:
    seen, total = set(), 0
    for here, _, names in os.walk(path):
        for name in names:
            st = os.stat(Path(here) / name)
            if st.st_ino not in seen:
                seen.add(st.st_ino)
                total += st.st_size
    return total / 1e6


TEXT_STAGES = ("load", "chunk", "embed", "extract")  # per document, spread over the executor's workers


def have_now(position: int, all_books: list) -> int:
    """The documents in the library after the step (the last step may add fewer than its size)."""
    return min(position, len(all_books))


def driver_share(r: dict) -> float:
    """An add's seconds less its text stages': what the driver does over the library (issue 30's
    growth measure, from the 2nd add to the last)."""
    return r["seconds"] - sum(r["stage_seconds"].get(k, 0) for k in TEXT_STAGES)


def print_table(rows: list[dict]) -> None:
    print("| step | books | words | passages | add s/100k words | peak RSS MB | disk MB | warm p50 / p95 ms | "
          "cold s | recall (all) | recall (first book) | own book in evidence | ANN r@10 | warm p50 / p95 ms, exact search |"
          " add s | driver s | driver share s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        driver = f" {r['seconds']:.0f} | {r['driver_s']:.1f} | {driver_share(r):.1f} |" if "driver_s" in r else " | | |"
        ann = f"{r['ann_recall10']:.3f}" if r.get("ann_recall10") is not None else "exact"
        memory = f"{r['p50_memory_ms']:.0f} / {r['p95_memory_ms']:.0f}" if "p50_memory_ms" in r else ""
        print(f"| {r['step']} | {r['books']} | {r['words']:,} | {r['passages']:,} | {r['s_per_100k']:.1f} | "
              f"{r['peak_rss_mb']:.0f} | {r['disk_mb']:.0f} | {r['p50_ms']:.0f} / {r['p95_ms']:.0f} | {r['cold_s']:.2f} | "
              f"{r['recall_all']:.3f} | {r['recall_first']:.3f} | {r['own_book']:.2f} | {ann} | {memory} |" + driver)
    timed = [r for r in rows if "driver_s" in r and "stage_seconds" in r]
    if len(timed) > 2:
        second, last = timed[1], timed[-1]
        print(f"\ndriver share (add - text stages): {driver_share(second):.1f} s at add {second['step']} -> "
              f"{driver_share(last):.1f} s at add {last['step']} ({driver_share(last) / driver_share(second):.1f}x)")
        if len(timed) > 5:  # a line through fewer adds says little
            documents = dict(zip((r["step"] for r in rows), itertools.accumulate(r["added"] for r in rows)))
            print(growth_line(timed[1:], [documents[r["step"]] for r in timed[1:]]))


def growth_line(rows: list[dict], documents: list[int]) -> str:
    """A least-squares line through the adds' driver shares against the library's documents after
    each (share = fixed + per_doc * documents), and the per-document cost at which the last add
    would cost 2x the first of them: growth <= 2x needs per_doc * (D_last - 2 D_first) <= fixed."""
    import numpy as np

    docs = np.array(documents, float)  # in the library after each add
    share = np.array([driver_share(r) for r in rows])
    per_doc, fixed = np.polyfit(docs, share, 1)
    allowed = fixed / max(docs[-1] - 2 * docs[0], 1.0)
    return (f"a line through adds {rows[0]['step']}-{rows[-1]['step']}: {fixed:.2f} s + {1000 * per_doc:.1f} ms per "
            f"document of the library; <= 2x from {docs[0]:.0f} to {docs[-1]:.0f} documents needs <= "
            f"{1000 * allowed:.1f} ms per document with that fixed part ({per_doc / allowed:.1f}x less)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", type=Path, required=True, help="Where the library and the results go.")
    ap.add_argument("--data", type=Path, default=Path(os.environ.get("PAGERAG_DATA_DIR", REPO_ROOT.parent / "shared" / "data")))
    ap.add_argument("--executor", default="local", choices=("local", "ray"))
    ap.add_argument("--ray-address", default=None)
    ap.add_argument("--cold-command", default="retrieve", choices=("retrieve", "ask"),
                    help="What a cold process runs: retrieve (until `ask` works on this commit) or ask.")
    ap.add_argument("--per-book", type=int, default=6, help="Questions per book in the fixed set.")
    ap.add_argument("--ann-min-rows", type=int, default=None, help="embed.ann_min_rows for the adds (default: the setting's).")
    ap.add_argument("--steps", default=",".join(map(str, STEPS)), help="Books (documents with --split-words) added "
                    "per step: 1,1,2 or 50x20.")
    ap.add_argument("--split-words", type=int, default=None, help="Cut every book into documents of about this many "
                    "words first (a library of ~1,000 documents at 1,500).")
    ap.add_argument("--report", action="store_true", help="Only print the table of <work>/library.jsonl.")
    ap.add_argument("--remeasure", action="store_true", help="Measure the grown library's warm retrieval, cold "
                    "process and recall again with this checkout's code (no add); appended to <work>/remeasure.jsonl.")
    ap.add_argument("--redo-last", action="store_true", help="The last step's add again with this checkout's code: "
                    "a copy of the grown library, its last books removed (`pagerag remove`), then added back "
                    "(`pagerag add`, timed, peak RSS); appended to <work>/redo.jsonl.")
    ap.add_argument("--project", type=Path, default=None, help="Project a 1,000-book library on a 32-core cluster from "
                    "this local run (<work>) and a Ray run's directory (its per-task stage seconds).")
    ap.add_argument("--books", type=int, default=1000)
    ap.add_argument("--words-per-book", type=int, default=100_000)
    ap.add_argument("--cores", type=int, default=32)
    ap.add_argument("--batch", type=int, default=50, help="Books per add in the projection.")
    ap.add_argument("--price", type=float, default=1.36, help="USD per hour of a 32-vCPU machine (on-demand, "
                    "e.g. a c6i.8xlarge in us-east-1 at the time of writing); the cluster is charged while the driver works.")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    log = args.work / "library.jsonl"
    if args.report:
        print_table([json.loads(l) for l in log.read_text().splitlines()])
        return
    if args.project:
        project([json.loads(l) for l in log.read_text().splitlines()],
                [json.loads(l) for l in (args.project / "library.jsonl").read_text().splitlines()], args)
        return
    repo = args.work / "library.rag"
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    if args.remeasure:
        remeasure(repo, [json.loads(l) for l in log.read_text().splitlines()][-1], args, env)
        return
    all_books = books(args.data)
    split = args.split_words is not None
    if split:
        all_books = split_books(all_books, args.split_words, args.work / "parts")
    if args.redo_last:
        redo_last(repo, [json.loads(l) for l in log.read_text().splitlines()], all_books, args, env)
        return
    done_rows = [json.loads(l) for l in log.read_text().splitlines()] if log.is_file() else []
    have = sum(r["added"] for r in done_rows)
    qs: list[dict] = []
    position = 0
    first_book = book_of(all_books[0], split)
    for step, size in enumerate(step_sizes(args.steps), start=1):
        batch = all_books[position : position + size]
        position += size
        for i, doc in enumerate(batch):
            book = book_of(doc, split)
            following = all_books[position - size + i + 1] if position - size + i + 1 < len(all_books) else None
            if following is not None and book_of(following, split) == book:
                continue  # its questions join once the book's last part is in
            if not any(q["book"] == book for q in qs):
                qs += [{**q, "doc_id": book.lower()} for q in questions(args.data, book, args.per_book)]
        if position <= have:
            continue  # resumed: this step is in the log
        if not batch:
            break
        if not qs:  # no book complete yet: the first book's questions, for its parts in
            qs = [{**q, "doc_id": first_book.lower()} for q in questions(args.data, first_book, args.per_book)]
        words = sum(len(b.read_text(encoding="utf-8", errors="replace").split()) for b in batch)
        verb = "build" if step == 1 and not repo.exists() else "add"
        cmd = [sys.executable, "-m", "pagerag.cli", verb, *map(str, batch), "--repo", str(repo), "-q",
               "--executor", args.executor]
        if args.ray_address:
            cmd += ["--ray-address", args.ray_address]
        if args.ann_min_rows is not None:
            cmd += ["--set", f"embed.ann_min_rows={args.ann_min_rows}"]
        wall, rss, code, err = run_with_rss(cmd, env)
        if code != 0:
            raise SystemExit(f"step {step}: {verb} failed ({code}): {err}")
        warm = warm_and_recall(repo, qs, args.work, env)
        ms = [r["ms"] for r in warm["rows"]]
        first = [r["recall"] for r in warm["rows"] if r["book"] == first_book]
        manifest = json.loads((repo / "manifest.json").read_text())
        stage_seconds = manifest.get("stage_seconds", {})
        row = {"step": step, "added": len(batch), "books": have_now(position, all_books),
               "driver_s": round(sum(stage_seconds.get(k, 0) for k in DRIVER_STAGES), 1), "words": manifest["stats"]["words"],
               "passages": warm["passages"], "step_words": words, "seconds": round(wall, 1),
               "s_per_100k": wall / words * 1e5, "peak_rss_mb": rss, "disk_mb": disk_mb(repo),
               "p50_ms": pct(ms, 0.5), "p95_ms": pct(ms, 0.95), "cold_s": cold(repo, qs, args.cold_command, env),
               "recall_all": statistics.mean(r["recall"] for r in warm["rows"]),
               "recall_first": statistics.mean(first) if first else float("nan"),
               "own_book": statistics.mean(r["own_book"] for r in warm["rows"]),
               "questions": len(qs), "ann_recall10": warm["ann_recall10"], "executor": args.executor,
               "stage_seconds": manifest.get("stage_seconds", {}), "load": os.getloadavg()[0],
               "per_book_recall": _per_book(warm["rows"]), **exact_search_ms(repo, qs, args.work, env, warm)}
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")
        print(f"step {step}: {position} books, {row['seconds']}s, load {row['load']:.2f}", flush=True)
    print_table([json.loads(l) for l in log.read_text().splitlines()])


def remeasure(repo: Path, last: dict, args, env: dict) -> None:
    """The last step's measurements again, on the same library and questions, with this code."""
    qs = [json.loads(l) for l in (args.work / "questions.jsonl").read_text(encoding="utf-8").splitlines()]
    warm = warm_and_recall(repo, qs, args.work, env)
    ms = [r["ms"] for r in warm["rows"]]
    first = [r["recall"] for r in warm["rows"] if r["book"] == FIRST]
    commit = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    row = {**last, "commit": commit, "p50_ms": pct(ms, 0.5), "p95_ms": pct(ms, 0.95),
           "cold_s": cold(repo, qs, args.cold_command, env), "recall_all": statistics.mean(r["recall"] for r in warm["rows"]),
           "recall_first": statistics.mean(first) if first else float("nan"),
           "own_book": statistics.mean(r["own_book"] for r in warm["rows"]), "ann_recall10": warm["ann_recall10"],
           "load": os.getloadavg()[0], "per_book_recall": _per_book(warm["rows"]),
           **exact_search_ms(repo, qs, args.work, env, warm)}
    with open(args.work / "remeasure.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps(row) + "\n")
    print(f"remeasured at {commit} (the add's own columns are the growth run's):")
    print_table([row])


def redo_last(repo: Path, rows: list[dict], all_books: list[Path], args, env: dict) -> None:
    """The last step's add again, on a copy of the grown library less that step's books."""
    import shutil

    last = rows[-1]
    batch = all_books[sum(r["added"] for r in rows[:-1]) : sum(r["added"] for r in rows)]
    copy = args.work / "redo" / "library.rag"
    shutil.rmtree(copy.parent, ignore_errors=True)
    copy.parent.mkdir(parents=True)
    shutil.copytree(repo, copy, symlinks=True)
    settings = ["--set", f"embed.ann_min_rows={args.ann_min_rows}"] if args.ann_min_rows is not None else []
    removed = subprocess.run([sys.executable, "-m", "pagerag.cli", "remove", *[b.stem.lower() for b in batch],
                              "--repo", str(copy), "-q", *settings], env=env, capture_output=True, text=True)
    if removed.returncode != 0:
        raise SystemExit(f"remove failed: {removed.stderr[-400:]}")
    cmd = [sys.executable, "-m", "pagerag.cli", "add", *map(str, batch), "--repo", str(copy), "-q",
           "--executor", args.executor, *settings]
    wall, rss, code, err = run_with_rss(cmd, env)
    if code != 0:
        raise SystemExit(f"add failed ({code}): {err}")
    qs = [json.loads(l) for l in (args.work / "questions.jsonl").read_text(encoding="utf-8").splitlines()]
    warm = warm_and_recall(copy, qs, args.work, env)
    ms = [r["ms"] for r in warm["rows"]]
    first = [r["recall"] for r in warm["rows"] if r["book"] == FIRST]
    manifest = json.loads((copy / "manifest.json").read_text())
    commit = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    row = {**last, "commit": commit, "seconds": round(wall, 1), "s_per_100k": wall / last["step_words"] * 1e5,
           "peak_rss_mb": rss, "disk_mb": disk_mb(copy), "passages": warm["passages"],
           "p50_ms": pct(ms, 0.5), "p95_ms": pct(ms, 0.95), "cold_s": cold(copy, qs, args.cold_command, env),
           "recall_all": statistics.mean(r["recall"] for r in warm["rows"]),
           "recall_first": statistics.mean(first) if first else float("nan"),
           "own_book": statistics.mean(r["own_book"] for r in warm["rows"]), "ann_recall10": warm["ann_recall10"],
           "stage_seconds": manifest.get("stage_seconds", {}), "load": os.getloadavg()[0],
           "per_book_recall": _per_book(warm["rows"]), **exact_search_ms(copy, qs, args.work, env, warm)}
    with open(args.work / "redo.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps(row) + "\n")
    print(f"the last step's add again at {commit} ({', '.join(b.stem for b in batch)} into a copy without them):")
    print_table([row])


DRIVER_STAGES = ("index", "raw_graph", "govern", "communities", "entity_vectors")


def project(local: list[dict], ray_rows: list[dict], args) -> None:
    """Text stages: CPU-seconds per 100k words, summed over the Ray tasks (process time, so the
    other jobs on this machine count less than in wall time), spread over the cluster's cores at
    80% efficiency. The driver's share of an add (the add less its text stages): a least-squares
    line in the library's size through the local run's adds. Peak RSS likewise."""
    import numpy as np

    task = sum(v for r in ray_rows for k, v in r["stage_seconds"].items() if k.startswith("ray_") and k.endswith("_task_s"))
    per_100k = task / sum(r["step_words"] for r in ray_rows) * 1e5
    stages = {k: sum(r["stage_seconds"].get(f"ray_{k}_task_s", 0) for r in ray_rows) / sum(r["step_words"] for r in ray_rows) * 1e5
              for k in ("chunk", "embed", "windows", "extract")  # "windows": rows from before they were pooled in "embed"
              if any(f"ray_{k}_task_s" in r["stage_seconds"] for r in ray_rows)}
    local = local[1:] if len(local) > 2 else local  # the first step is a build (and pays one-time exports)
    x = np.array([r["words"] for r in local], float)
    graph = np.array([sum(r["stage_seconds"].get(k, 0) for k in DRIVER_STAGES) for r in local])
    # the driver's whole share of an add (the add less its text stages: the graph stages, and the
    # reading, writing, validating and publishing of the version and its query snapshot)
    driver = np.array([driver_share(r) for r in local])
    rss = np.array([r["peak_rss_mb"] for r in local])
    ga, gb = np.polyfit(x, graph, 1)
    a, b = np.polyfit(x, driver, 1)
    ra, rb = np.polyfit(x, rss, 1)
    total_words = args.books * args.words_per_book
    step = args.batch * args.words_per_book
    text_h = per_100k * total_words / 1e5 / (args.cores * 0.8) / 3600
    driver_h = sum(a * w + b for w in range(step, total_words + 1, step)) / 3600
    print(f"text stages: {per_100k:.1f} CPU-s per 100k words (" + ", ".join(f"{k} {v:.1f}" for k, v in stages.items()) +
          f"), measured over {len(ray_rows)} Ray steps")
    print(f"driver share per add: {a * 1e5:.2f} s per 100k words of library + {b:.1f} s (fit over {len(local)} local adds; "
          f"its graph stages alone {ga * 1e5:.2f} s + {gb:.1f} s)")
    print(f"peak RSS: {ra * 1e5:.1f} MB per 100k words of library + {rb:.0f} MB")
    print(f"{args.books} books x {args.words_per_book:,} words, adds of {args.batch} books, {args.cores} cores:")
    print(f"  text stages {text_h:.1f} h, driver {driver_h:.1f} h (the last add's {((a * total_words + b) / 3600):.2f} h), "
          f"total {text_h + driver_h:.1f} h, about ${(text_h + driver_h) * args.price:.0f} at ${args.price}/h")
    print(f"  one build of all of it: text {text_h:.1f} h + driver {(a * total_words + b) / 3600:.1f} h; "
          f"driver peak RSS about {(ra * total_words + rb) / 1000:.0f} GB")


def _per_book(rows: list[dict]) -> dict[str, float]:
    by: dict[str, list[float]] = {}
    for r in rows:
        by.setdefault(r["book"], []).append(r["recall"])
    return {b: round(statistics.mean(v), 3) for b, v in by.items()}


if __name__ == "__main__":
    main()
