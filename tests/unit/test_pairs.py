"""Pairs (pagerag.train.pairs): the cut copy of a book loses exactly the sentences that hold a
question's gold answer, a question whose answer the book restates everywhere is not cut, and the
calibration sample takes the books in turn."""
from __future__ import annotations

from collections import Counter

from pagerag.train.calibration_sample import interleave
from pagerag.train.pairs import MAX_CUT_SENTENCES, Pair, cut_pairs, remove_sentences

BOOK = (
    "The mill stood by the river. Old Harlan kept it for forty years. "
    "His daughter was named Corabel, after her grandmother. Corabel married the smith. "
    "The smith's horse was called Thunder. "
    "Every evening the bell rang. The bell rang at six. The bell rang for supper. The bell rang for prayers. "
    "The bell rang once more at nine. The bell was cast in Bristol.\n\n"
    + " ".join(f"Filler sentence number {i} tells of the weather." for i in range(300))
)


def candidate(qid, question, answers, evidence=()):
    return {"id": qid, "question": question, "answers": answers, "evidence": list(evidence), "source": "written"}


def test_a_cut_removes_every_sentence_holding_the_gold_and_keeps_the_rest():
    pairs, cut = cut_pairs("B", BOOK, [candidate("q1", "What was the daughter's name?", ["Corabel"])])
    assert [p.id for p in pairs] == ["q1"]
    assert "corabel" not in cut.lower()
    assert "The mill stood by the river." in cut and "Thunder" in cut
    assert pairs[0].says == "original" and pairs[0].silent == "cut" and pairs[0].kind == "cut"
    assert len(pairs[0].cut_sentences) == 2


def test_an_answer_the_book_restates_too_often_is_not_cut():
    bell = candidate("q2", "What rang every evening?", ["The bell"])
    assert MAX_CUT_SENTENCES < 6
    dropped = Counter()
    pairs, cut = cut_pairs("B", BOOK, [bell], dropped)
    assert pairs == [] and "The bell rang at six." in cut
    assert dropped == Counter({f"restated (over {MAX_CUT_SENTENCES} sentences)": 1})  # and it says why


def test_a_gold_string_the_book_does_not_hold_gives_no_pair_and_evidence_quotes_are_cut_too():
    absent = candidate("q3", "Where was the smith born?", ["Carlisle"])
    horse = candidate("q4", "What was the horse called?", ["Thunder"], ["Corabel married the smith."])
    dropped = Counter()
    pairs, cut = cut_pairs("B", BOOK, [absent, horse], dropped)
    assert [p.id for p in pairs] == ["q4"] and dropped == Counter({"no gold string verbatim in the book": 1})
    assert "Thunder" not in cut and "Corabel married the smith." not in cut


def test_removing_sentences_leaves_the_text_between_them():
    text = "One two. Three four. Five six."
    assert remove_sentences(text, [(9, 20)]) == "One two. Five six."


def test_the_calibration_sample_takes_the_books_in_turn_whatever_the_input_order():
    pairs = [Pair(id=f"{b}-{i}", book=b, kind="insert", question="q?", answers=["a"], says="augmented",
                  silent="original") for b in ("A", "B", "C") for i in range(3)]
    order = interleave(pairs)
    assert [p.book for p in order[:3]] == ["A", "B", "C"] and [p.book for p in order[3:6]] == ["A", "B", "C"]
    assert [p.id for p in interleave(list(reversed(pairs)))] == [p.id for p in order]


def test_the_test_books_written_inserts_pair_every_question_with_its_answer_only_in_the_copy(data_dir, tmp_path):
    """benchmarks/pairs/<book>.insert.jsonl (report only): insert-qa accepts each book's inserts,
    and every pair's answer is in the augmented text and nowhere in the original."""
    from pathlib import Path

    from pagerag.train.pairs import main, read_pairs, side_text_path

    folder = Path(__file__).resolve().parents[2] / "benchmarks" / "pairs"
    books = sorted(p.name.removesuffix(".insert.jsonl") for p in folder.glob("Novel-*.insert.jsonl"))
    assert books, "no written inserts for the test books"
    assert main(["--books", ",".join(books), "--inserts", str(folder), "--data", str(data_dir), "--out", str(tmp_path)]) == 0
    inserts = [p for p in read_pairs(tmp_path) if p.kind == "insert"]
    assert Counter(p.book for p in inserts) == {b: 7 for b in books}
    for p in inserts:
        says = side_text_path(tmp_path, p.book, "augmented").read_text(encoding="utf-8").lower()
        silent = side_text_path(tmp_path, p.book, "original").read_text(encoding="utf-8").lower()
        assert p.answers[0].lower() in says and p.answers[0].lower() not in silent, p.id
