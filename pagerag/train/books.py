"""The GraphRAG-Bench novels and which of them may be fitted on.

Fitting (features, thresholds, prototypes, prompt wording, models) uses only TRAIN_BOOKS,
cross-validated by leaving books out; TEST_BOOKS and the DEV question sets are for reporting only
(see docs/DESIGN.md, "Fitting and testing").
"""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

TRAIN_BOOKS = (
    "Novel-10146", "Novel-10321", "Novel-10356", "Novel-2544", "Novel-25646", "Novel-26183", "Novel-29973",
    "Novel-30752", "Novel-40700", "Novel-4128", "Novel-41603", "Novel-47558", "Novel-51410", "Novel-58553",
    "Novel-8559",
)
TEST_BOOKS = ("Novel-10762", "Novel-44557", "Novel-47676", "Novel-54537", "Novel-5956")
QUESTIONS = Path("graphrag-bench-novel") / "questions.json"  # under PAGERAG_DATA_DIR


def split_of(book: str) -> str:
    """"train" or "test"; a book of neither list is an error (nothing unlisted is fitted on)."""
    if book in TRAIN_BOOKS:
        return "train"
    if book in TEST_BOOKS:
        return "test"
    raise ValueError(f"{book} is neither a training nor a test book of GraphRAG-Bench")


def load_questions(data_dir: Path) -> dict[str, list[dict]]:
    """GraphRAG-Bench novel questions by book, in file order."""
    path = Path(data_dir) / QUESTIONS
    if not path.is_file():
        from ..errors import InputError

        raise InputError(f"{path}: GraphRAG-Bench questions not found (set PAGERAG_DATA_DIR)")
    by_book: dict[str, list[dict]] = defaultdict(list)
    for row in json.loads(path.read_text(encoding="utf-8")):
        by_book[row["source"]].append(row)
    return dict(by_book)
