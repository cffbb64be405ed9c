"""A chat's last question, made to stand alone from the earlier turns.

Chat clients send the whole conversation; a follow-up such as "When did he die?" means nothing
to retrieval on its own. Before answering, the last user message is rewritten into a standalone
question:

- with an LLM configured (the request's backend), by the LLM (prompts/rewrite_question.txt),
  from the last few turns; a reply that is not one usable question falls back to:
- without one, by resolving pronouns to the entities of the previous question and answer
  (PageRAG.entities_in: the book's graph entities they name): "he"/"she"/"his"/"her" to the
  person, "it"/"its" to a named thing, "they"/"their" to several people. A question that
  already names a person keeps its pronouns (they most likely point at that person).

The chat reply says which question was answered (chat.py).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..records import StageCost

MAX_TURNS = 6  # the turns the LLM sees before the last question
TURN_CHARS = 1200  # each cut to this length
PERSON = "PERSON"
NOT_A_THING = ("PERSON", "NOUN_PHRASE")
# a reply's footnotes and the "Answering: …" line name files and repeat the question: not content
_FOOTNOTE = re.compile(r"^\[\d+\] .*$|^Answering: .*$", re.M)
_PRONOUN = re.compile(r"\b(he|him|his|himself|she|her|hers|herself|it|its|they|them|their|theirs)\b", re.I)
_MASCULINE = frozenset(("he", "him", "his", "himself"))
_FEMININE = frozenset(("she", "her", "hers", "herself"))
# after these "her" is an object ("gave her a"), before a noun it is possessive ("her ring")
_NOT_A_NOUN = frozenset("a an the and or but to in on at of for with about from by as than that when "
                        "where why how what who whom if so up out off down over after before".split())


@dataclass
class Standalone:
    question: str  # what is answered
    original: str  # the last user message
    method: str | None = None  # llm | pronouns | None (unchanged)
    cost: StageCost = field(default_factory=StageCost)  # the LLM's tokens for the rewrite

    @property
    def rewritten(self) -> bool:
        return self.question != self.original


def standalone(turns: list[tuple[str, str]], rag: Any, max_chars: int) -> Standalone:
    """`turns`: (role, text) of the user and assistant messages, the last being the question."""
    question = turns[-1][1]
    earlier = [(role, _content(role, text)) for role, text in turns[:-1]]
    if not any(role == "user" for role, _ in earlier):
        return Standalone(question, question)
    result = Standalone(question, question)
    llm = rag.llm
    if llm is not None:
        rewritten = _with_llm(llm, earlier, question, max_chars, result.cost)
        if rewritten is not None:
            result.question, result.method = rewritten, "llm"
            return result
    resolved = resolve_pronouns(earlier, question, rag)
    if resolved != question and len(resolved) <= max_chars:
        result.question, result.method = resolved, "pronouns"
    return result


def _content(role: str, text: str) -> str:
    return _FOOTNOTE.sub("", text).strip() if role == "assistant" else text.strip()


# ---- with the LLM -----------------------------------------------------------------------------


def _with_llm(llm, earlier: list[tuple[str, str]], question: str, max_chars: int, cost: StageCost) -> str | None:
    from ..errors import BackendError
    from ..llm import charged, complete_json, render_prompt

    shown = "\n".join(f"{role}: {' '.join(text.split())[:TURN_CHARS]}" for role, text in earlier[-MAX_TURNS:])
    messages = render_prompt("rewrite_question", conversation=shown, question=question)
    try:
        reply, _ = charged(llm, cost, lambda: complete_json(llm, messages, max_tokens=120, required=("question",)))
    except BackendError:
        return None  # no rewrite rather than no answer: the pronoun rule takes over
    from .inputs import text_problem

    rewritten = " ".join(str(reply.get("question", "")).split())
    return rewritten if 0 < len(rewritten) <= max_chars and text_problem(rewritten) is None else None


# ---- without an LLM: pronouns to the entities of the previous turns ---------------------------


def resolve_pronouns(earlier: list[tuple[str, str]], question: str, rag) -> str:
    """`question` with its pronouns replaced by the entities the conversation was last about;
    each earlier user question is resolved first, so a chain of follow-ups keeps its subject."""
    focus: list[dict] = []
    for i, (role, text) in enumerate(earlier):
        if role != "user":
            continue
        resolved = _replace(text, focus, rag.entities_in(text))
        named = rag.entities_in(resolved)
        answer = next((t for r, t in earlier[i + 1 :] if r == "assistant"), "")
        if named or answer:
            focus = named + [e for e in rag.entities_in(answer) if e["entity_id"] not in {n["entity_id"] for n in named}]
    return _replace(question, focus, rag.entities_in(question))


def _replace(question: str, focus: list[dict], linked: list[dict]) -> str:
    if not focus:
        return question
    people = [e for e in focus if e["type"] == PERSON and e["mention"][:1].isupper()]
    things = [e for e in focus if e["type"] not in NOT_A_THING and e["mention"][:1].isupper()]
    pronouns = {m.group(0).lower() for m in _PRONOUN.finditer(question)}
    # a question naming a person ("Scrooge … his clerk"), or with both "he" and "she", keeps them
    keep_people = any(e["type"] == PERSON and e["mention"][:1].isupper() for e in linked) or (
        bool(pronouns & _MASCULINE) and bool(pronouns & _FEMININE))

    def name(entity: dict) -> str:  # the book's name for it (its graph entity), as the answer will use it
        return entity["name"] if entity["name"][:1].isupper() else entity["mention"]

    def swap(match: re.Match) -> str:
        word = match.group(0).lower()
        if word in ("he", "him", "himself", "she", "herself") and people and not keep_people:
            return name(people[0])
        if word in ("his", "hers") and people and not keep_people:
            return name(people[0]) + "'s"
        if word == "her" and people and not keep_people:
            return name(people[0]) + ("'s" if _before_a_noun(question, match.end()) else "")
        if word in ("it", "its") and things and not linked:
            return name(things[0]) + ("'s" if word == "its" else "")
        if word in ("they", "them", "their", "theirs") and len(people) >= 2 and not keep_people:
            both = f"{name(people[0])} and {name(people[1])}"
            return both + ("'s" if word in ("their", "theirs") else "")
        return match.group(0)

    return _PRONOUN.sub(swap, question)


def _before_a_noun(text: str, end: int) -> bool:
    following = re.match(r"\s+([A-Za-z']+)", text[end:])
    return bool(following) and following.group(1).lower() not in _NOT_A_NOUN
