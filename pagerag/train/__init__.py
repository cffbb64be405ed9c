"""Training of what the package ships, from the 15 training books (docs/decision.md, "Retraining").

  entry point (python -m ...)       writes
  pagerag.train.reader --write      pagerag/read/model/ (the reader)
  pagerag.train.fit --write         generate/models/sufficiency.json, confidence/book_rcs.json
  pagerag.train.calibration_sample  generate/models/calibration_pairs.jsonl.gz (from pagerag.train.pairs)
  pagerag.train.ranker              retrieve/ranker.json
  pagerag.train.need                retrieve/need_model.json
The data recipe they read: corpus (books, examples, locate, qa_sets, and the synthetic negatives
mask, swap, borrow: the decision is fitted and its operating point chosen on them, and the reader's
negatives are drawn with one random stream that runs through them), features (the question path
run on every example), reader_data / reader_scores, stack / policy, ranker_data, logistic.

Top layer, beside `pagerag.evaluate` (whose scoring rules it reuses); nothing on the answer path
(`ask`, `retrieve`, `generate`) imports it.
"""
