"""Compose an answer from the excerpts: render prompts, ask the LLM, and check its citations.

Prompts live in prompts/<name>.txt and are rendered by pagerag.llm.prompts (placeholders filled
in one pass, so book text is never expanded). The judge and answer templates begin with the
same system text and excerpt block, so a local llama.cpp model reuses the evaluated prefix.

Book text is data: the excerpts sit between <<< and >>> fences (fence marks inside the text are
neutralised) under a system line saying so, and whatever the model writes, the decision to
answer is taken here: an answer counts only through citations that name an excerpt that exists.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..llm import LLM, Messages, render_prompt
from ..records import Citation, Excerpt
from .context import fold_space

REFUSAL_WORD = "INSUFFICIENT"
REFUSAL_RULE = f" If the excerpts do not state the answer, reply with the single word {REFUSAL_WORD}."
_CITATION = re.compile(r"\[(\s*\d+\s*(?:[,;]\s*\d+\s*)*)\]")


def render_excerpts(excerpts: list[Excerpt]) -> str:
    """`[n] text` per excerpt, whitespace folded, fence marks defused."""
    return "\n\n".join(f"[{e.n}] {_defuse(fold_space(e.text))}" for e in excerpts)


def _defuse(text: str) -> str:
    return text.replace("<<<", "< < <").replace(">>>", "> > >")


# --------------------------------------------------------------------------------------------
# Citations


@dataclass
class CheckedAnswer:
    text: str  # the answer with invalid citation marks removed
    citations: list[Citation]
    invalid: list[int]  # cited numbers that name no excerpt
    abstained: bool  # the model said INSUFFICIENT


def cited_numbers(text: str) -> list[int]:
    """Every n in [n], [n, m] or [n][m], in order of first appearance."""
    numbers: list[int] = []
    for match in _CITATION.finditer(text):
        for part in re.split(r"[,;]", match.group(1)):
            n = int(part)
            if n not in numbers:
                numbers.append(n)
    return numbers


def check_citations(text: str, excerpts: list[Excerpt]) -> CheckedAnswer:
    """Keep the citations that exist, drop the marks of those that do not."""
    by_n = {e.n: e for e in excerpts}
    stripped = text.strip()
    if stripped.strip(" .\"'*").upper().startswith(REFUSAL_WORD):
        return CheckedAnswer(stripped, [], [], abstained=True)
    numbers = cited_numbers(stripped)
    valid = [n for n in numbers if n in by_n]
    invalid = [n for n in numbers if n not in by_n]

    def keep_valid(match: re.Match) -> str:
        kept = [p.strip() for p in re.split(r"[,;]", match.group(1)) if int(p) in by_n]
        return f"[{', '.join(kept)}]" if kept else ""

    cleaned = re.sub(r"\s+([.,;])", r"\1", _CITATION.sub(keep_valid, stripped)).strip()
    if not re.search(r"[A-Za-z0-9]", _CITATION.sub("", cleaned)):
        valid = []  # citation marks alone state nothing: there is no answer to support
    return CheckedAnswer(cleaned, [Citation.of(by_n[n]) for n in valid], invalid, abstained=False)


def _content_words(text: str) -> list[str]:
    """The stems of a text's content words (no stop words, no words of two letters or fewer),
    citation marks removed, in order."""
    from ..text.words import STOPWORDS, stem, words

    return [stem(w) for w in words(_CITATION.sub(" ", text)) if len(w) > 2 and w.lower() not in STOPWORDS]


def content_stems(text: str) -> set[str]:
    return set(_content_words(text))


def stems_besides_numbers(text: str) -> set[str]:
    """content_stems of the text with its numbers left out, digits and number words alike: those
    are compared by value (numbers_in), so "1400 pounds" is stated by "fourteen hundred pounds"."""
    return content_stems(_NUMBER_SPAN.sub(lambda m: m[0] if m[0].lower() in _NOT_ALONE else " ", text))


def _answers_the_question(excerpt: str, answer: str, question: str, threshold: float) -> bool:
    """Some sentence of `excerpt` shares a content word with the question and holds at least
    `threshold` of the answer's own (not the question's) content words."""
    from ..text.sentences import split_sentences

    asked = content_stems(question)
    stated = content_stems(answer) - asked
    if not stated:
        return False
    for start, end in split_sentences(excerpt):
        words = content_stems(excerpt[start:end])
        if words & asked and len(words & stated) >= threshold * len(stated):
            return True
    return False


def answer_support(text: str, citations: list[Citation], question: str) -> float:
    """Share of the answer's content words (stemmed, citation marks removed) that its cited
    excerpts or the question contain — 0 when none of them comes from the excerpts themselves:
    a cited answer that the excerpts do not bear out (a model echoing the prompt, or adding
    outside knowledge) scores low."""
    from ..text.words import stem, words

    content = _content_words(text)
    if not content:
        return 0.0
    cited = {stem(w) for c in citations for w in words(c.quote)}
    asked = {stem(w) for w in words(question)}
    if not any(w in cited and w not in asked for w in content):
        return 0.0  # restating the question proves nothing
    return sum(w in cited or w in asked for w in content) / len(content)


_UNITS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
          "seventeen eighteen nineteen").split()
_TENS = dict(zip("twenty thirty forty fifty sixty seventy eighty ninety".split(), range(20, 100, 10)))
_NUMBER_VALUES = {w: i for i, w in enumerate(_UNITS)} | _TENS | {"hundred": 100, "thousand": 1000, "million": 10**6}
_ORDINALS = dict(zip(("first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth "
                      "fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth").split(), range(1, 20))) | \
    dict(zip("twentieth thirtieth fortieth fiftieth sixtieth seventieth eightieth ninetieth".split(), range(20, 100, 10)))
_NOT_ALONE = {"one", "first", "second"}  # alone, more often "the old one", "first name" or "a second" than a number
_NUMBER_WORD = "|".join(sorted([*_NUMBER_VALUES, *_ORDINALS], key=len, reverse=True))
_NUMBER_SPAN = re.compile(rf"(?<![\w\u00c0-\u024f])(?:\d[\d,.]*(?:st|nd|rd|th|s)?|(?:{_NUMBER_WORD})(?:-(?:{_NUMBER_WORD}))*)"
                          rf"(?![\w\u00c0-\u024f])", re.I)
_NUMBER_TOKEN = re.compile(r"\d[\d,]*(?:\.\d+)?|[A-Za-z]+(?:-[A-Za-z]+)?")
_SENTENCE_START = re.compile(r"(?:^|[.!?:;]\s+|\n\s*)[\"'\u201c\u2018(]*$")


def numbers_in(text: str) -> list[str]:
    """The numbers a text states, as canonical strings: digits ("1,200" -> "1200") and number
    words ("fifteen" -> "15", "twenty-five" / "twenty five" -> "25", "fourteen hundred" -> "1400",
    "three hundred and twenty" -> "320", "forty-two thousand" -> "42000") and ordinals ("the
    twenty-first" / "twenty first" -> "21", "fourth" -> "4"). "One", "first" and "second" alone are
    left out: more often a pronoun, a first name or a moment than a count or a date."""
    out: list[str] = []
    for clause in _CLAUSE_BREAK.split(text):  # "twenty; seven" is two numbers
        tokens = [t.lower() for t in _NUMBER_TOKEN.findall(clause)]
        i = 0
        while i < len(tokens):
            if tokens[i][0].isdigit():
                out.append(tokens[i].replace(",", "").rstrip("."))
                i += 1
                continue
            value, after = _spelt_number(tokens, i)
            if value is not None and not (after == i + 1 and tokens[i] in _NOT_ALONE):
                out.append(str(value))
            i = max(after, i + 1)
    return out


_CLAUSE_BREAK = re.compile(r"[;:!?()\[\]\"\u201c\u201d]|[,.](?!\d)")


_MULTIPLIERS = {"hundred": 100, "thousand": 1000, "million": 10**6}


def _spelt_number(tokens: list[str], i: int) -> tuple[int | None, int]:
    """The value of the number words from tokens[i] and the index after them, or (None, i): a
    word or hyphened pair ("forty-two"), a unit after a tens word, then each multiplier with the
    smaller number after it ("and" allowed between)."""
    parts = tokens[i].split("-") if i < len(tokens) else []
    if parts and parts[-1] in _ORDINALS and all(p in _TENS for p in parts[:-1]):  # an ordinal ends the number
        return sum(_NUMBER_VALUES[p] for p in parts[:-1]) + _ORDINALS[parts[-1]], i + 1
    if not parts or not all(p in _NUMBER_VALUES for p in parts):
        return None, i
    value, i = sum(_NUMBER_VALUES[p] for p in parts), i + 1
    if tokens[i - 1] in _MULTIPLIERS:  # "a hundred and forty"
        return _and_the_rest(tokens, i, value, value)
    if tokens[i - 1] in _TENS and i < len(tokens) and tokens[i] in _UNITS[1:10]:
        value, i = value + _NUMBER_VALUES[tokens[i]], i + 1
    elif tokens[i - 1] in _TENS and i < len(tokens) and _ORDINALS.get(tokens[i], 10) < 10:  # "twenty first"
        return value + _ORDINALS[tokens[i]], i + 1
    while i < len(tokens) and tokens[i] in _MULTIPLIERS and value < _MULTIPLIERS[tokens[i]]:
        multiplier = _MULTIPLIERS[tokens[i]]
        value, i = _and_the_rest(tokens, i + 1, value * multiplier, multiplier)
    return value, i


def _and_the_rest(tokens: list[str], i: int, value: int, multiplier: int) -> tuple[int, int]:
    """`value` (ending in `multiplier`) plus a smaller number after it, "and" allowed between."""
    at = i + 1 if i < len(tokens) and tokens[i] == "and" else i
    rest, after = _spelt_number(tokens, at)
    return (value + rest, after) if rest is not None and rest < multiplier else (value, i)


def names_in(text: str, context: str = "") -> list[str]:
    """The names a text states (text.names). A single capitalised word that opens a sentence may
    be an ordinary word ("Yes", "Nothing"), so it counts only when it also stands capitalised
    inside a sentence of the text or of `context` (the question, the excerpts)."""
    from ..text.names import find_names

    def inside(word: str, where: str) -> bool:
        return any(not _SENTENCE_START.search(where[: m.start()])
                   for m in re.finditer(rf"(?<![\w\u00c0-\u024f]){re.escape(word)}(?![\w\u00c0-\u024f])", where))

    out = []
    for name in find_names(text):
        if not name.words:
            continue
        opener = len(name.words) == 1 and " " not in name.text and _SENTENCE_START.search(text[: name.start])
        if opener and not (inside(name.text, text) or inside(name.text, context)):
            continue
        out.append(name.text)
    return out


def ungrounded(text: str, citations: list[Citation], question: str = "") -> list[str]:
    """The names and numbers the answer states that none of its cited excerpts states: the
    grounding check. Words of the question do not count as support (an answer may not take a
    sum from the question: "earns twenty shillings [1]" against "fifteen shillings a week" is
    unsupported, whatever the question said); the question only helps tell a name from an
    ordinary word that opens a sentence."""
    from ..text.names import find_names

    body = _CITATION.sub(" ", text)
    cited = " ".join(c.quote for c in citations)
    cited_numbers = set(numbers_in(cited))
    cited_words = {w.lower() for w in re.findall(r"[\w\u00c0-\u024f]+", cited)}
    missing = [n for n in numbers_in(body) if n not in cited_numbers]
    stated = set(names_in(body, f"{question}\n{cited}"))
    missing += [n.text for n in find_names(body)
                if n.text in stated and not all(w.lower() in cited_words for w in n.words)]
    return list(dict.fromkeys(missing))


def recite(text: str, excerpts: list[Excerpt], question: str, threshold: float) -> list[Citation]:
    """The single excerpt that best bears the answer out, if it reaches `threshold`; else [].
    The system, not the model, chooses this citation, so it must be one a reader would accept:
    some sentence of the excerpt has to be about the question (share a content word with it)
    and state most of the answer (`threshold` of its own content words). Otherwise any sentence
    of the book -- a passage that dictates an answer, say -- could launder an answer that has
    nothing to do with the question."""
    scored = [(answer_support(text, [Citation.of(e)], question), e) for e in excerpts
              if _answers_the_question(e.text, text, question, threshold)]
    best_share, best = max(scored, key=lambda pair: pair[0], default=(0.0, None))
    return [Citation.of(best)] if best is not None and best_share >= threshold else []


# --------------------------------------------------------------------------------------------
# LLM answer


def answer_messages(question: str, excerpts: list[Excerpt], allow_refusal: bool = True,
                    graph_context: str = "") -> Messages:
    """`graph_context`: the labelled block of context.graph_context ("" for none)."""
    return render_prompt("answer", excerpts=render_excerpts(excerpts), question=question,
                         refusal_rule=REFUSAL_RULE if allow_refusal else "", graph_context=graph_context)


def llm_answer(llm: LLM, question: str, excerpts: list[Excerpt], *, max_tokens: int, temperature: float,
               allow_refusal: bool = True, graph_context: str = "") -> tuple[CheckedAnswer, object]:
    """(checked answer, completion) from the LLM."""
    completion = llm.complete(answer_messages(question, excerpts, allow_refusal, graph_context), max_tokens=max_tokens,
                              temperature=temperature)
    return check_citations(completion.text, excerpts), completion
