"""GET /model: the model the service plans with, or the baseline policy it uses instead and why."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from service.api.deps import State
from service.api.served import ModelDescription

router = APIRouter()


@router.get("/model", response_model=ModelDescription, summary="the loaded model (node trained for, W, Cmax, features, training figures), or the policy used instead")
async def get_model(state: State) -> Response:
    return Response(state.model_json, media_type="application/json")
