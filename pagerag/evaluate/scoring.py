"""Scoring one answer against its gold: strict, lenient (token recall or an LLM judge), refusal,
evidence recall.

- strict: the normalised gold answer or one alias occurs in the normalised answer as a whole run
  of words (so "no" never matches "not", "7" never matches "17"). Yes/no gold answers compare
  the first yes/no word of the answer instead.
- lenient without a judge: token recall of the gold answer (content words; the best alias)
  >= LENIENT_RECALL. With a judge (grading.py), the judge decides for answers that are not
  already strictly right.
- normalisation: NFKC, lower case, curly quotes folded, punctuation and hyphens to spaces,
  articles dropped, number words zero..ninety (and "a hundred") to digits, "1,000" to "1000",
  "1st" to "1".
- evidence recall: the share of gold quotes that are substrings of the cited evidence, runs of
  whitespace collapsed to one space; citations of one file that overlap or touch are joined
  first, so a quote spread over two cited sentences still counts.
- paraphrased evidence (GraphRAG-Bench states its evidence in its own words): a statement is
  located in a text when at least EVIDENCE_LOCATED of its content words (lower case, stop words
  and words of <= 2 letters dropped, a crude suffix strip) occur in it. The retrieval benchmark
  and the training corpus (pagerag.train) use this one rule.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Iterable

LENIENT_RECALL = 0.5

_ARTICLES = {"a", "an", "the"}
# Function words left out of token recall: they would let "the X of the Y" match anything.
_STOPWORDS = _ARTICLES | {
    "of", "and", "or", "to", "in", "on", "at", "by", "for", "with", "from", "as", "is", "was", "were", "be", "been",
    "are", "his", "her", "their", "its", "he", "she", "it", "they", "that", "this", "which", "who", "whom", "s",
}
_UNITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
          "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
_NUMBER_WORDS = {word: value for value, word in enumerate(_UNITS)} | _TENS
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-"})
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")
_NON_WORD = re.compile(r"[^\w\s]|_")
_POSSESSIVE = re.compile(r"'s\b")
_CITATION = re.compile(r"\[\s*\d+(?:\s*[,;]\s*\d+)*\s*\]")
_YES_NO = {"yes", "no"}
_ORDINAL = re.compile(r"^(\d+)(?:st|nd|rd|th)$")


def normalise(text: str) -> str:
    """The form answers are compared in (see the module doc)."""
    return " ".join(tokens(text))


def tokens(text: str) -> list[str]:
    text = unicodedata.normalize("NFKC", text or "").translate(_QUOTES).lower()
    text = _CITATION.sub(" ", text)
    text = _THOUSANDS.sub("", text)
    text = _POSSESSIVE.sub("", text).replace("'", "")  # "scrooge's" -> "scrooge", "o'clock" -> "oclock"
    words = [w for w in _NON_WORD.sub(" ", text).split() if w not in _ARTICLES]
    return _numbers_to_digits(words)


def _numbers_to_digits(words: list[str]) -> list[str]:
    """"twenty five" / "twenty-five" -> "25", "fifteen" -> "15", "a hundred" (article already gone) -> "100"."""
    out: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word in _TENS and i + 1 < len(words) and words[i + 1] in _NUMBER_WORDS and _NUMBER_WORDS[words[i + 1]] < 10:
            out.append(str(_TENS[word] + _NUMBER_WORDS[words[i + 1]]))
            i += 2
            continue
        if word in _NUMBER_WORDS:
            out.append(str(_NUMBER_WORDS[word]))
        elif _ORDINAL.match(word):  # "1st" -> "1" (ordinal words stay: "first" is rarely a date)
            out.append(_ORDINAL.match(word).group(1))
        elif word == "hundred":
            if out and out[-1].isdigit():
                out[-1] = str(int(out[-1]) * 100)
            else:
                out.append("100")
        else:
            out.append(word)
        i += 1
    return out


# --------------------------------------------------------------------------------------------
# Strict and lenient


def strict_match(answer: str, golds: Iterable[str]) -> bool:
    """A gold answer or alias occurs in the answer as a whole run of normalised words."""
    answer_tokens = tokens(answer)
    for gold in golds:
        gold_tokens = tokens(gold)
        if not gold_tokens:
            continue
        if _is_yes_no(gold_tokens):
            if _first_yes_no(answer_tokens) == gold_tokens[0]:
                return True
        elif _contains_run(answer_tokens, gold_tokens):
            return True
    return False


def token_recall(answer: str, golds: Iterable[str]) -> float:
    """The best alias's share of content words that appear in the answer (0..1)."""
    answer_set = set(tokens(answer))
    best = 0.0
    for gold in golds:
        gold_tokens = tokens(gold)
        if not gold_tokens:
            continue
        if _is_yes_no(gold_tokens):
            best = max(best, 1.0 if _first_yes_no(tokens(answer)) == gold_tokens[0] else 0.0)
            continue
        content = [t for t in dict.fromkeys(gold_tokens) if t not in _STOPWORDS] or list(dict.fromkeys(gold_tokens))
        best = max(best, sum(t in answer_set for t in content) / len(content))
    return best


def lenient_by_recall(answer: str, golds: Iterable[str]) -> bool:
    golds = list(golds)
    return strict_match(answer, golds) or token_recall(answer, golds) >= LENIENT_RECALL


def _is_yes_no(gold_tokens: list[str]) -> bool:
    return len(gold_tokens) == 1 and gold_tokens[0] in _YES_NO


def _first_yes_no(answer_tokens: list[str]) -> str | None:
    return next((t for t in answer_tokens if t in _YES_NO), None)


def _contains_run(haystack: list[str], needle: list[str]) -> bool:
    n = len(needle)
    return any(haystack[i:i + n] == needle for i in range(len(haystack) - n + 1))


# --------------------------------------------------------------------------------------------
# Evidence recall


def collapse(text: str) -> str:
    return " ".join((text or "").split())


def cited_text(citations: list[dict[str, Any]]) -> list[str]:
    """The cited evidence as whitespace-collapsed blocks: citations of one file that overlap or
    touch are joined into one block (their quotes are exact source spans, so the join is the
    source text itself)."""
    blocks: list[str] = []
    ordered = sorted(citations, key=lambda c: (str(c.get("file", "")), int(c.get("start", 0)), int(c.get("end", 0))))
    file, start, end, text = None, 0, 0, ""
    for c in ordered:
        c_file, c_start, c_end, quote = str(c.get("file", "")), int(c.get("start", 0)), int(c.get("end", 0)), str(c.get("quote", ""))
        if text and c_file == file and c_start <= end + 1:
            if c_end > end:
                text += quote[max(0, end - c_start):] if c_start < end else (" " + quote)
                end = c_end
            continue
        if text:
            blocks.append(collapse(text))
        file, start, end, text = c_file, c_start, c_end, quote
    if text:
        blocks.append(collapse(text))
    return blocks


def evidence_recall(gold_quotes: list[str], citations: list[dict[str, Any]]) -> float | None:
    """Share of gold quotes found inside the cited evidence; None when there are no gold quotes."""
    quotes = [collapse(q) for q in gold_quotes if collapse(q)]
    if not quotes:
        return None
    blocks = cited_text(citations)
    found = sum(any(q in block for block in blocks) for q in quotes)
    return found / len(quotes)


# --------------------------------------------------------------------------------------------
# Paraphrased evidence located in a text

EVIDENCE_LOCATED = 0.6
_EVIDENCE_STOP = frozenset("""a an the of to in on at by for with and or but is are was were be been being it its this
that these those he she they him her them his their who whom whose which what when where why how as from into
than then there here also not no so such do does did has have had can could would should will shall may
might must about over under after before between during while one two very more most some any all each
narrative narrator book story novel""".split())
_EVIDENCE_WORD = re.compile(r"[a-z0-9]+")


def content_words(text: str) -> frozenset[str]:
    """The words a paraphrase must share with its source: lower case, no stop words, no words of
    two letters or fewer, "-ing/-ed/-es/-s" stripped when four letters remain."""
    words = _EVIDENCE_WORD.findall((text or "").lower().replace("\u2019", "'"))
    return frozenset(_stem(w) for w in words if w not in _EVIDENCE_STOP and len(w) > 2)


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def coverage(statement_words: frozenset[str], text_words: frozenset[str]) -> float:
    """Share of a statement's content words that occur in a text (0 for an empty statement)."""
    return len(statement_words & text_words) / len(statement_words) if statement_words else 0.0


def located(statement_words: frozenset[str], text_words: frozenset[str]) -> bool:
    """The located rule on precomputed content words (see `statement_located`)."""
    return bool(statement_words) and coverage(statement_words, text_words) >= EVIDENCE_LOCATED


def statement_located(statement: str, spans: Iterable[str]) -> bool:
    """True when one span holds at least EVIDENCE_LOCATED of the statement's content words."""
    words = content_words(statement)
    return any(located(words, content_words(span)) for span in spans)


# --------------------------------------------------------------------------------------------
# One result


@dataclass
class Score:
    strict: bool
    lenient: bool
    lenient_method: str  # token-recall | judge:<backend> | strict (judge skipped: strictly right)
    token_recall: float
    evidence_recall: float | None
    correct_refusal: bool | None  # on unanswerable questions
    false_refusal: bool | None  # on answerable questions
    judge_note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"strict": self.strict, "lenient": self.lenient, "lenient_method": self.lenient_method,
                "token_recall": round(self.token_recall, 4),
                "evidence_recall": None if self.evidence_recall is None else round(self.evidence_recall, 4),
                "correct_refusal": self.correct_refusal, "false_refusal": self.false_refusal, "judge_note": self.judge_note}


def score_answer(item, decision: str, answer_text: str, citations: list[dict[str, Any]], judge=None) -> Score:
    """Score one system output for QAItem `item`. `judge` (optional) has
    `.accepts(question, golds, answer) -> (bool, note)` and a `.name`."""
    answered = decision == "answered"
    if not item.answerable:
        # only a refusal is correct here: an error (no answer at all) is not a refusal
        return Score(False, False, "n/a", 0.0, None, correct_refusal=decision == "refused", false_refusal=None)
    recall_of_quotes = evidence_recall(item.evidence, citations if answered else []) if item.evidence_verbatim else None
    if not answered:
        return Score(False, False, "n/a", 0.0, recall_of_quotes, correct_refusal=None, false_refusal=decision == "refused")
    text = _CITATION.sub(" ", answer_text)
    strict = strict_match(text, item.answers)
    recall = token_recall(text, item.answers)
    if judge is None:
        return Score(strict, strict or recall >= LENIENT_RECALL, "token-recall", recall, recall_of_quotes, None, False)
    if strict:
        return Score(True, True, "strict", recall, recall_of_quotes, None, False)
    accepted, note = judge.accepts(item.question, item.answers, text)
    method = f"judge:{judge.name}" if accepted is not None else "token-recall (judge failed)"
    lenient = accepted if accepted is not None else recall >= LENIENT_RECALL
    return Score(False, lenient, method, recall, recall_of_quotes, None, False, judge_note=note)
