"""With an LLM, the LLM reads: one excerpt at a time, and says whether it states the answer.

A small model asked once about a long evidence block answers from the question's form; asked
about one short excerpt, with and without the answer's sentence, its P(yes) moves with the text
(shown on training-book pairs: docs/pairs.md). So the judge reads each of the best
`generate.judge_windows` excerpts alone — the first evidence passages in the retrieval's order,
a passage (~200 tokens) each — and gives P(yes) per excerpt (prompts/judge_window: question first,
then the excerpt, so a local model evaluates the shared beginning once). Where P(yes) is high
enough, the same conversation goes on (prompts/quote_answer): the model copies the sentence
that states the answer and gives the answer. The quote must be a sentence of its excerpt (case,
quote marks and whitespace aside) — a small model invents quotes — and share a content word with
the question (book text telling the model what to answer is in the excerpt too); the citation is
that sentence, taken from the book, not the model's copy of it.

`generate.judge = pick` asks instead which numbered sentence of the excerpt states the answer (0:
none; prompts/pick_sentence): P(some sentence) = 1 - P("0") from the first reply token, and the
answer is the likeliest sentence. A pick cannot be invented, so nothing needs verifying but that
the sentence is about the question; on 40 training pairs it separated the two sides better than
the yes/no question (AUC 0.76 against 0.62; with the control text, `null`, 0.79; docs/pairs.md).
The named sentence is often the one beside the answer's, so once the evidence is judged
sufficient the same conversation asks for the answer in a few words (`pick_answer`,
prompts/pick_answer): kept, with the sentence that holds all its words as the citation, when
that sentence is about the question; else the named sentence is the answer. An answer that checks
out is read again with its sentence (`confirm_answer`, prompts/confirm_answer: does it say this is
the answer to this question?) and given only when P(yes) reaches the decision's `confirm_at`.

The decision: answer when the best excerpt's P(yes) reaches tau (a model fitted on pairs by
`pagerag calibrate --llm BACKEND`; uncalibrated, P(yes) >= 0.5) and its quote checks out; a
judged-sufficient excerpt whose quote does not check out is refused as unsupported.
"""
from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass
from typing import Iterator

from ..llm import LLM, Messages, charged, choice_probabilities, render_prompt
from ..records import Excerpt, StageCost
from ..text.sentences import split_sentences
from .answer import _defuse, content_stems, numbers_in, stems_besides_numbers
from .context import fold_space, make_excerpt

JUDGE_FEATURE = "judge_max_logit"  # the decision model's input: the best excerpt's P(yes), as a logit
UNCALIBRATED_TAU = 0.5
# the label, then a colon (or a dash) and any markdown emphasis around it -- not `\W*`, which would take the
# answer's own leading sign with it ("ANSWER: $4,000" -> "4,000")
_QUOTE = re.compile(r"^\W*quote\b[\s*_]*[:\-\u2013\u2014]?[\s*_]*(.*)$", re.I)
_ANSWER = re.compile(r"^\W*answer\b[\s*_]*[:\-\u2013\u2014]?[\s*_]*(.*)$", re.I)
MIN_QUOTE_WORDS = 4  # a shorter "quote" could sit in any sentence
MAX_UNITS = 9  # the pick's sentences are numbered 1-9 (merged when more), so a number is one token


@dataclass
class ExcerptReading:
    """What the judge made of one excerpt: P(yes), and (when asked) its quote and answer."""

    excerpt: Excerpt
    p_yes: float
    reply: str = ""  # the quote-and-answer reply, as written
    quote: tuple[int, int] | None = None  # the verified sentence span(s) in the source, else None
    answer: str = ""
    pick: int = 0  # the pick's likeliest sentence number (1-based; 0 for the yes/no judge)


def judge_excerpts_of(reading, state, k: int, encoding: str = "cl100k_base") -> list[Excerpt]:
    """The passages of the first `k` evidence windows, in the retrieval's order (the ranker's),
    one excerpt per passage. Not the reader's order: on training-book pairs the passage holding
    the answer came first in the retrieval's order for 33 of 40 inserted answers and 11 of 16
    cut ones, first in the reader's order for 6 and 4 (docs/decision.md)."""
    out: list[Excerpt] = []
    seen: set[str] = set()
    for w in reading.windows:  # evidence_windows keeps the evidence order
        if w.passage_id in seen:
            continue
        seen.add(w.passage_id)
        p = state.passage(w.passage_id)
        out.append(make_excerpt(state, w, p.start, p.end, len(out) + 1, w.score, encoding))
        if len(out) == k:
            break
    return out


def judge_messages(question: str, excerpt: Excerpt) -> Messages:
    return render_prompt("judge_window", question=question, excerpt=_defuse(fold_space(excerpt.text)))


def follow_up(messages: Messages) -> Messages:
    """The judge's conversation, its "yes", and the request for the quote and the answer: the
    beginning is the judge prompt itself, so a local model does not read the excerpt again."""
    return messages + [{"role": "assistant", "content": "yes"}] + render_prompt("quote_answer")


def parse_reply(text: str) -> tuple[str, str]:
    """(quote, answer) from a QUOTE:/ANSWER: reply; a reply without the labels is taken as the
    quote alone."""
    quote, answer = "", ""
    for line in text.splitlines():
        if not quote and (m := _QUOTE.match(line)):
            quote = m.group(1)
        elif not answer and (m := _ANSWER.match(line)):
            answer = m.group(1)
    if not quote and not answer:
        quote = text.strip().splitlines()[0] if text.strip() else ""
    return quote.strip().strip("\"'\u201c\u201d\u2018\u2019 "), answer.strip()


def _norm_char(ch: str) -> str:
    ch = {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2014": "-", "\u2013": "-"}.get(ch, ch)
    return unicodedata.normalize("NFKC", ch).casefold()


def normalised(text: str) -> tuple[str, list[int]]:
    """`text` case-folded, quote marks unified, runs of whitespace and the characters `"` and `_`
    dropped to one space; with the offset in `text` of each character kept."""
    out: list[str] = []
    origin: list[int] = []
    for i, ch in enumerate(text):
        c = _norm_char(ch)
        if c.isspace() or c in '"_*':
            if out and out[-1] != " ":
                out.append(" ")
                origin.append(i)
            continue
        out.append(c)
        origin.append(i)
    while out and out[-1] == " ":
        out.pop()
        origin.pop()
    return "".join(out), origin


def verify_quote(quote: str, excerpt: Excerpt) -> tuple[int, int] | None:
    """The source span of the excerpt's sentences that the quote copies, or None when the quote
    is not in the excerpt (case, quote marks and whitespace aside) or too short to place."""
    q, _ = normalised(quote)
    q = q.strip(" .,;:!?'-")
    if len(q.split()) < MIN_QUOTE_WORDS:
        return None
    text, origin = normalised(excerpt.text)
    at = text.find(q)
    if at < 0:
        return None
    start, end = excerpt.start + origin[at], excerpt.start + origin[at + len(q) - 1] + 1
    sentences = [(excerpt.start + s, excerpt.start + e) for s, e in split_sentences(excerpt.text)]
    covering = [(s, e) for s, e in sentences if s < end and start < e]
    return (covering[0][0], covering[-1][1]) if covering else None


def logit(p: float) -> float:
    p = min(max(float(p), 0.005), 0.995)
    return math.log(p / (1 - p))


def judge_score(p_yes: list[float], feature: str = "max") -> float:
    """A question's score from its excerpts' P(yes): `max`, the best P(yes); `contrast`, the best
    excerpt's logit minus the mean logit of the others (0 with one excerpt). A small model says
    yes more readily to some questions than to others whatever it reads; the contrast asks only
    whether one excerpt stands out."""
    if not p_yes:
        return 0.0
    if feature == "max":
        return max(p_yes)
    ranked = sorted((logit(p) for p in p_yes), reverse=True)
    return ranked[0] - sum(ranked[1:]) / len(ranked[1:]) if len(ranked) > 1 else 0.0


def judge_p_yes(llm: LLM, question: str, excerpt: Excerpt, cost: StageCost) -> float:
    """P(yes) that the excerpt states the answer: from the log-probabilities of the first reply
    token; from the reply itself (yes: 1, anything else: 0) when the backend gives none."""
    return _p_yes(llm, judge_messages(question, excerpt), cost)


def read_excerpt(llm: LLM, question: str, excerpt: Excerpt, cost: StageCost, ask_quote_at: float | None,
                 max_tokens: int, p_yes: float | None = None) -> ExcerptReading:
    """P(yes) on one excerpt (unless known: `p_yes`); with P(yes) >= `ask_quote_at`, its quote and
    answer too."""
    messages = judge_messages(question, excerpt)
    reading = ExcerptReading(excerpt, judge_p_yes(llm, question, excerpt, cost) if p_yes is None else p_yes)
    if ask_quote_at is not None and reading.p_yes >= ask_quote_at:
        completion = charged(llm, cost, lambda: llm.complete(follow_up(messages), max_tokens=max_tokens, temperature=0.0))
        reading.reply = completion.text
        quote, reading.answer = parse_reply(completion.text)
        span = verify_quote(quote, excerpt)
        if span is not None and bears_on(question, excerpt.text[span[0] - excerpt.start: span[1] - excerpt.start]):
            reading.quote = span
    return reading


def bears_on(question: str, sentence: str) -> bool:
    """The quoted sentence shares a content word with the question: a sentence that is really in
    the excerpt but not about the question (a passage telling the reader what to answer, say)
    cannot carry an answer."""
    return bool(content_stems(sentence) & content_stems(question))


def read_excerpts(llm: LLM, question: str, excerpts: list[Excerpt], cost: StageCost, tau: float,
                  max_tokens: int, stop_early: bool = True) -> list[ExcerptReading]:
    """Each excerpt in turn (best first); an excerpt whose P(yes) reaches `tau` is asked for its
    quote at once (its prompt is still evaluated); with `stop_early`, reading stops at the first
    such excerpt whose quote checks out."""
    out = []
    for excerpt in excerpts:
        reading = read_excerpt(llm, question, excerpt, cost, tau, max_tokens)
        out.append(reading)
        if stop_early and reading.quote is not None:
            break
    return out


def excerpt_units(excerpt: Excerpt) -> list[tuple[int, int]]:
    """The excerpt's sentences as source spans, the shortest adjacent two merged until at most
    MAX_UNITS are left (units stay about even in length)."""
    units = [(excerpt.start + s, excerpt.start + e) for s, e in split_sentences(excerpt.text)] or \
        [(excerpt.start, excerpt.end)]
    while len(units) > MAX_UNITS:
        i = min(range(len(units) - 1), key=lambda j: units[j + 1][1] - units[j][0])
        units[i:i + 2] = [(units[i][0], units[i + 1][1])]
    return units


def pick_messages(question: str, sentences: list[str]) -> Messages:
    numbered = "\n".join(f"[{i}] {_defuse(fold_space(s))}" for i, s in enumerate(sentences, 1))
    return render_prompt("pick_sentence", question=question, numbered=numbered)


def number_distribution(llm: LLM, question: str, sentences: list[str], cost: StageCost) -> dict[str, float]:
    """P of each reply "0".."n" (n sentences) from the first reply token's log-probabilities;
    the number the model writes, taken as certain, when the backend gives none."""
    messages = pick_messages(question, sentences)
    numbers = [str(i) for i in range(len(sentences) + 1)]
    candidates = charged(llm, cost, lambda: llm.first_token_logprobs(messages))
    dist = choice_probabilities(candidates or [], numbers)
    if dist is None:
        reply = charged(llm, cost, lambda: llm.complete(messages, max_tokens=3, temperature=0.0)).text
        said = re.match(r"\W*(\d+)", reply)
        dist = {n: float(said is not None and said.group(1) == n) for n in numbers}
    return dist


# A text that answers no question of any book: how readily the model names a sentence for this
# question whatever it reads. A score relative to it (`null`) asks whether the book's excerpt
# does better than nothing for this very question, so the question's form cancels out.
NULL_EXCERPT = ("The morning was grey and a light rain fell on the road. Nobody was about yet. The shops along the "
                "street were still shut, and the only sound was the water running in the gutters. Later the clouds "
                "lifted a little, and by noon the road had dried. In the afternoon a cart went by, and then another. "
                "The evening came on slowly, and the lamps were lit one by one.")


def null_p_some(llm: LLM, question: str, cost: StageCost) -> float:
    """P(some sentence states the answer) on NULL_EXCERPT."""
    sentences = [NULL_EXCERPT[s:e] for s, e in split_sentences(NULL_EXCERPT)]
    return 1.0 - number_distribution(llm, question, sentences, cost)["0"]


def pick_score(p_some: list[float], feature: str, null: float | None = None) -> float:
    """`null`: the best excerpt's logit minus the control text's; else judge_score's."""
    if feature == "null":
        return logit(max(p_some)) - logit(null) if p_some else 0.0
    return judge_score(p_some, feature)


def unit_texts(excerpt: Excerpt) -> list[str]:
    return [excerpt.text[s - excerpt.start: e - excerpt.start] for s, e in excerpt_units(excerpt)]


def pick_sentence(llm: LLM, question: str, excerpt: Excerpt, cost: StageCost) -> ExcerptReading:
    """The excerpt read by the pick: `p_yes` holds P(some sentence states the answer) and `quote`
    the likeliest sentence's span, when it is about the question."""
    units = excerpt_units(excerpt)
    dist = number_distribution(llm, question, unit_texts(excerpt), cost)
    best = max(list(dist)[1:], key=lambda n: dist[n])
    reading = ExcerptReading(excerpt, 1.0 - dist["0"], pick=int(best))
    span = units[int(best) - 1]
    if dist[best] > 0 and bears_on(question, excerpt.text[span[0] - excerpt.start: span[1] - excerpt.start]):
        reading.quote = span
    return reading


def pick_answer(llm: LLM, question: str, reading: ExcerptReading, cost: StageCost) -> tuple[str, tuple[int, int]] | None:
    """The answer in a few words, asked in the pick's own conversation (its number as the model's
    reply), with the sentence that states it: (answer, that sentence's source span), or None when
    the model says NONE or its words are not all in one sentence of the excerpt that is about the
    question. The picked sentence is often the one beside the answer's (docs/pairs.md); the short
    answer finds the sentence itself, and a small model's invented answer does not check out."""
    short = short_answer(llm, question, reading, cost)
    span = stating_sentence(short, question, reading.excerpt)
    return (short, span) if span is not None else None


@dataclass
class StatedAnswer:
    """A short answer that checked out: the excerpt it came from, the answer, the source span of
    the sentence that states it, and (when asked) P(yes) of its second reading (confirm_p_yes)."""

    reading: ExcerptReading
    answer: str
    span: tuple[int, int]
    confirmed: float | None = None


def stated_answers(llm: LLM, question: str, readings: list[ExcerptReading], cost: StageCost, tries: int,
                   confirm: bool, anew: bool = False) -> Iterator[StatedAnswer]:
    """The short answers that check out (pick_answer) of the `tries` best-scored excerpts, in that
    order, then, with `anew`, the best excerpt's asked in a new conversation (answer_anew); each
    read again when `confirm`; lazily, so a caller that takes the first good one makes no further
    calls. The best excerpt's answer is often not what its sentence says (docs/pairs.md): the next
    excerpt may hold the answer, or the best one asked without the pick's number."""
    ranked = sorted(readings, key=lambda r: -r.p_yes)
    for reading in ranked[:max(1, tries)]:
        stated = pick_answer(llm, question, reading, cost)
        if stated is not None:
            yield _read_again(llm, question, reading, *stated, cost, confirm)
    if anew and ranked:
        short = answer_anew(llm, question, ranked[0].excerpt, cost)
        span = stating_sentence(short, question, ranked[0].excerpt)
        if span is not None:
            yield _read_again(llm, question, ranked[0], short, span, cost, confirm)


def _read_again(llm: LLM, question: str, reading: ExcerptReading, short: str, span: tuple[int, int],
                cost: StageCost, confirm: bool) -> StatedAnswer:
    p = confirm_p_yes(llm, question, short, reading.excerpt, span, cost) if confirm else None
    return StatedAnswer(reading, short, span, p)


def answer_anew(llm: LLM, question: str, excerpt: Excerpt, cost: StageCost) -> str:
    """The excerpt's words that answer the question, asked in a new conversation (prompts/
    answer_excerpt): the pick's conversation answers from the sentence the pick named, and the
    pick often names the sentence beside the answer's."""
    messages = render_prompt("answer_excerpt", question=question, excerpt=_defuse(fold_space(excerpt.text)))
    return _short_reply(charged(llm, cost, lambda: llm.complete(messages, max_tokens=24, temperature=0.0)).text)


def first_stated_answer(llm: LLM, question: str, readings: list[ExcerptReading], cost: StageCost,
                        tries: int, confirm_at: float | None = None,
                        unconfirmed: list[StatedAnswer] | None = None, anew: bool = False) -> StatedAnswer | None:
    """The first of stated_answers whose second reading reaches `confirm_at` (any, when None);
    those that checked out but did not reach it are added to `unconfirmed`."""
    for stated in stated_answers(llm, question, readings, cost, tries, confirm_at is not None, anew):
        if confirmed_enough(stated, confirm_at):
            return stated
        if unconfirmed is not None:
            unconfirmed.append(stated)
    return None


def confirmed_enough(stated: StatedAnswer, confirm_at: float | None) -> bool:
    return confirm_at is None or (stated.confirmed is not None and stated.confirmed >= confirm_at)


def confirm_messages(question: str, answer: str, excerpt: Excerpt, span: tuple[int, int]) -> Messages:
    """The stating sentence with the one before it (its subject is often there), from the excerpt."""
    spans = [(excerpt.start + s, excerpt.start + e) for s, e in split_sentences(excerpt.text)]
    at = next((i for i, (s, e) in enumerate(spans) if s <= span[0] < e), 0)
    start = spans[at - 1][0] if at else span[0]
    text = excerpt.text[start - excerpt.start: span[1] - excerpt.start]
    return render_prompt("confirm_answer", question=question, answer=_defuse(answer), sentences=_defuse(fold_space(text)))


def confirm_p_yes(llm: LLM, question: str, answer: str, excerpt: Excerpt, span: tuple[int, int], cost: StageCost) -> float:
    """P(yes) that the stating sentence (with the one before it) says the short answer answers
    the question: a second reading of an answer that checked out word by word. Where the book is
    silent, the answer that checks out is a word of a sentence near the question's subject; asked
    of that sentence alone whether it says so, the model says yes less often (training pairs:
    docs/pairs.md)."""
    return _p_yes(llm, confirm_messages(question, answer, excerpt, span), cost)


def _p_yes(llm: LLM, messages: Messages, cost: StageCost) -> float:
    """P(yes) from the first reply token's log-probabilities; the reply, taken as certain, when
    the backend gives none."""
    p = charged(llm, cost, lambda: llm.yes_no_logprob(messages))
    if p is not None:
        return float(p)
    reply = charged(llm, cost, lambda: llm.complete(messages, max_tokens=3, temperature=0.0)).text
    return 1.0 if reply.strip().strip(".!*\"'").lower().startswith("yes") else 0.0


def short_answer(llm: LLM, question: str, reading: ExcerptReading, cost: StageCost) -> str:
    """The model's reply, asked in the pick's conversation for the answer in a few words."""
    messages = pick_messages(question, unit_texts(reading.excerpt)) + \
        [{"role": "assistant", "content": str(reading.pick)}] + render_prompt("pick_answer")
    return _short_reply(charged(llm, cost, lambda: llm.complete(messages, max_tokens=24, temperature=0.0)).text)


def _short_reply(text: str) -> str:
    """A short answer as the model wrote it, without the quote marks and full stop around it."""
    return fold_space(text).strip(" .\"'\u201c\u201d")


def stating_sentence(short: str, question: str, excerpt: Excerpt) -> tuple[int, int] | None:
    """The source span of the excerpt's sentence that states the short answer: the one holding
    most of its content words, if it holds all of them and every number it gives, and is about
    the question; else, for an answer that restates the question ("The lame lady was three years
    old when she twisted her foot"), the one holding all of its words the question does not have
    and every number it gives. None for NONE, an answer of the question's own words, or one no
    sentence holds."""
    said, numbers = stems_besides_numbers(short), set(numbers_in(short))  # numbers by value: "7" is "seven"
    asked = content_stems(question)
    new = (said - asked) | (numbers - set(numbers_in(question)))
    if not new or "none" in short.lower().split():
        return None
    found = _sentence_holding(said, numbers, question, excerpt)
    if found is None and said & asked:  # what the answer says beyond the question must be stated
        found = _sentence_holding(said - asked, numbers, question, excerpt)
    return found


def _sentence_holding(words: set[str], numbers: set[str], question: str, excerpt: Excerpt) -> tuple[int, int] | None:
    """The source span of the excerpt's sentence about the question that holds all `words` and
    `numbers` (the one holding most of them), or None."""
    def holds(span: tuple[int, int]) -> tuple[int, int]:
        text = excerpt.text[span[0]:span[1]]
        return len(content_stems(text) & words), len(set(numbers_in(text)) & numbers)

    spans = split_sentences(excerpt.text) or [(0, len(excerpt.text))]
    s, t = max(spans, key=lambda span: sum(holds(span)))
    if holds((s, t)) != (len(words), len(numbers)) or not bears_on(question, excerpt.text[s:t]):
        return None
    return excerpt.start + s, excerpt.start + t


def quoted_excerpt(state, reading: ExcerptReading, encoding: str = "cl100k_base") -> Excerpt:
    """The cited excerpt: the verified sentence(s), from the book, in the judged excerpt's passage."""
    from ..records import Window

    e = reading.excerpt
    start, end = reading.quote
    where = Window(e.passage_id, e.doc_id, e.file, e.start, e.end, e.text)
    return make_excerpt(state, where, start, end, e.n, reading.p_yes, encoding)
