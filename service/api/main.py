"""The HTTP service: FastAPI over the same planning code as ``cosched schedule``.

Routes (docs/design/interfaces.md, HTTP service), one router per resource under ``routers/``: ``POST /schedule`` (window
in, plan out), ``POST /decide`` (a node's state at an event in, the decision out: ``service.decide``),
``GET /healthz``, ``GET /node``, ``GET /model``, ``GET /profiles``, ``GET/PUT/DELETE
/profiles/{name}``, and ``/docs`` and ``/openapi.json``.

* **Decisions only.** ``POST /schedule`` calls ``service.planning.plan_window`` (the one planning entry point)
  and returns its plan; nothing the service receives is ever executed.
* **Errors** (``errors``): 422 with the field and the reason, 413 over 1 MiB, 404/503 for our own errors; a
  response never carries a traceback.
* **Token** (``deps.TokenCheck``). With ``token``, every route but ``/healthz`` needs ``Authorization: Bearer
  <token>`` (401 otherwise, unknown paths too; constant-time compare).
* **Light.** Nothing here imports torch or the training stack; the agent's model plugs in through
  ``served.load_served_model`` (numpy inference).
* **Access log** (``middleware.AccessLog``): one JSON line per request on stderr (logger ``cosched.access``):
  method, path, status, duration in ms.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial

from fastapi import Depends, FastAPI
from pydantic import TypeAdapter

from env.errors import InputError
from env.node.discover import node_id as node_id_of
from env.plan.models import Plan, Window, WindowJob
from env.sim.nodes import load_node
from service.api.deps import ServiceState, TokenCheck
from service.api.errors import install_error_handlers
from service.api.logs import error_log
from service.api.middleware import AccessLog, BodyLimit
from service.api.planner import InlinePlanner
from service.api.routers import ROUTERS
from service.api.routers.docs import openapi_document
from service.api.served import load_served_model
from service.api.settings import ServiceSettings

__all__ = ["app_from_env", "create_app", "openapi_document"]

_PLAN: TypeAdapter[Plan] = TypeAdapter(Plan)
PlanWindow = Callable[..., Plan]  # service.planning.plan_window


def create_app(node_name: str = "local", model_path: str | None = None, token: str | None = None,
               search_budget: int | None = None) -> FastAPI:
    """The service for NODE ('local' or 'sim:NAME'), planning with the model at MODEL_PATH (or 'greedy');
    ``search_budget``: agent-search's rollouts a window (default ``env.planners.search.DEFAULT_BUDGET``).

    Loads the node spec and the model now, so a bad node, model or budget fails here (InputError), not on a request.
    """
    from env.planners.search import check_budget
    from service.planning import plan_window
    from training.registry import policy_registry

    node = load_node(node_name)
    served = load_served_model(model_path, node)
    policy_registry().check([served.policy])  # a policy that cannot plan yet is refused now, not on every request
    if search_budget is not None:
        check_budget(search_budget)
        if served.policy != "agent-search":
            raise InputError(f"--search-budget is for the agent-search policy, but this service plans with "
                             f"{served.policy!r} ({served.reason or 'no model'})")
    state = ServiceState(node=node, node_id=node_id_of(node), model=served, search_budget=search_budget)
    plan = partial(_plan_json, plan_window, state)  # plan_window as imported now: tests replace it beforehand

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        threading.Thread(target=_warm_up, args=(plan_window, state), name="cosched-warm-up", daemon=True).start()
        yield

    token_check = TokenCheck(token or None)
    app = FastAPI(
        title="cosched",
        summary="An RL co-scheduler for HPC nodes: window in, plan out. The service decides; it never executes.",
        version="0.1.0",
        lifespan=lifespan,
        # every route (/healthz is let through by the check itself); without a token there is nothing to check
        dependencies=[Depends(token_check)] if token_check.expected is not None else [],
        docs_url=None,  # /docs and /openapi.json are routes of ours, so the token dependency covers them too
        openapi_url=None,
    )
    app.state.cosched = state
    app.state.planner = InlinePlanner(plan, state.plan_lock)
    app.add_middleware(BodyLimit)
    app.add_middleware(AccessLog)  # outermost: logs every answer, the token's and the size limit's included
    install_error_handlers(app, token_check)
    for router in ROUTERS:
        app.include_router(router)
    return app


def app_from_env() -> FastAPI:
    """Factory for ``uvicorn --factory`` (several workers): the configuration comes from the environment."""
    settings = ServiceSettings.load()
    return create_app(settings.node, settings.model, settings.token, settings.search_budget)


def _budget(state: ServiceState) -> dict[str, int]:
    return {"search_budget": state.search_budget} if state.search_budget is not None else {}


def _plan_json(plan_window: PlanWindow, state: ServiceState, window: Window) -> bytes:
    """The plan of ``window`` as JSON bytes (the caller holds ``state.plan_lock``: planning is CPU-bound, and
    need not be thread-safe)."""
    return _PLAN.dump_json(plan_window(window, state.node, policy=state.model.policy, model=state.model.loaded,
                                       **_budget(state)))


def _warm_up(plan_window: PlanWindow, state: ServiceState) -> None:
    """Plan a one-job window once, in the background, so the first client does not pay for the planner's
    first use (lazy imports, the simulated catalogue's feature pipeline); failures are only logged."""
    started = time.perf_counter()
    try:
        with state.plan_lock:
            plan_window(Window(jobs=[WindowJob(id="warm-up")]), state.node, policy=state.model.policy,
                        model=state.model.loaded, **_budget(state))
    except Exception as exc:  # noqa: BLE001 - the same error reaches a client, mapped, on its request
        error_log.warning("warm-up plan failed", extra={"fields": {"error": f"{type(exc).__name__}: {exc}"}})
    else:
        error_log.info("warm-up plan done", extra={"fields": {"duration_ms": round((time.perf_counter() - started) * 1000, 1)}})
