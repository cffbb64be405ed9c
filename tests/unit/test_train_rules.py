"""The paraphrased-evidence rule (one implementation, used by the retrieval benchmark and the
training corpus) and the text mechanics of the corpus's swapped negatives."""
from __future__ import annotations

import pytest

from pagerag.evaluate.scoring import EVIDENCE_LOCATED, content_words, coverage, located, statement_located
from pagerag.train.books import TEST_BOOKS, TRAIN_BOOKS, split_of
from pagerag.train.locate import answer_is_stated, answer_score
from pagerag.train.mask import question_names
from pagerag.train.swap import Character, gender, main_character, names_character, replace_character, still_named


def test_content_words_drop_stop_words_and_strip_suffixes():
    assert content_words("The clerks were working in the counting-house of Tolliver's") == {
        "clerk", "work", "count", "house", "tolliver"}
    assert content_words("It is a book, and the narrator says so.") == {"says"}  # too short to strip


def test_statement_located_at_sixty_percent_of_content_words():
    statement = "Tolliver's clerk earns twelve pence a week."  # tolliver clerk earn twelve penc week
    assert statement_located(statement, ["my clerk, with twelve pence a week, said Tolliver"])  # 5/6
    assert not statement_located(statement, ["twelve pence for the clerk"])  # 3/6
    words = content_words(statement)
    assert coverage(words, content_words("clerk twelve pence week")) == pytest.approx(4 / 6)
    assert EVIDENCE_LOCATED == 0.6 and located(words, content_words("clerk twelve pence week"))
    assert not statement_located("", ["anything"]) and not located(frozenset(), frozenset({"x"}))


def test_book_lists_are_disjoint_and_complete():
    assert len(TRAIN_BOOKS) == 15 and len(TEST_BOOKS) == 5 and not set(TRAIN_BOOKS) & set(TEST_BOOKS)
    assert split_of("Novel-10146") == "train" and split_of("Novel-44557") == "test"
    with pytest.raises(ValueError):
        split_of("Novel-1")


def test_answer_sentences_need_the_answer_string_or_most_content_words():
    assert answer_score("twelve pence", content_words("twelve pence"), "He earns 12 pence.") == 1.0
    assert answer_score("Lieut. Pfaender took command of the battery", content_words(
        "Lieut. Pfaender took command of the battery"), "Pfaender then took command of the battery.") is not None
    assert answer_score("twelve pence", content_words("twelve pence"), "He earns twelve pounds.") is None
    assert not answer_is_stated("Yes, he did.") and not answer_is_stated("No") and answer_is_stated("Normandy")


def test_question_names_skip_question_words_and_titles():
    names = question_names("According to the narrative, why did Capt. William Henry Acker's company leave St. Paul?")
    assert names == ["William", "Henry", "Acker", "Paul"]


ACKER = Character("person:acker", "Acker", ("William Henry Acker", "Capt. Acker", "Acker"), 9)
SULEIMAN = Character("person:muley-abd-errahman", "Muley Abd Errahman", ("Muley Abd Errahman",), 7)
PAUL = Character("person:paul", "Paul", ("Paul",), 7)


def test_replace_character_swaps_whole_name_runs_keeping_possessives_and_question_words():
    q = "How did Capt. William Henry Acker's regiment meet Acker in St. Paul?"
    out = replace_character(q, ACKER.words, "Gen. Sibley")
    assert out == "How did Gen. Sibley's regiment meet Gen. Sibley in St. Paul?"
    assert not still_named(out, ACKER.words)
    # A run with another name word is another person; a place name is no person.
    text = "Muley Abd Errahman was the nephew of Muley Suleiman."
    assert replace_character(text, SULEIMAN.words, "Mr. Hay") == "Mr. Hay was the nephew of Muley Suleiman."
    assert replace_character("He lived in St. Paul.", PAUL.words, "Mr. Hay") == "He lived in St. Paul."
    assert not names_character(PAUL, "He lived in St. Paul.") and names_character(PAUL, "Paul said so.")


def test_main_character_is_the_first_named_in_question_and_evidence():
    found = main_character("Did Capt. Acker meet Paul?", ["Acker met Paul.", "Paul left."], [PAUL, ACKER])
    assert found == (ACKER, "Acker")
    assert main_character("Did Capt. Acker meet Paul?", ["Paul left."], [PAUL, ACKER]) == (PAUL, "Paul")
    assert main_character("Did Capt. Acker meet Paul?", ["Acker met Paul."], [PAUL, ACKER],
                          person=lambda c: c is PAUL) == (PAUL, "Paul")
    assert main_character("Who left?", ["Paul left."], [PAUL]) is None


def test_gender_comes_from_titles():
    assert gender(Character("a", "Mrs. Tarbox", ("Mrs. Tarbox",), 5)) == "f"
    assert gender(ACKER) == "m" and gender(PAUL) == ""


# A tiny book (records built by hand, no repository) for the swapper's decisions.
def tiny_book():
    from pagerag.records import Entity, Graph, Passage
    from pagerag.train.locate import BookIndex

    texts = [
        '"We ride at dawn," said Capt. Acker. Capt. Acker led the Pioneer Guards to Fort Snelling.',
        '"The river is high," said Mr. Hay. Mr. Hay kept the ferry at Mendota for ten years.',
        '"Enough," said Mr. Hay. Mr. Hay also commanded the Pioneer Guards at Fort Snelling.',
        '"Wait," said Mr. Gray. Mr. Gray sold flour in the lower town.',
        '"Come," said Mr. Gray. Mr. Gray sang in the choir.',
        '"Look," said Capt. Acker. Capt. Acker drilled the company.',
    ]
    source = "\n\n".join(texts)
    passages, pos = [], 0
    for i, t in enumerate(texts):
        start = source.index(t, pos)
        passages.append(Passage(f"book:{i:05d}", "book", "book.txt", start, start + len(t), t, 30, i))
        pos = start + len(t)
    people = [("person:acker", "Capt. Acker", ["Capt. Acker", "Acker"]),
              ("person:hay", "Mr. Hay", ["Mr. Hay", "Hay"]), ("person:gray", "Mr. Gray", ["Mr. Gray", "Gray"])]
    graph = Graph(entities=[Entity(eid, name, "PERSON", aliases, mentions=6) for eid, name, aliases in people])
    return BookIndex(passages, {"book": source}), graph


def test_swapper_keeps_only_swaps_the_book_does_not_support():
    from pagerag.train.swap import Swapper

    index, graph = tiny_book()
    swapper = Swapper(index, graph, seed=0)
    assert {c.name for c in swapper.cast} == {"Capt. Acker", "Mr. Hay", "Mr. Gray"}
    made = swapper.swap("q1", "Where did Capt. Acker lead the Pioneer Guards?",
                        ["Capt. Acker led the Pioneer Guards to Fort Snelling."], "Fort Snelling")
    # Mr. Hay also commanded the Guards at Fort Snelling (answer beside his name): only Mr. Gray is honest.
    assert not isinstance(made, str)
    swap, question, evidence = made
    assert swap.to_name == "Mr. Gray" and question == "Where did Mr. Gray lead the Pioneer Guards?"
    assert evidence == ["Mr. Gray led the Pioneer Guards to Fort Snelling."]
    acker, hay = swapper.character("person:acker"), swapper.character("person:hay")
    assert swapper.support_reason(hay, "Where did Mr. Hay lead the Pioneer Guards?",
                                  ["Mr. Hay led the Pioneer Guards to Fort Snelling."], "Fort Snelling", acker) is not None
    # A name of the old character left inside a longer run: not swapped at all.
    half = swapper.swap("q2", "Why did Capt. Acker Smith's company drill?", ["Capt. Acker drilled the company."], "x")
    assert half == "incomplete swap"


def test_feature_tables_of_older_sentence_features_are_read_by_name(tmp_path):
    import gzip
    import json

    from pagerag.errors import PageRAGError
    from pagerag.generate.sentences import SENTENCE_FEATURES
    from pagerag.train.features import MANIFEST, read_tables

    older = list(SENTENCE_FEATURES[:8]) + ["gone", "also_gone"] + list(SENTENCE_FEATURES[8:])
    row = {"id": "x", "book": "b", "variants": {"default": {"sents": [[float(i) for i in range(len(older))]]}}}
    with gzip.open(tmp_path / "b.jsonl.gz", "wt", encoding="utf-8") as fh:
        fh.write(json.dumps(row) + "\n")
    (tmp_path / MANIFEST).write_text(json.dumps({"sentence_features": older}), encoding="utf-8")
    sents = read_tables(tmp_path)[0]["variants"]["default"]["sents"]
    assert sents == [[float(older.index(f)) for f in SENTENCE_FEATURES]]
    (tmp_path / MANIFEST).write_text(json.dumps({"sentence_features": list(SENTENCE_FEATURES)}), encoding="utf-8")
    assert read_tables(tmp_path)[0]["variants"]["default"]["sents"] == row["variants"]["default"]["sents"]
    (tmp_path / MANIFEST).write_text(json.dumps({"sentence_features": older[1:]}), encoding="utf-8")
    with pytest.raises(PageRAGError, match="lack sentence feature"):
        read_tables(tmp_path)
