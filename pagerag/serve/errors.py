"""Every error the server returns is a JSON body with a one-line message and the right status:

    {"error": {"message": "…", "type": "invalid_request_error", "status": 400}}

(the shape OpenAI-compatible clients read, so the chat endpoint's errors reach them intact).
Tracebacks go to the server's log, never to the client.
"""
from __future__ import annotations

import logging
import re

from ..errors import BackendError, ConfigError, InputError, PageRAGError, RepositoryError

log = logging.getLogger("pagerag.serve")
MAX_MESSAGE = 400
_SURROGATE = re.compile("[\ud800-\udfff]")

TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
         404: "not_found_error", 405: "invalid_request_error", 409: "conflict_error",
         413: "request_too_large", 415: "invalid_request_error", 421: "permission_error",
         422: "invalid_request_error", 429: "rate_limit_error", 500: "server_error", 502: "backend_error",
         503: "unavailable_error"}


class ApiError(Exception):
    """An error with its HTTP status, raised anywhere in the serve layer."""

    def __init__(self, status: int, message: str, kind: str | None = None, headers: dict | None = None):
        super().__init__(message)
        self.status = status
        self.message = one_line(message)
        self.kind = kind or TYPES.get(status, "error")
        self.headers = headers or {}


def one_line(message: object) -> str:
    """The message as one line a client may see: no server path (public.scrub), no lone
    surrogate echoed from a request (it could not be encoded into the body), not too long."""
    from .public import scrub

    text = " ".join(scrub(_SURROGATE.sub("\ufffd", str(message))).split()) or "error"
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"


def body(status: int, message: str, kind: str | None = None) -> dict:
    return {"error": {"message": one_line(message), "type": kind or TYPES.get(status, "error"), "status": status}}


def from_pagerag(exc: PageRAGError) -> ApiError:
    """The status of a library error: the caller's input, the server's repository, the LLM."""
    if isinstance(exc, (InputError, ConfigError)):
        return ApiError(400, str(exc))
    if isinstance(exc, BackendError):
        return ApiError(502, f"the LLM backend failed: {exc}")
    if isinstance(exc, RepositoryError):
        return ApiError(503, str(exc))
    return ApiError(400, str(exc))


def install(app) -> None:
    """Register the handlers that turn every exception into the JSON error body."""
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException

    def respond(error: ApiError) -> JSONResponse:
        return JSONResponse(body(error.status, error.message, error.kind), status_code=error.status,
                            headers=error.headers)

    @app.exception_handler(ApiError)
    async def _api(_request, exc: ApiError):
        return respond(exc)

    @app.exception_handler(PageRAGError)
    async def _pagerag(_request, exc: PageRAGError):
        return respond(from_pagerag(exc))

    @app.exception_handler(RequestValidationError)
    async def _validation(_request, exc: RequestValidationError):
        return respond(ApiError(422, validation_message(exc.errors())))

    @app.exception_handler(HTTPException)
    async def _http(_request, exc: HTTPException):
        detail = exc.detail if isinstance(exc.detail, str) else "request refused"
        if exc.status_code == 404 and detail == "Not Found":
            detail = "no such endpoint (see /docs)"
        return respond(ApiError(exc.status_code, detail, headers=getattr(exc, "headers", None)))

    @app.exception_handler(Exception)
    async def _unexpected(_request, exc: Exception):
        log.error("unexpected error", exc_info=exc)
        return respond(ApiError(500, f"internal error: {exc.__class__.__name__}: {exc}"))


def validation_message(errors) -> str:
    """The first validation problem, as `field: what is wrong` (FastAPI's list is long)."""
    if not errors:
        return "invalid request"
    first = errors[0]
    where = ".".join(str(part) for part in first.get("loc", ()) if part not in ("body", "query", "path"))
    message = first.get("msg", "invalid value")
    if first.get("type") == "json_invalid":
        return "the body is not valid JSON"
    if first.get("type") == "missing":
        return f"{where or 'body'}: required"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where + ': ' if where else ''}{message}{more}"
