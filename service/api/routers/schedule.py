"""POST /schedule: window in, plan out; nothing the service receives is ever executed.

The body may say ``"mode": "groups"`` or ``"continuous"`` (``env.plan.stream_plan.ScheduleRequest``); without it the
plan is in the mode the node model predicts to end sooner, and says which and why (``service.api.planner``).

One route: it reads the raw body and validates it with ``Window`` in one call (``model_validate_json``: no
``json.loads`` then validation), plans it once (``InlinePlanner``) and answers the plan's JSON bytes. A body that
is not a valid window is reported as FastAPI reports bad JSON bodies (``window_of``).
"""

from __future__ import annotations

import json

from fastapi import APIRouter, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import TypeAdapter, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from env.plan.models import Plan
from env.plan.stream_plan import ScheduleRequest
from service.api.middleware import header
from service.api.planner import mode_planner

router = APIRouter()
_WINDOW: TypeAdapter[ScheduleRequest] = TypeAdapter(ScheduleRequest)


@router.post("/schedule", response_model=Plan, summary="window in, plan out (nothing is run); \"mode\": groups or "
             "continuous (default: the one the node model predicts better; the plan says which and why)",
             openapi_extra={"requestBody": {"required": True, "content": {
                 "application/json": {"schema": {"$ref": "#/components/schemas/Window"}}}}},
             responses={413: {"description": "body over 1 MiB"}, 422: {"description": "invalid window (field and reason)"}})
async def schedule(request: Request) -> Response:
    """The raw body validated by ``Window`` in one call (``window_of``), planned once, answered as bytes."""
    window = window_of(await request.body(), header(request.scope, b"content-type"))
    # the planner from app.state, not a dependency: one costs about 0.03 ms of the route's 0.33 (service_overhead.py)
    planner = request.app.state.planner
    if planner.modes is None:  # the body's mode, for this service's node (set once)
        planner.modes = mode_planner(request.app.state.cosched)
    return Response(await planner.planned(window), media_type="application/json")


def window_of(body: bytes, content_type: bytes | None) -> ScheduleRequest:
    """The window in a POST /schedule body. A valid JSON window is validated from the raw bytes in one call
    (``Window`` itself, no ``json.loads`` first); anything else is reported as FastAPI reports a bad JSON body
    (the same statuses, fields and reasons: 422 with the field, 400 for bytes that are not JSON text at all)."""
    is_json = content_type is not None and _is_json_type(content_type)
    if is_json:
        try:
            return _WINDOW.validate_json(body)
        except ValidationError:
            pass  # reported below, field by field, as FastAPI validates a parsed body
    if not body:
        raise RequestValidationError([{"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}])
    if not is_json:
        raise RequestValidationError([{"type": "model_attributes_type", "loc": ("body",), "input": None,
                                       "msg": "Input should be a valid dictionary or object to extract fields from"}])
    try:
        doc = json.loads(body)
    except json.JSONDecodeError as exc:
        raise RequestValidationError([{"type": "json_invalid", "loc": ("body", exc.pos), "msg": "JSON decode error",
                                       "input": {}, "ctx": {"error": exc.msg}}]) from None
    except (UnicodeDecodeError, RecursionError, ValueError) as exc:
        raise StarletteHTTPException(400, "There was an error parsing the body") from exc
    try:
        return _WINDOW.validate_python(doc)
    except ValidationError as exc:
        raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]) from None


def _is_json_type(content_type: bytes) -> bool:
    """application/json or application/*+json, with any parameters (what FastAPI reads as JSON)."""
    main = content_type.split(b";", 1)[0].strip().lower()
    return main == b"application/json" or (main.startswith(b"application/") and main.endswith(b"+json"))
