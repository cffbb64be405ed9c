"""Training corpora built from book repositories: the examples that later fits (the book RCS
model, the sufficiency model, the sentence ranker) are made from.

Top layer, beside `pagerag.evaluate` (whose scoring rules it reuses); nothing on the answer path
(`ask`, `retrieve`, `generate`) imports it.
"""
