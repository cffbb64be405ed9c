"""The book training corpus on a real repository (the training-book excerpt printer_repo), with
questions written here in GraphRAG-Bench's style (paraphrased evidence): located evidence lines up with the
passages, sentence labels lie inside them and hold the evidence, masking hides every passage that
still locates the evidence, `retrieve(exclude=...)` never returns a hidden passage, and the
builder writes the same bytes twice."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pagerag.errors import InputError
from pagerag.evaluate.scoring import content_words, coverage, located
from pagerag.retrieve.api import get_encoder, retrieve
from pagerag.settings import load_settings
from pagerag.train.corpus import build_book, build_corpus, read_corpus
from pagerag.train.locate import BookIndex
from pagerag.train.mask import NEAR_COVERAGE, NEAR_MIN_WORDS

# Questions about the training-book excerpt (printer_repo), written here in GraphRAG-Bench's
# style: the source book's id, its evidence paraphrased.
QUESTIONS = [
    {"id": "printer-gold", "source": "Novel-10146", "question_type": "Fact Retrieval",
     "question": "How much gold did Mr. Moore bring down from the capitol for his employes?", "answer": "$4,000",
     "evidence": ["Mr. Moore brought a bag of gold containing $4,000 down from the capitol and divided it among his "
                  "employes."]},
    {"id": "printer-metcalf", "source": "Novel-10146", "question_type": "Fact Retrieval",
     "question": "How old was Metcalf, the old gentleman who set type in the Press office?", "answer": "over eighty",
     "evidence": ["The old gentleman Metcalf was over eighty years old and managed to set type."]},
    {"id": "printer-brother", "source": "Novel-10146", "question_type": "Complex Reasoning",
     "question": "Who managed the Daily Minnesotian when the narrator arrived, and how were they related?",
     "answer": "Geo. W. Moore, his brother",
     "evidence": ["The narrator arrived in St. Paul in April 1858 and commenced work on the Daily Minnesotian.",
                  "His brother Geo. W. Moore was part owner and manager of the paper."]},
    {"id": "printer-unlocatable", "source": "Novel-10146", "question_type": "Fact Retrieval",
     "question": "What colour was Dr. Foster's umbrella?", "answer": "green",
     "evidence": ["Dr. Foster carried a green silk umbrella on his travels through Vienna and Prague."]},
    {"id": "printer-diary", "source": "Novel-10146", "question_type": "Creative Generation",
     "question": "Imagine you are the printer's devil. Write a diary entry about the day the gold came.",
     "answer": "Dear diary ...", "evidence": ["Mr. Moore divided the gold among his employes."]},
]


@pytest.fixture(scope="module")
def built(printer_repo):
    examples, stats = build_book("printer", printer_repo, QUESTIONS, seed=0, split="train")
    return {e.id: e for e in examples}, stats, BookIndex.open(printer_repo)


def test_every_question_gives_one_answerable_example(built):
    by_id, stats, _ = built
    answerable = [e for e in by_id.values() if e.kind == "answerable"]
    assert [e.id for e in answerable] == [q["id"] for q in QUESTIONS]
    assert stats["answerable"] == len(QUESTIONS) and stats["masked"] == sum(e.kind == "masked" for e in by_id.values())
    assert by_id["printer-gold"].located and by_id["printer-metcalf"].located and by_id["printer-brother"].located
    assert not by_id["printer-unlocatable"].located  # nothing of umbrellas or Vienna in the book


def test_located_evidence_lines_up_with_passage_text(built):
    by_id, _, index = built
    for ex in (e for e in by_id.values() if e.kind == "answerable"):
        for statement, ids, cov in zip(ex.evidence, ex.evidence_passage_ids, ex.evidence_coverage):
            for pid in ids:
                p = index.passages[index.row_of[pid]]
                assert index.sources[p.doc_id][p.start:p.end] == p.text
                assert located(content_words(statement), content_words(p.text))
                assert coverage(content_words(statement), content_words(p.text)) <= cov + 1e-9
    gold = by_id["printer-gold"]
    assert all("$4,000" in index.passages[index.row_of[p]].text for p in gold.evidence_passage_ids[0])


def test_sentence_labels_lie_inside_their_passages_and_hold_the_evidence(built):
    by_id, _, index = built
    for ex in (by_id["printer-gold"], by_id["printer-metcalf"], by_id["printer-brother"]):
        assert ex.evidence_spans and {s.statement for s in ex.evidence_spans} == set(range(len(ex.evidence)))
        for span in ex.evidence_spans + ex.answer_spans:
            p = index.passages[index.row_of[span.passage_id]]
            assert p.doc_id == span.doc_id and p.start <= span.start < span.end <= p.end
        for i, statement in enumerate(ex.evidence):
            by_passage: dict[str, set[str]] = {}
            for s in ex.evidence_spans:
                if s.statement == i:
                    by_passage.setdefault(s.passage_id, set()).update(content_words(index.sources[s.doc_id][s.start:s.end]))
            assert all(located(content_words(statement), frozenset(w)) for w in by_passage.values())
    gold_answer = [index.sources[s.doc_id][s.start:s.end] for s in by_id["printer-gold"].answer_spans]
    assert gold_answer and all("$4,000" in s for s in gold_answer)
    age_answer = [index.sources[s.doc_id][s.start:s.end] for s in by_id["printer-metcalf"].answer_spans]
    assert age_answer and all("over eighty" in s for s in age_answer)


def test_masking_hides_every_passage_that_locates_the_evidence(built):
    by_id, stats, index = built
    masked = [e for e in by_id.values() if e.kind == "masked"]
    assert {e.source_id for e in masked} >= {"printer-gold", "printer-metcalf"}
    for ex in masked:
        hidden = {index.row_of[p] for p in ex.mask_passage_ids}
        assert ex.mask_passage_ids and not ex.answerable
        for statement in ex.evidence:
            words = content_words(statement)
            locating = {r for r in range(len(index.passages)) if located(words, index.words[r])}
            assert locating and locating <= hidden
            if len(words) >= NEAR_MIN_WORDS:  # near paraphrases (half the words) go too
                assert {r for r in range(len(index.passages))
                        if coverage(words, index.words[r]) >= NEAR_COVERAGE} <= hidden
        for ids in ex.evidence_passage_ids:  # overlapping neighbours go too
            for pid in ids:
                assert set(index.overlapping(index.row_of[pid])) <= hidden
    # No masked example where the evidence was not located, nor for a creative-writing prompt.
    assert "printer-unlocatable:masked" not in by_id and "printer-diary:masked" not in by_id
    assert stats["rejected"]["masked"].get("evidence not located", 0) >= 1


def test_swapped_examples_name_another_character_the_book_never_ties_to_the_evidence(built):
    by_id, _, index = built
    for ex in (e for e in by_id.values() if e.kind == "swapped"):
        assert ex.swap and ex.swap.to_name in ex.question and ex.swap.from_name not in ex.question
        assert not any(ex.evidence_passage_ids) and not ex.mask_passage_ids


def test_exclude_hides_passages_from_every_operator(built, printer_repo):
    by_id, _, index = built
    settings = load_settings(environ={})
    encode = get_encoder(settings)
    question = "How was Dr. Foster connected to Newson?"
    first = retrieve(question, printer_repo, settings, encode=encode)
    hidden = {e.passage_id for e in first.evidence[:4]}
    again = retrieve(question, printer_repo, settings, encode=encode, exclude=hidden)
    assert again.evidence
    seen = {e.passage_id for e in again.evidence} | set(again.signals.hop1_ids) | set(again.signals.bm25_ids) \
        | set(again.signals.hop2_ids) | {p for h in again.hints for p in h.passage_ids}
    assert not seen & hidden
    # Hide all but five passages: whatever the route, evidence comes only from those five.
    allowed = {p.passage_id for p in index.passages[10:15]}
    narrow = retrieve(question, printer_repo, settings, encode=encode,
                      exclude={p.passage_id for p in index.passages} - allowed)
    assert narrow.evidence and {e.passage_id for e in narrow.evidence} <= allowed
    # A masked corpus example: retrieval with its mask never sees its evidence passages.
    gold = by_id["printer-gold:masked"]
    r = retrieve(gold.question, printer_repo, settings, encode=encode, exclude=set(gold.mask_passage_ids))
    assert not {e.passage_id for e in r.evidence} & set(gold.mask_passage_ids)
    assert not any("$4,000" in e.text for e in r.evidence)
    with pytest.raises(InputError, match="no passage"):
        retrieve(question, printer_repo, settings, encode=encode, exclude={"printer:99999"})


def test_builder_is_deterministic_and_reads_its_data_dir(printer_repo, tmp_path):
    data = tmp_path / "data" / "graphrag-bench-novel"
    data.mkdir(parents=True)
    (data / "questions.json").write_text(json.dumps(QUESTIONS), encoding="utf-8")
    repos = tmp_path / "repos"
    repos.mkdir()
    (repos / "Novel-10146.rag").symlink_to(printer_repo, target_is_directory=True)
    stats = build_corpus(repos, tmp_path / "data", tmp_path / "a", log=lambda m: None)
    assert stats["splits"]["train"]["answerable"] == len(QUESTIONS)
    done = subprocess.run([sys.executable, "-m", "pagerag.train.corpus", "--repos", str(repos), "--out",
                           str(tmp_path / "b"), "--data", str(tmp_path / "data")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    for name in ("book_corpus.jsonl", "stats.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    examples = read_corpus(tmp_path / "a" / "book_corpus.jsonl")
    assert [e.to_dict() for e in examples] == [json.loads(l) for l in (tmp_path / "a" / "book_corpus.jsonl").open()]
    assert {e.split for e in examples} == {"train"} and {e.book for e in examples} == {"Novel-10146"}
    bad = subprocess.run([sys.executable, "-m", "pagerag.train.corpus", "--repos", str(tmp_path / "none"), "--out",
                          str(tmp_path / "c"), "--data", str(tmp_path / "data")], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("error:") and "Traceback" not in bad.stderr


# Questions of another (imaginary) training book about one character, to borrow into this one:
# the Carol excerpt (carol_repo) and its cast, in questions made up here (none of a DEV set).
OTHER_BOOK = [
    {"id": "other-penmanship", "source": "Novel-2544", "question_type": "Fact Retrieval",
     "question": "Who taught Scrooge the art of penmanship during his youth?", "answer": "Old Ben Robertson",
     "evidence": ["Old Ben Robertson taught Scrooge the art of penmanship."]},
    {"id": "other-partner", "source": "Novel-2544", "question_type": "Fact Retrieval",
     "question": "Who was the business partner of Scrooge?", "answer": "Marley",
     "evidence": ["Marley was the business partner of Scrooge."]},
    {"id": "other-place", "source": "Novel-2544", "question_type": "Fact Retrieval",
     "question": "Where in London did Scrooge keep his dog?", "answer": "In a kennel",
     "evidence": ["Scrooge kept his dog in a kennel in London."]},
    {"id": "other-summary", "source": "Novel-2544", "question_type": "Contextual Summarize",
     "question": "How does Scrooge change?", "answer": "He becomes generous",
     "evidence": ["Scrooge becomes generous."]},
]


@pytest.fixture(scope="module")
def borrowed(carol_repo):
    from pagerag.train import borrow
    from pagerag.train.corpus import BookBuild

    source = BookBuild("Novel-2544", carol_repo, seed=0, split="train")
    portable = source.portable(OTHER_BOOK)
    target = BookBuild("carol", carol_repo, seed=0, split="train")
    return portable, target.borrowed(portable), target, borrow


def test_only_questions_about_one_character_and_nothing_else_of_their_book_are_portable(borrowed):
    portable, *_ = borrowed
    ids = {p.qid for p in portable}
    assert "other-penmanship" in ids and "other-partner" in ids
    assert "other-place" not in ids  # London belongs to its own book
    assert "other-summary" not in ids  # not a question about a detail
    assert all(p.character.name for p in portable)


def test_borrowed_examples_ask_about_this_books_characters_what_the_book_never_says(borrowed):
    _, made, target, borrow = borrowed
    assert made, "the Carol's cast gives at least one borrowed negative"
    index = target.swapper.index
    for ex in made:
        assert ex.kind == "borrowed" and not ex.answerable and ex.book == "carol"
        assert ex.source_id.startswith("other-") and ex.swap and ex.swap.to_name in ex.question
        assert not ex.evidence and not ex.mask_passage_ids
        new = next(c for c in target.swapper.cast if c.entity_id == ex.swap.to_entity)
        rows = target.swapper.rows_naming(new)
        assert rows, "the new character is named in the book"
        assert not any(located(content_words(ex.question), index.words[r]) for r in rows)
    # The partner question asked about Scrooge himself is supported by the book ("Marley was
    # Scrooge's partner"): the support check rejects it; asked about his penmanship, it does not.
    scrooge = next(c for c in target.swapper.cast if c.name.endswith("Scrooge"))
    assert borrow.unsupported_reason(scrooge, "Who was the business partner of Scrooge?", "Marley",
                                     target.swapper) == "book supports it"
    assert borrow.unsupported_reason(scrooge, "Who taught Scrooge the art of penmanship during his youth?",
                                     "Old Ben Robertson", target.swapper) is None
    assert not any(ex.source_id == "other-partner" and "Scrooge" in ex.question for ex in made)
    assert target.stats.to_dict()["borrowed"] == len(made)


def test_a_question_about_his_youth_is_not_asked_about_a_mrs(borrowed):
    *_, borrow = borrowed
    assert borrow.pronoun_gender("What did he give her?") == ""
    assert borrow.pronoun_gender("Who taught X penmanship during his youth?") == "m"
    assert borrow.pronoun_gender("Where did X leave her umbrella?") == "f"
