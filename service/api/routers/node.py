"""GET /node: this service's node, as ``cosched node --json`` prints it."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from env.node.spec import NodeSpec
from service.api.deps import State

router = APIRouter()


@router.get("/node", response_model=NodeSpec, summary="what `cosched node --json` prints for this service's node")
async def get_node(state: State) -> Response:
    return Response(state.node_json, media_type="application/json")
