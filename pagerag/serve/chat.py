"""OpenAI-compatible endpoints: `GET /v1/models` (one model per repository) and
`POST /v1/chat/completions`.

The last user message is the question, made to stand alone from the earlier turns
(conversation.py: "When did he die?" after "Who was Marley?" is answered as "When did Marley
die?"); the reply says which question it answered when that differs from the message. The reply
is the answer with its citations as numbered footnotes (file, line, quote), or — for a refusal —
an ordinary assistant message that says why.
The answer is verified (citations checked, evidence judged) before anything is sent, so a
streamed reply is the verified answer sent in pieces, never unchecked text.

`usage` counts the LLM tokens the answer cost when an LLM ran; with the extractive backend (no
LLM) it counts the question and the reply (cl100k), so it is never empty. The extra field
`pagerag` carries the decision, the refusal reason, the citations and the repository version.
"""
from __future__ import annotations

import json
import time
import uuid
from typing import Any, Literal, Optional, Union

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from ..structure import cite_place
from .errors import ApiError
from .public import document_name

router = APIRouter(tags=["OpenAI-compatible"])
QUOTE_CHARS = 300  # a footnote quotes at most this much of its passage
CHUNK_CHARS = 48  # a streamed reply is sent in pieces of about this size


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str
    content: Union[str, list[dict[str, Any]], None] = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: StrictBool = False


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="allow")  # temperature, top_p, user …: accepted, not used

    model: str = Field(..., description="A repository name (see GET /v1/models).")
    messages: list[ChatMessage] = Field(..., min_length=1)
    stream: StrictBool = False  # "yes", 1 …: a 422, not a guess
    stream_options: Optional[StreamOptions] = None
    pipeline: Optional[str] = Field(None, description="Extension: pipeline preset.")
    llm: Optional[Literal["auto", "openai", "llamacpp", "extractive"]] = Field(None, description="Extension: LLM backend.")
    docs: Optional[list[str]] = Field(None, description="Extension: limit the question to these documents of the library.")


@router.get("/v1/models", summary="One model per served repository")
async def models(request: Request) -> dict:
    registry = request.app.state.server.registry
    data = []
    for name in registry.names():
        current = registry.resolve(name).current
        created = current.manifest.get("created") if current is not None else None
        data.append({"id": name, "object": "model", "created": _epoch(created), "owned_by": "pagerag"})
    return {"object": "list", "data": data}


@router.post("/v1/chat/completions", summary="Ask a repository as a chat model", response_model=None)
async def chat_completions(body: ChatRequest, request: Request):
    server = request.app.state.server
    _check_text(body)
    if body.model not in server.registry.names():
        raise ApiError(404, f"the model '{body.model}' does not exist: models are the served repositories "
                            f"({', '.join(server.registry.names())})", "invalid_request_error")
    turns = conversation_turns(body.messages)
    server.check_question(turns[-1][1])
    limit = server.config.max_question_chars

    def answer_standalone(rag):
        from .conversation import standalone

        asked = standalone(turns, rag, limit)
        return asked, rag.ask(asked.question, docs=body.docs)

    version, (asked, answer) = await server.run(body.model, body.pipeline, body.llm, answer_standalone)
    content = reply_text(answer, asked)
    completion_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
    created = int(time.time())
    usage = usage_of(answer, asked, content)
    extra = {"decision": answer.decision, "label": answer.label, "reason": answer.reason, "version": version.version,
             "question": asked.question, "rewritten_from": asked.original if asked.rewritten else None,
             "rewrite": asked.method,
             "citations": [{"n": c.n, "file": document_name(c.file), "doc_id": c.doc_id, "line": c.line,
                            "page": c.page, "page_label": c.page_label, "section": list(c.section),
                            "passage_id": c.passage_id,
                            "start": c.start, "end": c.end, "quote": c.quote} for c in answer.citations]}
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        chunks = _stream(completion_id, created, body.model, version.version, content, usage if include_usage else None, extra)
        return StreamingResponse(chunks, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
    return {
        "id": completion_id, "object": "chat.completion", "created": created, "model": body.model,
        "system_fingerprint": version.version,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop",
                     "logprobs": None}],
        "usage": usage, "pagerag": extra,
    }


def _check_text(body: ChatRequest) -> None:
    """Every text field of the request is encodable text (inputs.py), before any is echoed or read."""
    from .inputs import text_field

    text_field("model", body.model)
    text_field("pipeline", body.pipeline)
    for i, message in enumerate(body.messages):
        text_field(f"messages[{i}].role", message.role)
        if isinstance(message.content, list):
            for j, part in enumerate(message.content):
                text_field(f"messages[{i}].content[{j}].text", part.get("text"))
        else:
            text_field(f"messages[{i}].content", message.content)


def conversation_turns(messages: list[ChatMessage]) -> list[tuple[str, str]]:
    """(role, text) of the user and assistant messages up to the last user message, which is
    the question (system messages and other roles are not part of the conversation here)."""
    last = max((i for i, m in enumerate(messages) if m.role == "user"), default=None)
    if last is None or not message_text(messages[last]).strip():
        raise ApiError(400, "no user message with text: the last user message is the question")
    return [(m.role, message_text(m)) for m in messages[: last + 1] if m.role in ("user", "assistant")]


def message_text(message: ChatMessage) -> str:
    content = message.content
    if isinstance(content, list):  # content parts: keep the text ones
        return " ".join(str(p.get("text", "")) for p in content if p.get("type") == "text")
    return str(content or "")


def reply_text(answer, asked=None) -> str:
    """The answer and its numbered footnotes, or the refusal and why; first, when the question
    was rewritten from the conversation, the question that was answered."""
    said = f"Answering: \u201c{asked.question}\u201d\n\n" if asked is not None and asked.rewritten else ""
    return said + _reply_body(answer)


def _reply_body(answer) -> str:
    if not answer.answered:
        return f"I can't answer that from this book. {answer.answer} (reason: {answer.reason})"
    notes = []
    for c in answer.citations:
        quote = " ".join(c.quote.split())
        if len(quote) > QUOTE_CHARS:
            quote = quote[: QUOTE_CHARS - 1] + "…"
        notes.append(f"[{c.n}] {document_name(c.file)}, {cite_place(c.page, c.page_label, c.section, c.line)}: "
                     f"\u201c{quote}\u201d")
    said = f"{answer.heading}: " if answer.closest else ""  # a checked answer is the reply itself
    return said + answer.answer.strip() + ("\n\n" + "\n".join(notes) if notes else "")


def usage_of(answer, asked, content: str) -> dict[str, int]:
    prompt = sum(t["prompt"] for t in answer.tokens.values()) + asked.cost.prompt_tokens
    completion = sum(t["completion"] for t in answer.tokens.values()) + asked.cost.completion_tokens
    if prompt == 0 and completion == 0:  # no LLM ran: count what the client sent and got
        from ..offline import count_tokens

        prompt, completion = count_tokens(asked.original), count_tokens(content)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


async def _stream(completion_id: str, created: int, model: str, fingerprint: str, content: str,
                  usage: dict | None, extra: dict):
    def chunk(delta: dict, finish: str | None = None, **more) -> str:
        data = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
                "system_fingerprint": fingerprint,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}], **more}
        return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"

    yield chunk({"role": "assistant", "content": ""})
    for piece in _pieces(content):
        yield chunk({"content": piece})
    yield chunk({}, "stop", pagerag=extra)
    if usage is not None:
        data = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
                "system_fingerprint": fingerprint, "choices": [], "usage": usage}
        yield f"data: {json.dumps(data)}\n\n"
    yield "data: [DONE]\n\n"


def _pieces(text: str) -> list[str]:
    """Word-aligned pieces of about CHUNK_CHARS characters; joined, they are `text` exactly."""
    import re

    pieces, current = [], ""
    for token in re.findall(r"\S+\s*|\s+", text):
        current += token
        if len(current) >= CHUNK_CHARS:
            pieces.append(current)
            current = ""
    return pieces + [current] if current else pieces


def _epoch(created: Optional[str]) -> int:
    if not created:
        return 0
    try:
        return int(time.mktime(time.strptime(created, "%Y-%m-%dT%H:%M:%SZ")) - time.timezone)
    except ValueError:
        return 0
