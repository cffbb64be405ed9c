"""The window judge's text functions (generate.window_judge): a quote counts only when it is a
sentence of its excerpt -- case, quote marks and whitespace aside -- and what is cited is the
book's whole sentence(s), not the model's copy; the QUOTE:/ANSWER: reply is read as a small model
writes it; the excerpts judged are the first evidence passages in the retrieval's order."""
from __future__ import annotations

from types import SimpleNamespace

from pagerag.generate.window_judge import (MIN_QUOTE_WORDS, judge_excerpts_of, parse_reply, stating_sentence,
                                          verify_quote)
from pagerag.records import Excerpt, Window

AT = 1000  # where the excerpt starts in its (imagined) source: spans come back as source offsets
TEXT = ("Old Tobias kept the lighthouse on Gull Rock for forty winters. Every evening he climbed the hundred "
        "and twelve steps of the tower\nand lit seven lamps. His daughter Morwenna rowed out twice a week. The "
        "owners sent a silver watch engraved with the words \u2018For courage on Gull Rock\u2019.")


def excerpt(text: str = TEXT, start: int = AT) -> Excerpt:
    return Excerpt("gull:00001", "gull", "gull.txt", start, start + len(text), text, n=1, n_tokens=60, line=1)


def sentence(first_words: str, last_words: str) -> tuple[int, int]:
    """The source span of TEXT from `first_words` to the end of `last_words`."""
    return AT + TEXT.index(first_words), AT + TEXT.index(last_words) + len(last_words)


def test_a_quote_copied_exactly_is_the_source_span_of_its_sentence():
    span = verify_quote("His daughter Morwenna rowed out twice a week.", excerpt())
    assert span == sentence("His daughter", "twice a week.")
    assert TEXT[span[0] - AT: span[1] - AT] == "His daughter Morwenna rowed out twice a week."


def test_case_whitespace_and_quote_marks_do_not_matter():
    # the excerpt breaks the line inside the sentence and quotes with curly marks; the model writes
    # one line, straight quotes, other capitals, and wraps it in quotation marks of its own
    for quote in ("Every evening he climbed the hundred and twelve steps of the tower and lit seven lamps.",
                  "EVERY EVENING  he climbed the hundred and twelve\tsteps of the tower and lit seven lamps",
                  "\u201cevery evening he climbed the hundred and twelve steps of the tower and lit seven lamps.\u201d"):
        assert verify_quote(quote, excerpt()) == sentence("Every evening", "seven lamps."), quote
    watch = "The owners sent a silver watch engraved with the words 'For courage on Gull Rock'."
    assert verify_quote(watch, excerpt()) == sentence("The owners", "Gull Rock\u2019.")


def test_a_sentence_the_excerpt_does_not_hold_is_not_a_quote():
    assert verify_quote("The treasure is buried under the old oak in Bristol.", excerpt()) is None
    # one word changed: close is not enough
    assert verify_quote("His daughter Morwenna rowed out three times a week.", excerpt()) is None
    assert verify_quote("", excerpt()) is None


def test_a_quote_too_short_to_place_is_refused():
    assert MIN_QUOTE_WORDS == 4
    assert verify_quote("lit seven lamps", excerpt()) is None  # 3 words, though they are in the excerpt
    assert verify_quote("Gull Rock", excerpt()) is None
    assert verify_quote("and lit seven lamps", excerpt()) == sentence("Every evening", "seven lamps.")  # 4 words


def test_a_quote_of_part_of_a_sentence_cites_the_whole_sentence():
    span = verify_quote("climbed the hundred and twelve steps", excerpt())
    assert span == sentence("Every evening", "seven lamps.")
    # the citation is the book's text at that span, with its line break, not the model's copy
    assert "\n" in TEXT[span[0] - AT: span[1] - AT]


def test_a_quote_over_two_sentences_cites_both():
    span = verify_quote("for forty winters. Every evening he climbed", excerpt())
    assert span == sentence("Old Tobias", "seven lamps.")
    span = verify_quote("rowed out twice a week. The owners sent a silver watch", excerpt())
    assert span == sentence("His daughter", "Gull Rock\u2019.")


def test_spans_follow_the_excerpt_in_its_source():
    here, later = verify_quote("His daughter Morwenna rowed out", excerpt()), \
        verify_quote("His daughter Morwenna rowed out", excerpt(start=5000))
    assert later == (here[0] + 4000, here[1] + 4000)


def test_parse_reply_reads_the_labelled_lines():
    assert parse_reply("QUOTE: His daughter rowed out twice a week.\nANSWER: twice a week") == \
        ("His daughter rowed out twice a week.", "twice a week")
    # the answer keeps its own leading sign; the quote loses the quotation marks around it
    assert parse_reply('QUOTE: "a bag of gold containing $4,000"\nANSWER: $4,000') == \
        ("a bag of gold containing $4,000", "$4,000")
    assert parse_reply("**Quote:** \u201cHe lit seven lamps.\u201d\n**Answer:** seven") == ("He lit seven lamps.", "seven")
    assert parse_reply("answer - seven\nquote - He lit seven lamps.") == ("He lit seven lamps.", "seven")


def test_parse_reply_takes_an_unlabelled_reply_as_the_quote():
    assert parse_reply("He lit seven lamps.\nThat is all.") == ("He lit seven lamps.", "")
    assert parse_reply("  \n") == ("", "")
    assert parse_reply("ANSWER: seven") == ("", "seven")  # an answer without its quote: nothing to check


def test_parse_reply_ignores_text_around_the_labels():
    reply = ("Sure! Here is the sentence you asked for.\n\nQUOTE: He lit seven lamps.\nANSWER: seven lamps\n"
             "I hope this helps. QUOTE: something else\nANSWER: eight")
    assert parse_reply(reply) == ("He lit seven lamps.", "seven lamps")  # the first of each label


def test_judge_excerpts_are_the_first_passages_in_evidence_order_one_each():
    pieces = [f"Passage {i} says thing number {i}. It ends here." for i in range(6)]
    source = " ".join(pieces)
    bounds = {f"b:{i:05d}": (source.index(piece), source.index(piece) + len(piece)) for i, piece in enumerate(pieces)}
    state = SimpleNamespace(
        source_text=lambda doc: source,
        passage=lambda pid: SimpleNamespace(start=bounds[pid][0], end=bounds[pid][1]),
        place=lambda doc, offset: SimpleNamespace(page=None, page_label=None, section=[]))

    def window(pid: str, score: float) -> Window:
        start, end = bounds[pid][0] + 31, bounds[pid][1]  # its second sentence, not all of it
        return Window(pid, "b", "b.txt", start, end, source[start:end], score=score)

    # evidence order: 3, 1, 3 again (a second window of it), 5, 0; the scores say otherwise
    reading = SimpleNamespace(windows=[window("b:00003", 0.1), window("b:00001", 0.9), window("b:00003", 0.8),
                                       window("b:00005", 0.5), window("b:00000", 0.7)])
    got = judge_excerpts_of(reading, state, 3)
    assert [e.passage_id for e in got] == ["b:00003", "b:00001", "b:00005"]
    assert [e.n for e in got] == [1, 2, 3]
    for e in got:  # the whole passage, from the source
        assert (e.start, e.end) == bounds[e.passage_id] and e.text == source[e.start:e.end]
        assert e.text.startswith(f"Passage {e.passage_id[-1]} ") and e.n_tokens > 0
    assert len(judge_excerpts_of(reading, state, 10)) == 4  # fewer passages than asked: all of them


def test_a_short_answer_is_stated_by_the_one_sentence_that_holds_its_words_and_numbers():
    question = "How many lamps did Tobias light in the tower every evening?"
    steps = sentence("Every evening", "seven lamps.")
    assert stating_sentence("seven lamps", question, excerpt()) == steps
    assert stating_sentence("7 lamps", question, excerpt()) == steps  # a number written as the book does not
    assert stating_sentence("nine lamps", question, excerpt()) is None  # a number no sentence gives
    # digits against number words both ways: the numbers compared by value, not as words
    assert stating_sentence("112 steps", "How many steps did he climb?", excerpt()) == sentence("Every evening", "seven lamps.")
    assert stating_sentence("40 winters", "How long did Tobias keep the lighthouse?", excerpt()) == \
        sentence("Old Tobias", "forty winters.")
    assert stating_sentence("50 winters", "How long did Tobias keep the lighthouse?", excerpt()) is None
    assert stating_sentence("seven silver lamps", question, excerpt()) is None  # words no one sentence holds
    assert stating_sentence("NONE", question, excerpt()) is None
    assert stating_sentence("Tobias", question, excerpt()) is None  # the question's own words state nothing
    # a sentence that holds the words but shares none with the question is not an answer to it
    assert stating_sentence("Morwenna", "Who kept the lighthouse?", excerpt()) is None


def test_an_answer_that_restates_the_question_is_stated_by_the_sentence_holding_what_it_adds():
    """"Tobias climbed 112 steps every evening in the tower of the lighthouse": its words from the
    question need not be in the stating sentence (the lighthouse is named in the one before); what
    it adds (the number) must be, and every number it gives."""
    question = "How many steps did Tobias climb every evening in the tower of the lighthouse?"
    steps = sentence("Every evening", "seven lamps.")
    assert stating_sentence("Tobias climbed 112 steps every evening in the tower of the lighthouse", question,
                            excerpt()) == steps
    assert stating_sentence("Tobias climbed 113 steps every evening in the tower of the lighthouse", question,
                            excerpt()) is None  # a number no sentence gives
    # a word of its own no sentence holds beside the number: not stated
    assert stating_sentence("Tobias climbed 112 marble steps every evening in the lighthouse", question, excerpt()) is None
    assert stating_sentence("Tobias climbed every evening in the tower of the lighthouse", question, excerpt()) is None
