"""The checks every request passes before any route runs (a plain ASGI middleware):

- Host: a server bound to a loopback address without an API key answers only to a loopback
  Host header, so a web page cannot reach it through DNS rebinding;
- Origin: a browser request from another site is refused (no cross-site form posts or fetches);
- API key: with a key configured, every /v1/ request carries `Authorization: Bearer KEY`;
- body size: JSON bodies and uploads have their own limits, checked on the declared length and
  again while the body streams in.
"""
from __future__ import annotations

import hmac
from urllib.parse import urlsplit

from .config import ServeConfig, is_loopback
from .errors import body

UPLOAD_PATHS = ("/v1/builds",)


class Guard:
    def __init__(self, app, config: ServeConfig):
        self.app = app
        self.config = config
        self._key = config.api_key.encode() if config.api_key else None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            status, message, extra = refusal
            return await _respond(send, status, message, extra)
        limit = self._limit(scope)
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            return await _respond(send, 413, _too_large(scope, limit))
        return await self.app(scope, _counting(receive, limit, _too_large(scope, limit)), send)

    def _refusal(self, scope, headers: dict[str, str]):
        host = headers.get("host", "")
        if self.config.loopback_only and not self._key and not is_loopback(_hostname(host)):
            return 421, f"refused: Host '{host}' is not this server's loopback address", None
        origin = headers.get("origin")
        if origin is not None and not _same_origin(origin, host):
            return 403, f"refused: cross-origin request from {origin}", None
        if self._key is not None and scope["path"].startswith("/v1/"):
            auth = headers.get("authorization", "")
            scheme, _, token = auth.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), self._key):
                why = "missing API key" if not auth else "wrong API key"
                return 401, f"{why}: send 'Authorization: Bearer <key>'", {"www-authenticate": "Bearer"}
        return None

    def _limit(self, scope) -> int:
        if scope["method"] == "POST" and scope["path"] in UPLOAD_PATHS:
            return self.config.max_upload_bytes
        return self.config.max_body_bytes


def _too_large(scope, limit: int) -> str:
    what = "upload" if scope["path"] in UPLOAD_PATHS else "request body"
    return f"{what} too large (limit {limit:,} bytes)"


def _counting(receive, limit: int, message: str):
    seen = 0

    async def wrapped():
        nonlocal seen
        event = await receive()
        if event["type"] == "http.request":
            seen += len(event.get("body", b""))
            if seen > limit:
                from starlette.exceptions import HTTPException

                raise HTTPException(413, message)
        return event

    return wrapped


async def _respond(send, status: int, message: str, extra: dict | None = None) -> None:
    import json

    payload = json.dumps(body(status, message)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    headers += [(k.encode(), v.encode()) for k, v in (extra or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


def _hostname(host: str) -> str:
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _same_origin(origin: str, host: str) -> bool:
    parts = urlsplit(origin)
    return bool(parts.netloc) and parts.netloc.lower() == host.lower()
