"""GET /healthz: the one route open without a token (``deps.OPEN_PATHS``)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()


@router.get("/healthz", summary="{'status': 'ok'} once the node and the model are loaded")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}
