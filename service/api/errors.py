"""Errors as answers: invalid input is 422 with the field and the reason, never a traceback.

``detail: [{field, reason, type}]`` plus a one-line ``message``; a body over 1 MiB is 413; our own errors
(``cli_exit_code``) are 422 (bad input), 404 (unknown profile) or 503 (the service could not do it, e.g. a locked
profile store). An exception of no known kind is a bug: logged with its traceback and answered 500 with an error id;
the tests (bad bodies, a schemathesis run) exist so that no input reaches it.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from env.errors import CoschedError
from profiler.errors import ProfileNotFoundError, ProfilerError
from service.api.deps import UNAUTHORIZED, TokenCheck
from service.api.logs import bug_report
from service.api.middleware import TOO_LARGE

MAX_REPORTED_ERRORS = 20


def _field(loc: tuple[Any, ...] | list[Any]) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] == "body":
        parts = parts[1:]
    return ".".join(parts) or "body"


def validation_detail(errors: list[dict[str, Any]]) -> dict[str, Any]:
    """pydantic's errors as ``{field, reason, type}`` (never echoing the input back), plus one line for people."""
    items = []
    for err in errors[:MAX_REPORTED_ERRORS]:
        reason = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        ctx = err.get("ctx") or {}
        where = _field(err.get("loc", ()))
        if err.get("type") == "json_invalid":
            reason, where = f"malformed JSON: {ctx.get('error', 'cannot decode')} at character {err['loc'][-1]}", "body"
        items.append({"field": where, "reason": reason, "type": err.get("type", "invalid")})
    more = len(errors) - len(items)
    message = "; ".join(f"{i['field']}: {i['reason']}" for i in items) + (f"; and {more} more error(s)" if more > 0 else "")
    return {"detail": items, "message": message}


def problems_detail(problems: list[dict[str, str]]) -> dict[str, Any]:
    """Our own checks' ``{field, reason, type}`` problems as a 422 document, like ``validation_detail``'s."""
    return {"detail": problems, "message": "; ".join(f"{p['field']}: {p['reason']}" for p in problems)}


def _parse_problem(cause: BaseException | None) -> str:
    if isinstance(cause, UnicodeDecodeError):
        return f"it is not UTF-8 (byte {cause.start})"
    if isinstance(cause, RecursionError):
        return "it is nested too deeply"
    if isinstance(cause, ValueError):
        return str(cause).split(";")[0]  # e.g. an integer with more digits than Python converts
    return "it cannot be decoded"


def _error_status(exc: BaseException) -> int | None:
    """Our own error classes (they carry cli_exit_code): 404 unknown profile, 422 bad input, 503 a failure here."""
    code = getattr(exc, "cli_exit_code", None)
    if code is None:
        return None
    if isinstance(exc, ProfileNotFoundError):
        return 404
    return 422 if code == 2 else 503


def install_error_handlers(app: FastAPI, token_check: TokenCheck) -> None:
    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(validation_detail(list(exc.errors())), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code in (404, 405) and not token_check.authorized(request):  # no route, so no dependency ran
            exc = StarletteHTTPException(401, UNAUTHORIZED, headers={"www-authenticate": "Bearer"})
        detail = exc.detail
        if exc.status_code == 413:
            detail = TOO_LARGE
        elif exc.status_code == 400 and detail == "There was an error parsing the body":
            detail = f"the request body could not be read as JSON: {_parse_problem(exc.__cause__)}"
        return JSONResponse({"detail": detail}, status_code=exc.status_code, headers=getattr(exc, "headers", None))

    async def _ours(request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=_error_status(exc) or 503)

    from agent.errors import ModelFileError

    for ours in (CoschedError, ProfilerError, ModelFileError):
        app.add_exception_handler(ours, _ours)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:  # inside AccessLog: a fallback
        return JSONResponse(bug_report(exc, request.method, request.url.path), status_code=500)
