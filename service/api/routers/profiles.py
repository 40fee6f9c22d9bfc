"""GET /profiles and GET/PUT/DELETE /profiles/{name}: the profile store's entries for this service's node.

Plain ``def`` routes: the store is SQLite (blocking), so FastAPI runs them in worker threads.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from fastapi import APIRouter, Body
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from profiler.errors import ProfileNotFoundError
from profiler.models import Profile
from service.api.deps import ProfileName, State
from service.api.errors import problems_detail, validation_detail

router = APIRouter()


@router.get("/profiles", summary="the profiles stored for this service's node")
def list_profiles(state: State) -> dict[str, Any]:
    store = state.store()
    profiles = store.list(state.node_id)
    return {"store": str(store.path), "node_id": state.node_id, "profiles": [p.model_dump(mode="json") for p in profiles]}


@router.get("/profiles/{name}", response_model=Profile, responses={404: {"description": "no such profile"}})
def get_profile(name: ProfileName, state: State) -> Response:
    return Response(state.store().require(name, state.node_id).model_dump_json(), media_type="application/json")


@router.put("/profiles/{name}", response_model=Profile,
            responses={201: {"description": "stored (new)"}, 422: {"description": "invalid profile, or its name or node do not match"}})
def put_profile(name: ProfileName, profile: Annotated[Profile, Body()], state: State) -> Response:
    problems = _mismatches(name, profile, state.node_id)
    if problems:
        return JSONResponse(problems_detail(problems), status_code=422)
    stored_json = profile.model_dump_json()
    try:
        Profile.model_validate_json(stored_json)  # what is stored must read back (JSON has no infinity)
    except ValidationError as exc:
        return JSONResponse(validation_detail(list(exc.errors())), status_code=422)
    store = state.store()
    existed = store.get(name, state.node_id) is not None
    store.put(profile)
    return Response(stored_json, media_type="application/json", status_code=200 if existed else 201)


@router.delete("/profiles/{name}", responses={404: {"description": "no such profile"}})
def delete_profile(name: ProfileName, state: State) -> dict[str, str]:
    store = state.store()
    if not store.delete(name, state.node_id):
        raise ProfileNotFoundError(f"no profile named {name!r} for node {state.node_id!r} in {store.path}")
    return {"deleted": name, "node_id": state.node_id}


def _mismatches(name: str, profile: Profile, node_id: str) -> list[dict[str, str]]:
    """What a valid profile may still get wrong: its name or node against the path's and the service's, infinities."""
    problems = []
    if profile.name != name:
        problems.append({"field": "name", "reason": f"the profile's name {profile.name!r} is not the name in the path {name!r}",
                         "type": "value_error"})
    if profile.node_id != node_id:
        problems.append({"field": "node_id", "reason": f"this service stores profiles of node {node_id!r}, not {profile.node_id!r}",
                         "type": "value_error"})
    for key, value in profile:
        if isinstance(value, float) and not math.isfinite(value):
            problems.append({"field": key, "reason": f"must be a finite number, not {value}", "type": "finite_number"})
    return problems
