"""Pure ASGI middleware (cheaper than Starlette's BaseHTTPMiddleware): the access log and the body size limit."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.logs import access_log, bug_report

MAX_BODY_BYTES = 1 << 20
TOO_LARGE = f"request body too large: the limit is {MAX_BODY_BYTES} bytes (1 MiB)"


class _HttpMiddleware:
    """Pure ASGI middleware for HTTP requests (``handle``); anything else (lifespan) passes through untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.handle(scope, receive, send)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise NotImplementedError


class AccessLog(_HttpMiddleware):
    """Pure ASGI (cheap): one JSON line a request (method, path, status, duration). An exception that escapes the
    app before it answered is a bug: answered 500 here (with an error id), so the connection stays sound."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = time.perf_counter()
        status, started = 500, False  # 500: what is logged if the app raises before answering

        async def send_logged(message: Message) -> None:
            nonlocal status, started
            if message["type"] == "http.response.start":
                status, started = message["status"], True
            await send(message)

        try:
            await self.app(scope, receive, send_logged)
        except Exception as exc:  # a bug: no input may reach this (see service.api.errors)
            if started:
                raise
            await _send_json(send_logged, 500, bug_report(exc, scope["method"], scope["path"]))
        finally:
            if access_log.isEnabledFor(logging.INFO):
                # makeRecord + handle: Logger.info would also walk the stack for the caller, which nobody reads
                access_log.handle(access_log.makeRecord(
                    access_log.name, logging.INFO, __file__, 0, "access", (), None,
                    extra={"fields": {"method": scope["method"], "path": scope["path"], "status": status,
                                      "duration_ms": round((time.perf_counter() - start) * 1000, 3)}}))


class BodyLimit(_HttpMiddleware):
    """Pure ASGI: a body over MAX_BODY_BYTES is 413. A declared ``Content-Length`` over it is refused at the first
    read, before a byte of it is read (so a route's token dependency, which runs before its body is read, answers
    401 first); chunked (or lying) bodies are counted as they arrive."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        declared = _declared_length(scope)
        received = 0

        async def receive_limited() -> Message:
            nonlocal received
            if declared > MAX_BODY_BYTES:
                raise StarletteHTTPException(413, TOO_LARGE)  # FastAPI passes it on: our handler answers
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > MAX_BODY_BYTES:
                    raise StarletteHTTPException(413, TOO_LARGE)
            return message

        await self.app(scope, receive_limited, send)


def header(scope: Scope, name: bytes) -> bytes | None:
    """A request header's raw value (``name`` in lower case, as ASGI gives it), without building Headers."""
    for key, value in scope["headers"]:
        if key == name:
            return value
    return None


def _declared_length(scope: Scope) -> int:
    value = header(scope, b"content-length")
    try:
        return int(value) if value is not None else 0
    except ValueError:
        return 0  # the HTTP server refuses a malformed Content-Length before we see it


async def _send_json(send: Send, status: int, doc: Any, headers: list[tuple[bytes, bytes]] = ()) -> None:  # type: ignore[assignment]
    body = json.dumps(doc).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})
