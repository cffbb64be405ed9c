"""What window vectors pooled from the passage pass's token states ("late chunking") would do to
retrieval, before building them: copies of repositories whose build-time window vectors are
replaced by the mean of the passage's own contextual token states inside each window.

    python benchmarks/pooled_windows.py SRC.rag... --out DIR     # DIR/<name>.rag, pooled copies
    python benchmarks/retrieval.py --repos REPOS --work W --skip-latency          # as built
    python benchmarks/retrieval.py --repos DIR --work W_POOLED --skip-latency     # pooled

Each passage is embedded once with sentence-transformers (output_value="token_embeddings", the
same MiniLM as the build, fp32); a window's vector is the normalised mean of the token states whose
character offsets lie inside it (a window past the 256-word-piece truncation keeps its own vector).
Printed per repository: windows pooled, windows kept, the median cosine of a pooled vector to the
window embedded alone. The ranker is not refitted: its window features read the pooled cosines.
"""
from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import numpy as np


def pooled_copy(src: Path, dst: Path, model) -> dict:
    import lancedb

    from pagerag.retrieve.windows import WINDOWS_DIR

    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    passages = lancedb.connect(str(dst / "tables")).open_table("passages").to_pandas()
    by_id = {r.passage_id: r for r in passages.itertuples()}
    cosines, kept, t0 = [], 0, time.perf_counter()
    for path in sorted((dst / WINDOWS_DIR).glob("*.npz")):
        data = dict(np.load(path))
        ids, counts, spans, vectors = data["passage_ids"].tolist(), data["counts"], data["spans"], data["vectors"].copy()
        offsets = np.concatenate([[0], np.cumsum(counts)])
        texts = [by_id[pid].text for pid in ids]
        states = model.encode(texts, output_value="token_embeddings", convert_to_numpy=False, batch_size=16)
        for i, pid in enumerate(ids):
            passage = by_id[pid]
            pieces = model.tokenizer(passage.text, return_offsets_mapping=True, truncation=True,
                                     max_length=model.max_seq_length)["offset_mapping"]
            tokens = states[i].cpu().numpy()
            for k in range(offsets[i], offsets[i + 1]):
                start, end = spans[k] - passage.start
                inside = [j for j, (a, b) in enumerate(pieces) if b > a and a >= start and b <= end]
                if not inside or pieces[-2][1] < end:  # past the truncation: keep the window's own vector
                    kept += 1
                    continue
                vector = tokens[inside].mean(axis=0)
                vector /= np.linalg.norm(vector)
                cosines.append(float(vector @ vectors[k]))
                vectors[k] = vector
        data["vectors"] = vectors.astype(np.float32)
        np.savez(path, **data)
    return {"repo": dst.name, "pooled": len(cosines), "kept": kept,
            "cosine_median": float(np.median(cosines)) if cosines else float("nan"),
            "seconds": round(time.perf_counter() - t0, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("repos", nargs="+", type=Path, help="Repositories built with build-time windows.")
    ap.add_argument("--out", type=Path, required=True, help="Folder for the pooled copies (same names).")
    args = ap.parse_args()
    from sentence_transformers import SentenceTransformer

    from pagerag.index.embed import resolve_model_path
    from pagerag.offline import forbid_hub_downloads
    from pagerag.settings import load_settings

    forbid_hub_downloads()
    model = SentenceTransformer(str(resolve_model_path(load_settings().embed.model)), device="cpu")
    args.out.mkdir(parents=True, exist_ok=True)
    for src in args.repos:
        r = pooled_copy(src, args.out / src.name, model)
        print(f"{r['repo']}: {r['pooled']} windows pooled, {r['kept']} kept, cosine to the window alone "
              f"median {r['cosine_median']:.3f} ({r['seconds']} s)", flush=True)


if __name__ == "__main__":
    main()
