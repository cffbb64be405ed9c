"""The lenient-accuracy judge: an LLM (any backend of pagerag.generate.llm) reads the question,
the gold answer with its aliases and the candidate answer (prompts/judge_answer.txt) and
replies {"correct": true|false}. Its tokens are the evaluation's cost, not the system's, so they
are kept apart from QTok.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import BackendError, ConfigError

JUDGE_BACKENDS = ("openai", "llamacpp")
MAX_TOKENS = 60


@dataclass
class AnswerJudge:
    llm: object  # pagerag.generate.llm.LLM
    name: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: list[str] = field(default_factory=list)

    def accepts(self, question: str, golds: list[str], answer: str) -> tuple[bool | None, str]:
        """(accepted, why); (None, error) when the judge's reply is unusable."""
        from ..generate.answer import render_prompt
        from ..llm import complete_json

        messages = render_prompt("judge_answer", question=question, gold=" | ".join(golds),
                                 answer=answer.replace("<<<", "< < <").replace(">>>", "> > >"))
        try:
            reply, completion = complete_json(self.llm, messages, max_tokens=MAX_TOKENS, required=("correct",))
        except BackendError as exc:
            self.failures.append(str(exc))
            return None, str(exc)
        self.prompt_tokens += completion.prompt_tokens
        self.completion_tokens += completion.completion_tokens
        verdict = reply.get("correct")
        if isinstance(verdict, str):
            verdict = verdict.strip().lower() in ("true", "yes", "correct")
        return bool(verdict), str(reply.get("why", ""))[:200]


def make_judge(backend: str | None, llm_settings) -> AnswerJudge | None:
    """The judge named by `--judge` (None = no judge: lenient is token recall). `llm_settings`
    (pagerag.settings.LLMSettings) gives the endpoint / GGUF; only the backend is replaced."""
    if backend is None or backend in ("", "none"):
        return None
    if backend not in JUDGE_BACKENDS:
        raise ConfigError(f"unknown --judge '{backend}' (choose {', '.join(JUDGE_BACKENDS)}, or omit it for token recall)")
    from ..llm import get_llm

    llm = get_llm(llm_settings.model_copy(update={"backend": backend}))
    if llm is None:  # cannot happen for a named backend, but keep the contract explicit
        raise ConfigError(f"--judge {backend}: no LLM could be built")
    return AnswerJudge(llm=llm, name=f"{backend}:{getattr(llm, 'model', '') or '?'}")
