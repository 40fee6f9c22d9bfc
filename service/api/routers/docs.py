"""GET /openapi.json and GET /docs: routes of ours (not FastAPI's built-in ones) so the token dependency covers them."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response

from env.plan.stream_plan import ScheduleRequest

router = APIRouter()


@router.get("/openapi.json", include_in_schema=False)
async def openapi_json(request: Request) -> JSONResponse:
    return JSONResponse(openapi_document(request.app))


@router.get("/docs", include_in_schema=False)
async def docs() -> Response:
    from fastapi.openapi.docs import get_swagger_ui_html

    return get_swagger_ui_html(openapi_url="/openapi.json", title="cosched - docs")


def openapi_document(app: FastAPI) -> dict[str, Any]:
    """FastAPI's OpenAPI document, with the ``Window`` schema POST /schedule's body refers to: the window with its
    optional ``mode`` (``ScheduleRequest``; the route reads the raw body itself, so FastAPI does not find the model in
    its signature)."""
    if app.openapi_schema is None:
        doc = app.openapi()
        schemas = doc.setdefault("components", {}).setdefault("schemas", {})
        window = ScheduleRequest.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(window.pop("$defs", {}))
        schemas["Window"] = window
    return app.openapi_schema  # type: ignore[return-value]
