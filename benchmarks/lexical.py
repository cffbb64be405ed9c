"""Lexical index benchmark: bm25s (today's index) against LanceDB's native full-text index.

    nice -n 10 python benchmarks/lexical.py --work /tmp/lexical-bench [--json out.json]

Passages: the project's chunker (default settings, the embedding model's wordpiece cap) over the
15 training books (docs DESIGN.md, "Fitting and testing"), one library of them all. Questions: the
GraphRAG-Bench questions of those books with evidence; a statement is recalled when one of the
top-k passages locates it (pagerag.evaluate.scoring.statement_located, as benchmarks/retrieval.py
scores the test books). Recall@k is the mean over questions of the share of evidence recalled, for
lexical search alone over the whole library (k = 10 and 20).

Indexes: bm25s as pagerag.index.lexical.BM25Index builds it (English stop words, \\b\\w\\w+\\b, no
stemming); the same BM25 as one shard per book, merged at query time (ShardedBM25, what pagerag
keeps since), checked against bm25s (identical top 20, largest score difference); LanceDB FTS
(native inverted index) in several tokenizer settings, queried with the question as bm25s
tokenizes it (so both see the same query terms). Timed (the fastest of 3): a build over all but
the last --append books, then adding those (bm25s: a rebuild over all, what an add did before
the shards; shards: the new book's shard, and apart the reader's load of all shards; LanceDB:
table.add + optimize), and per-query latency (p50) at k = 20. Last, a LanceDB passage table with
vectors grown a book at a time: the bytes each add + optimize writes.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

TRAIN_BOOKS = ("Novel-10146", "Novel-10321", "Novel-10356", "Novel-2544", "Novel-25646", "Novel-26183",
               "Novel-29973", "Novel-30752", "Novel-40700", "Novel-4128", "Novel-41603", "Novel-47558",
               "Novel-51410", "Novel-58553", "Novel-8559")
KS = (10, 20)
# LanceDB settings tried: the first is as near bm25s's tokenizer as LanceDB goes
FTS_VARIANTS = {
    "bm25s-like": None,
    "no-stop-words": dict(stem=False, remove_stop_words=False, ascii_folding=False),
    "default (stem, its stop words)": dict(stem=True, remove_stop_words=True, ascii_folding=True),
}
REPEATS = 3  # build and append timings: the fastest of these (the machine is shared)


def library_passages(data_dir: Path) -> list[tuple[str, str]]:
    """(book, passage text) for every passage of the training books, in book order."""
    from pagerag.index.embedding_model import get_wordpiece_counter
    from pagerag.settings import load_settings
    from pagerag.text.chunk import chunk_document
    from pagerag.text.load import load_sources

    settings = load_settings(environ={})
    counter = get_wordpiece_counter(settings.embed.model)
    texts = data_dir / "graphrag-bench-novel" / "texts"
    docs = load_sources([texts / f"{b}.txt" for b in TRAIN_BOOKS], settings.chunk)
    return [(doc.doc_id, p.text) for doc in docs for p in chunk_document(doc, settings.chunk, counter)]


def training_questions(data_dir: Path) -> list[dict]:
    sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
    from retrieval import bench_questions

    return [q for book in TRAIN_BOOKS for q in bench_questions(data_dir, book)]


def query_tokens(question: str) -> list[str]:
    from pagerag.index.lexical import tokenize

    return tokenize([question])[0]


# --------------------------------------------------------------------------------------------
# Indexes


def bm25s_like() -> dict:
    """LanceDB's tokenizer set as near bm25s's as it goes: bm25s's English stop words, no
    stemming, no accent folding, lower case. (LanceDB keeps one-letter tokens, which bm25s's
    pattern drops; the query never holds one, see LanceFts.search, so they only lengthen
    documents.)"""
    from bm25s.stopwords import STOPWORDS_EN

    return dict(base_tokenizer="simple", lower_case=True, stem=False, remove_stop_words=True,
                custom_stop_words=list(STOPWORDS_EN), ascii_folding=False, with_position=False)


class Bm25s:
    name = "bm25s"

    def build(self, texts: list[str]) -> None:
        from pagerag.index.lexical import BM25Index

        self.texts = list(texts)
        self.index = BM25Index.build(self.texts)

    def append(self, texts: list[str]) -> None:  # what an add does today: everything again
        self.build(self.texts + list(texts))

    def search(self, question: str, k: int) -> tuple[list[int], list[float]]:
        rows, scores = self.index.search(question, k)
        return rows.tolist(), scores.tolist()


class Shards:
    """What pagerag does: one bm25s-scored shard per book (pagerag.index.lexical); an add writes
    the new book's shard only, and a reader merges the shards when it loads them."""
    name = "bm25s shards (per book)"

    def __init__(self, work: Path, books: list[str]):
        self.work, self.books = work, books

    def build(self, texts: list[str]) -> None:
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)
        self.n = 0
        self._write(texts)

    def append(self, texts: list[str]) -> None:
        self._write(texts)

    def _write(self, texts: list[str]) -> None:
        from pagerag.index.lexical import save_shard

        books = self.books[self.n:self.n + len(texts)]
        for book in dict.fromkeys(books):
            save_shard(self.work / f"{book}.npz", [t for t, b in zip(texts, books) if b == book])
        self.n += len(texts)
        self.index = None  # loaded when first searched (a reader's cost, timed apart)

    def load(self):
        from pagerag.index.lexical import ShardedBM25

        self.index = ShardedBM25.load(self.work, self.books[:self.n])
        return self.index

    def search(self, question: str, k: int) -> tuple[list[int], list[float]]:
        rows, scores = (self.index or self.load()).search(question, k)
        return rows.tolist(), scores.tolist()


class LanceFts:
    def __init__(self, work: Path, name: str, options: dict | None):
        self.name, self.work = f"lancedb FTS, {name}", work
        self.options = bm25s_like() if options is None else dict(base_tokenizer="simple", **options)

    def build(self, texts: list[str]) -> None:
        import lancedb
        from lancedb.index import FTS

        shutil.rmtree(self.work, ignore_errors=True)
        self.table = lancedb.connect(str(self.work)).create_table("passages", data=self._rows(texts, 0))
        self.table.create_index("text", config=FTS(**self.options))
        self.n = len(texts)

    @staticmethod
    def _rows(texts: list[str], first: int) -> list[dict]:
        return [{"row": first + i, "text": t} for i, t in enumerate(texts)]

    def append(self, texts: list[str]) -> None:
        self.table.add(self._rows(texts, self.n))
        self.table.optimize()  # folds the new rows into the inverted index (no rebuild)
        self.n += len(texts)

    def search(self, question: str, k: int) -> tuple[list[int], list[float]]:
        terms = query_tokens(question)
        if not terms:
            return [], []
        hits = self.table.search(" ".join(terms), query_type="fts").limit(k).select(["row", "_score"]).to_arrow()
        return hits["row"].to_pylist(), hits["_score"].to_pylist()


# --------------------------------------------------------------------------------------------
# Measures


def timed_build(index, texts: list[str], append_from: int) -> dict:
    """The fastest of REPEATS builds over texts[:append_from] and appends of the rest."""
    build, append = [], []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        index.build(texts[:append_from])
        t1 = time.perf_counter()
        index.append(texts[append_from:])
        build.append(t1 - t0)
        append.append(time.perf_counter() - t1)
    return {"build_s": round(min(build), 3), "append_s": round(min(append), 3), "appended_passages": len(texts) - append_from}


def same_as_full_build(grown, work: Path, texts: list[str], questions: list[dict], k: int = 20) -> dict:
    """The appended index against one built over all passages at once: identical top-k lists
    (rows and scores), and the largest score difference where the rows are the same."""
    full = LanceFts(work, "full", {})
    full.options = grown.options  # the same tokenizer
    full.build(texts)
    same, diff = 0, 0.0
    for q in questions:
        (ra, sa), (rb, sb) = grown.search(q["question"], k), full.search(q["question"], k)
        same += ra == rb
        if ra == rb and sa:
            diff = max(diff, max(abs(x - y) for x, y in zip(sa, sb)))
    return {"appended_equals_full_build": round(same / len(questions), 4), "max_score_diff_vs_full": diff}


def recall(index, passages: list[str], questions: list[dict]) -> dict:
    from pagerag.evaluate.scoring import statement_located

    out, latencies = {}, []
    per_k = {k: [] for k in KS}
    for q in questions:
        t0 = time.perf_counter()
        rows, _ = index.search(q["question"], max(KS))
        latencies.append((time.perf_counter() - t0) * 1000)
        for k in KS:
            spans = [passages[r] for r in rows[:k]]
            per_k[k].append(sum(statement_located(s, spans) for s in q["gold"]) / len(q["gold"]))
    for k in KS:
        out[f"recall@{k}"] = round(statistics.mean(per_k[k]), 4)
    out["query_p50_ms"] = round(statistics.median(latencies), 2)
    return out


def score_agreement(a, b, questions: list[dict], k: int = 20) -> dict:
    """How far b's top-k is from a's, as the ranker's features see it (pagerag.retrieve.pool):
    the overlap of the top-k sets, the "bm25" feature (score / the question's top score) on shared
    passages, and how many shared passages change rank ("bm25_rr")."""
    overlap, rel, moved = [], [], []
    for q in questions:
        ra, sa = a.search(q["question"], k)
        rb, sb = b.search(q["question"], k)
        if not ra or not rb:
            continue
        overlap.append(len(set(ra) & set(rb)) / len(ra))
        rel_b, rank_b = {r: s / sb[0] for r, s in zip(rb, sb)}, {r: i for i, r in enumerate(rb)}
        rel += [abs(s / sa[0] - rel_b[r]) for r, s in zip(ra, sa) if r in rel_b]
        moved += [i != rank_b[r] for i, r in enumerate(ra) if r in rank_b]
    return {f"top{k}_overlap_with_bm25s": round(statistics.mean(overlap), 4),
            "bm25_feature_abs_diff_mean": round(statistics.mean(rel), 4), "bm25_feature_abs_diff_max": round(max(rel), 4),
            "rank_changed_share": round(statistics.mean(moved), 4)}


def same_as_bm25s(a, b, questions: list[dict], k: int = 20) -> dict:
    """b against today's single bm25s index a: identical top-k lists, largest score difference."""
    same, diff = 0, 0.0
    for q in questions:
        (ra, sa), (rb, sb) = a.search(q["question"], k), b.search(q["question"], k)
        same += ra == rb
        diff = max([diff] + [abs(x - y) for x, y in zip(sa, sb)])
    return {"top20_equal_to_bm25s": round(same / len(questions), 4), "max_score_diff_vs_bm25s": diff}


def lance_add_bytes(library: list[tuple[str, str]], work: Path) -> list[dict]:
    """A LanceDB passage table as pagerag's (row, text, a 384-d vector) with the bm25s-like
    full-text index, grown a book at a time by table.add + optimize (the only way lancedb's
    Python API brings an FTS index up to date): the bytes of new files each add."""
    import lancedb
    import numpy as np
    import pyarrow as pa
    from lancedb.index import FTS

    def rows(texts, first):
        vectors = np.random.default_rng(first).standard_normal((len(texts), 384)).astype(np.float32)
        return pa.table({"row": pa.array(range(first, first + len(texts)), pa.int64()), "text": texts,
                         "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 384)})

    def files():
        return {p: p.stat().st_size for p in work.rglob("*") if p.is_file()}

    shutil.rmtree(work, ignore_errors=True)
    books = list(dict.fromkeys(b for b, _ in library))
    first = [t for b, t in library if b == books[0]]
    table = lancedb.connect(str(work)).create_table("passages", data=rows(first, 0))
    table.create_index("text", config=FTS(**bm25s_like()))
    n, out = len(first), []
    for book in books[1:]:
        texts, before = [t for b, t in library if b == book], files()
        t0 = time.perf_counter()
        table.add(rows(texts, n))
        table.optimize()
        seconds, n = time.perf_counter() - t0, n + len(texts)
        new = {p: size for p, size in files().items() if p not in before}
        out.append({"rows": n, "added": len(texts), "seconds": round(seconds, 2),
                    "new_data_mb": round(sum(v for p, v in new.items() if "/data/" in str(p)) / 1e6, 2),
                    "new_index_mb": round(sum(v for p, v in new.items() if "_indices" in str(p)) / 1e6, 2)})
    return out


def main() -> None:
    import os

    os.environ.setdefault("LANCE_LOG", "error")  # lance's Rust WARN lines

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", required=True, help="scratch directory for the LanceDB tables")
    ap.add_argument("--append", type=int, default=1, help="books added after the first build (timed)")
    ap.add_argument("--json")
    args = ap.parse_args()
    data_dir = Path(os.environ.get("PAGERAG_DATA_DIR", REPO_ROOT.parent / "shared" / "data"))
    work = Path(args.work)
    library = library_passages(data_dir)
    texts = [t for _, t in library]
    books = list(dict.fromkeys(book for book, _ in library))  # in library order
    append_from = next(i for i, (book, _) in enumerate(library) if book in books[-args.append:])
    questions = training_questions(data_dir)
    print(f"{len(TRAIN_BOOKS)} books, {len(texts)} passages ({len(texts) - append_from} appended), "
          f"{len(questions)} questions", flush=True)
    indexes = [Bm25s(), Shards(work / "shards", [b for b, _ in library])]
    indexes += [LanceFts(work / str(i), name, opts) for i, (name, opts) in enumerate(FTS_VARIANTS.items())]
    results = {}
    for index in indexes:
        row = timed_build(index, texts, append_from)
        if isinstance(index, Shards):
            t0 = time.perf_counter()
            index.load()
            row["load_s"] = round(time.perf_counter() - t0, 3)
        row.update(recall(index, texts, questions))
        if isinstance(index, Shards):
            row.update(same_as_bm25s(indexes[0], index, questions))
        elif index is not indexes[0]:
            row.update(score_agreement(indexes[0], index, questions))
            row.update(same_as_full_build(index, work / "full", texts, questions))
        results[index.name] = row
        print(index.name, json.dumps(row), flush=True)
    adds = lance_add_bytes(library, work / "growth")
    for add in adds:
        print("lancedb add + optimize", json.dumps(add), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"passages": len(texts), "questions": len(questions), "results": results,
                                               "lance_adds": adds}, indent=2))


if __name__ == "__main__":
    main()
