"""The routes' dependencies: the service's state, a profile name, and the bearer-token check."""

from __future__ import annotations

import hmac
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, Path, Request
from starlette.exceptions import HTTPException as StarletteHTTPException

from env.node.spec import NodeSpec
from env.plan.models import NAME_PATTERN
from service.api.middleware import header
from service.api.served import ServedModel

if TYPE_CHECKING:
    from profiler.store import ProfileStore

OPEN_PATHS = frozenset({"/healthz"})
UNAUTHORIZED = "missing or wrong bearer token: send 'Authorization: Bearer <COSCHED_TOKEN>'"


@dataclass
class ServiceState:
    """What every request reads: the node and the model, loaded once at start-up, and their documents."""

    node: NodeSpec
    node_id: str
    model: ServedModel
    search_budget: int | None = None  # None: agent-search's default
    plan_lock: threading.Lock = field(default_factory=threading.Lock)
    # GET /node and GET /model answer these bytes: they never change while the service runs
    node_json: str = field(init=False)
    model_json: str = field(init=False)

    def __post_init__(self) -> None:
        self.node_json = self.node.model_dump_json()
        self.model_json = self.model.describe_json()

    def store(self) -> ProfileStore:
        """The profile store, opened per request (one connection per operation)."""
        from profiler.store import ProfileStore

        return ProfileStore()


# async: FastAPI runs a plain def dependency in a worker thread, a hop these lookups do not need
async def service_state(request: Request) -> ServiceState:
    return request.app.state.cosched


State = Annotated[ServiceState, Depends(service_state)]
ProfileName = Annotated[str, Path(pattern=NAME_PATTERN, description="1-128 characters of [A-Za-z0-9._:-]")]


class TokenCheck:
    """The bearer-token rule as a FastAPI dependency (every route but OPEN_PATHS), and the same check for what has
    no route: FastAPI's 404/405 answers (an unknown path is not told apart from a protected one without a token)."""

    def __init__(self, token: str | None) -> None:
        self.expected = f"Bearer {token}".encode() if token else None

    def authorized(self, request: Request) -> bool:
        if self.expected is None or request.url.path in OPEN_PATHS:
            return True
        return hmac.compare_digest(header(request.scope, b"authorization") or b"", self.expected)

    def __call__(self, request: Request) -> None:
        if not self.authorized(request):
            raise StarletteHTTPException(401, UNAUTHORIZED, headers={"www-authenticate": "Bearer"})
