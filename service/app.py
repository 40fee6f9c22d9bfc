"""The HTTP service: FastAPI over the same planning code as ``cosched schedule``.

Routes (``interfaces.md``, HTTP service): ``POST /schedule`` (window in, plan out), ``GET /healthz``,
``GET /node``, ``GET /model``, ``GET /profiles``, ``GET/PUT/DELETE /profiles/{name}``, and FastAPI's own
``/docs`` and ``/openapi.json``.

* **Decisions only.** ``POST /schedule`` calls ``service.planning.plan_window`` (the one planning entry point)
  and returns its plan; nothing the service receives is ever executed.
* **One route.** ``POST /schedule`` is one FastAPI route: it reads the raw body and validates it with ``Window``
  in one call (``model_validate_json``: no ``json.loads`` then validation), plans it once (small windows on the
  event loop, in turn; large ones in a worker thread: ``InlinePlanner``) and answers the plan's JSON bytes. A body
  that is not a valid window is reported as FastAPI reports bad JSON bodies (``window_of``). The token is a
  dependency of every route; the size limit (``BodyLimit``) and the access log (``AccessLog``) are middleware.
* **Errors.** Invalid input is 422 with the field and the reason (``detail: [{field, reason, type}]`` and a
  one-line ``message``); a body over 1 MiB is 413 (a declared ``Content-Length`` is checked before any byte
  is read, chunked bodies are counted as they arrive); our own errors (``cli_exit_code``) are 422 (bad
  input), 404 (unknown profile) or 503 (the service could not do it, e.g. a locked profile store). A response
  never carries a traceback. An exception of no known kind is a bug: it is logged with its traceback and
  answered 500 with an error id, and the tests (bad bodies, a schemathesis run) exist so that no input reaches it.
* **Token.** With ``token``, every route but ``/healthz`` needs ``Authorization: Bearer <token>`` (401
  otherwise, unknown paths too; constant-time compare).
* **Light.** Nothing here imports torch or the training stack; the agent's model plugs in through
  ``load_served_model`` (numpy inference).
* **Access log.** One JSON line per request on stderr (logger ``cosched.access``): method, path, status,
  duration in ms.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import math
import os
import threading
import time
import traceback
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from fastapi import Body, Depends, FastAPI, Path, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field, TypeAdapter, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent.modelfile import SetModelMeta, TrainedFor
from env.node.discover import node_id as node_id_of
from env.errors import CoschedError, InputError
from env.plan.models import NAME_PATTERN, Plan, Window, WindowJob
from env.sim.nodes import load_node
from env.node.spec import NodeSpec
from profiler.errors import ProfileNotFoundError, ProfilerError
from profiler.models import Profile

MAX_BODY_BYTES = 1 << 20
MAX_REPORTED_ERRORS = 20
TOO_LARGE = f"request body too large: the limit is {MAX_BODY_BYTES} bytes (1 MiB)"
OPEN_PATHS = frozenset({"/healthz"})
#: Windows of at most this many jobs are planned on the event loop (a few ms); larger ones in a worker thread,
#: so a 1024-job window does not hold up every other client's request for its whole planning time.
INLINE_PLAN_JOBS = 32
ENV_NODE, ENV_MODEL, ENV_TOKEN = "COSCHED_SERVE_NODE", "COSCHED_SERVE_MODEL", "COSCHED_TOKEN"
ENV_BUDGET = "COSCHED_SERVE_SEARCH_BUDGET"

access_log = logging.getLogger("cosched.access")
error_log = logging.getLogger("cosched.error")


# -- the model seam -------------------------------------------------------------------------------


class SetNetwork(BaseModel):
    """A set-encoder actor (``cosched-model/2``): job tokens of any window of up to ``window_size`` jobs."""

    kind: Literal["set-encoder"] = "set-encoder"
    architecture: str
    shape: dict[str, int]  # agent.setnet.SetNetShape
    observation: str


class ModelFeatures(BaseModel):
    feature_set: str
    names: list[str]


class ModelInfo(BaseModel):
    """What GET /model shows of the loaded model."""

    id: str
    format: str  # cosched-model/2 (the set encoder)
    path: str
    shipped: bool
    trained_for: TrainedFor
    window_size: int  # the most jobs planned in one episode: the set model's max_window
    max_concurrency: int
    features: ModelFeatures
    action_encoding: str
    network: SetNetwork
    training: dict[str, Any]

    @classmethod
    def of(cls, loaded: Any, shipped: bool) -> "ModelInfo":
        """``loaded``: agent.modelfile.LoadedSetModel."""
        from profiler.features import FEATURE_NAMES

        meta: SetModelMeta = loaded.meta
        network = SetNetwork(architecture=meta.architecture, shape=meta.net, observation=meta.observation)
        return cls(id=meta.model_id, format=meta.format, path=str(loaded.path), shipped=shipped,
                   trained_for=meta.trained_for, window_size=meta.max_window, max_concurrency=meta.max_concurrency,
                   features=ModelFeatures(feature_set=meta.feature_set, names=list(FEATURE_NAMES)),
                   action_encoding=meta.action_encoding, network=network, training=meta.training)


class ModelDescription(BaseModel):
    """GET /model: the policy the service plans with, its model (None for a baseline) and why there is none."""

    policy: str
    model: ModelInfo | None
    reason: str | None = None  # left out of the document when there is a model


@dataclass(frozen=True)
class ServedModel:
    """What the service plans with: the agent and its model file, or a baseline policy when there is none."""

    policy: str
    loaded: Any = None  # agent.modelfile.LoadedSetModel: loaded and checked once, handed to every plan
    info: ModelInfo | None = None  # what GET /model shows of the model
    reason: str | None = None  # why no model is used

    def describe(self) -> ModelDescription:
        return ModelDescription(policy=self.policy, model=self.info, reason=self.reason)

    def describe_json(self) -> str:
        return self.describe().model_dump_json(exclude={"reason"} if self.reason is None else None)


def load_served_model(model_path: str | None, node: NodeSpec) -> ServedModel:
    """The model the service plans with, chosen as ``cosched schedule`` chooses it (``service.planning``): the
    given model file, else the one that ships for this node, else none and the baseline default (``greedy``),
    which GET /model says. The model (either format) is read (numpy, no torch) and checked against this node's
    shape and the feature set once, here; a model that cannot be used is an error at start-up (one line, exit 2).
    """
    from service.planning import MODEL_POLICIES, default_policy

    policy = default_policy(node, model_path)
    if policy not in MODEL_POLICIES:
        return ServedModel(policy=policy, reason=f"no model given (cosched serve --model M) and none ships for node "
                           f"{node.name!r}: plans come from the {policy!r} heuristic")
    from training.policies import load_for_node

    loaded = load_for_node(model_path, node)
    return ServedModel(policy=policy, loaded=loaded, info=ModelInfo.of(loaded, shipped=model_path is None))


# -- middleware: access log, body limit; the token a dependency ------------------------------------


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
        except Exception as exc:  # noqa: BLE001 - a bug (see the module docstring)
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


class TokenCheck:
    """The bearer-token rule as a FastAPI dependency (every route but OPEN_PATHS), and the same check for what has
    no route: FastAPI's 404/405 answers (an unknown path is not told apart from a protected one without a token)."""

    def __init__(self, token: str | None) -> None:
        self.expected = f"Bearer {token}".encode() if token else None

    def authorized(self, request: Request) -> bool:
        if self.expected is None or request.url.path in OPEN_PATHS:
            return True
        return hmac.compare_digest(_header(request.scope, b"authorization") or b"", self.expected)

    def __call__(self, request: Request) -> None:
        if not self.authorized(request):
            raise StarletteHTTPException(401, UNAUTHORIZED, headers={"www-authenticate": "Bearer"})


UNAUTHORIZED = "missing or wrong bearer token: send 'Authorization: Bearer <COSCHED_TOKEN>'"


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key == name:
            return value
    return None


def _declared_length(scope: Scope) -> int:
    value = _header(scope, b"content-length")
    try:
        return int(value) if value is not None else 0
    except ValueError:
        return 0  # the HTTP server refuses a malformed Content-Length before we see it


_WINDOW: TypeAdapter[Window] = TypeAdapter(Window)
_PLAN: TypeAdapter[Plan] = TypeAdapter(Plan)


def window_of(body: bytes, content_type: bytes | None) -> Window:
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


class InlinePlanner:
    """Plans a window for POST /schedule: small windows on the event loop, in turn; large ones in a worker thread.

    ``plan`` turns a window into the plan's JSON bytes; the caller never holds ``lock`` (one plan at a time).
    """

    def __init__(self, plan: Callable[[Window], bytes], lock: threading.Lock) -> None:
        self.plan = plan
        self.lock = lock
        self._turns: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None  # see _turn

    def _turn(self) -> asyncio.Lock:
        """The FIFO queue of inline plans, one per event loop (an asyncio.Lock belongs to the loop it first
        waited on; tests run apps on several loops)."""
        loop = asyncio.get_running_loop()
        if self._turns is None or self._turns[0] is not loop:
            self._turns = (loop, asyncio.Lock())
        return self._turns[1]

    async def planned(self, window: Window) -> bytes:
        # Planning is CPU-bound and one worker has one core: a small window planned here costs less than the
        # hop to a worker thread. The lock is busy only while the warm-up plan holds it.
        if len(window.jobs) <= INLINE_PLAN_JOBS:
            # One inline plan per turn of the event loop, in arrival order. Without this, every request read
            # in one poll is planned back to back before the loop polls again, and uvloop (libuv) accepts one
            # new connection per poll: under saturation the k-th of many clients connecting at once waited k
            # whole rounds (32 closed-loop clients: p99 0.3-0.7 s, all of it the late connections' first
            # requests). Yielding once after taking the turn queues the other requests behind this one, and
            # each hand-over wakes the next on a later turn of the loop, after I/O has been polled.
            async with self._turn():
                await asyncio.sleep(0)
                if self.lock.acquire(blocking=False):
                    try:
                        return self.plan(window)
                    finally:
                        self.lock.release()
        return await run_in_threadpool(self._locked_plan, window)

    def _locked_plan(self, window: Window) -> bytes:
        with self.lock:
            return self.plan(window)


async def _send_json(send: Send, status: int, doc: Any, headers: list[tuple[bytes, bytes]] = ()) -> None:  # type: ignore[assignment]
    body = json.dumps(doc).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})


class JsonLines(logging.Formatter):
    """One JSON object a line: time, level, logger, message, and the record's ``fields``."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {"ts": round(record.created, 3), "level": record.levelname.lower(), "logger": record.name,
                               "msg": record.getMessage()}
        doc.update(getattr(record, "fields", {}))
        if record.exc_info:
            doc["traceback"] = "".join(traceback.format_exception(*record.exc_info))
        return json.dumps(doc, default=str)


def log_config(level: str = "info") -> dict[str, Any]:
    """logging.dictConfig for uvicorn and us: JSON lines on stderr, uvicorn's own access log off (ours replaces it)."""
    handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonLines}},
        "handlers": {"stderr": handler},
        "loggers": {
            "uvicorn": {"handlers": ["stderr"], "level": level.upper(), "propagate": False},
            "uvicorn.error": {"level": level.upper()},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
            "cosched": {"handlers": ["stderr"], "level": level.upper(), "propagate": False},
        },
    }


# -- errors ---------------------------------------------------------------------------------------


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


def _install_error_handlers(app: FastAPI, token_check: TokenCheck) -> None:
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


def bug_report(exc: BaseException, method: str, path: str) -> dict[str, str]:
    """Log an unexpected exception (a bug) with its traceback under a fresh id; the client's answer names only the id."""
    error_id = uuid.uuid4().hex[:12]
    error_log.error("unexpected error (a bug)", exc_info=exc, extra={"fields": {"error_id": error_id, "method": method, "path": path}})
    return {"detail": f"internal error {error_id}: this is a bug in cosched, not in your request; "
                      "it was logged with the request's method and path"}


# -- the app --------------------------------------------------------------------------------------


@dataclass
class ServiceState:
    node_name: str
    node: NodeSpec
    node_id: str
    model: ServedModel
    plan_lock: threading.Lock = field(default_factory=threading.Lock)

    def store(self):  # noqa: ANN201 - a profiler.store.ProfileStore, opened per request (one connection per operation)
        from profiler.store import ProfileStore

        return ProfileStore()


ProfileName = Annotated[str, Path(pattern=NAME_PATTERN, description="1-128 characters of [A-Za-z0-9._:-]")]


def create_app(node_name: str = "local", model_path: str | None = None, token: str | None = None,
               search_budget: int | None = None) -> FastAPI:
    """The service for NODE ('local' or 'sim:NAME'), planning with the model at MODEL_PATH (or 'greedy');
    ``search_budget``: agent-search's rollouts a window (default ``env.planners.search.DEFAULT_BUDGET``).

    Loads the node spec and the model now, so a bad node, model or budget fails here (InputError), not on a request.
    """
    from env.planners.search import check_budget
    from service.planning import plan_window

    node = load_node(node_name)
    served = load_served_model(model_path, node)
    from env.planners.baselines import get_policy

    get_policy(served.policy)  # a policy that cannot plan yet is refused now, not on every request
    if search_budget is not None:
        check_budget(search_budget)
        if served.policy != "agent-search":
            raise InputError(f"--search-budget is for the agent-search policy, but this service plans with "
                             f"{served.policy!r} ({served.reason or 'no model'})")
    budget = {"search_budget": search_budget} if search_budget is not None else {}
    state = ServiceState(node_name=node_name, node=node, node_id=node_id_of(node), model=served)
    node_json = node.model_dump_json()
    model_json = state.model.describe_json()

    def warm_up() -> None:
        """Plan a one-job window once, in the background, so the first client does not pay for the planner's
        first use (lazy imports, the simulated catalogue's feature pipeline); failures are only logged."""
        started = time.perf_counter()
        try:
            with state.plan_lock:
                plan_window(Window(jobs=[WindowJob(id="warm-up")]), state.node_name, policy=state.model.policy,
                            model=state.model.loaded, **budget)
        except Exception as exc:  # noqa: BLE001 - the same error reaches a client, mapped, on its request
            error_log.warning("warm-up plan failed", extra={"fields": {"error": f"{type(exc).__name__}: {exc}"}})
        else:
            error_log.info("warm-up plan done", extra={"fields": {"duration_ms": round((time.perf_counter() - started) * 1000, 1)}})

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        threading.Thread(target=warm_up, name="cosched-warm-up", daemon=True).start()
        yield

    token_check = TokenCheck(token or None)
    app = FastAPI(
        title="cosched",
        summary="An RL co-scheduler for HPC nodes: window in, plan out. The service decides; it never executes.",
        version="0.1.0",
        lifespan=lifespan,
        # every route (/healthz is let through by the check itself); without a token there is nothing to check
        dependencies=[Depends(token_check)] if token_check.expected is not None else [],
        docs_url=None,  # /docs and /openapi.json are routes below, so the token dependency covers them too
        openapi_url=None,
    )

    def plan_json(window: Window) -> bytes:
        """The plan of ``window`` as JSON bytes (the caller holds ``state.plan_lock``: planning is CPU-bound, and
        need not be thread-safe)."""
        return _PLAN.dump_json(plan_window(window, state.node_name, policy=state.model.policy, model=state.model.loaded,
                                           **budget))

    planner = InlinePlanner(plan_json, state.plan_lock)
    app.state.cosched = state
    app.state.planner = planner
    app.add_middleware(BodyLimit)
    app.add_middleware(AccessLog)  # outermost: logs every answer, the token's and the size limit's included
    _install_error_handlers(app, token_check)

    @app.post("/schedule", response_model=Plan, summary="window in, plan out (nothing is run)",
              openapi_extra={"requestBody": {"required": True, "content": {
                  "application/json": {"schema": {"$ref": "#/components/schemas/Window"}}}}},
              responses={413: {"description": "body over 1 MiB"}, 422: {"description": "invalid window (field and reason)"}})
    async def schedule(request: Request) -> Response:
        """The raw body validated by ``Window`` in one call (``window_of``), planned once, answered as bytes."""
        window = window_of(await request.body(), _header(request.scope, b"content-type"))
        return Response(await planner.planned(window), media_type="application/json")

    @app.get("/openapi.json", include_in_schema=False)
    async def openapi_json() -> JSONResponse:
        return JSONResponse(openapi_document(app))

    @app.get("/docs", include_in_schema=False)
    async def docs() -> Response:
        from fastapi.openapi.docs import get_swagger_ui_html

        return get_swagger_ui_html(openapi_url="/openapi.json", title="cosched - docs")

    @app.get("/healthz", summary="{'status': 'ok'} once the node and the model are loaded")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/node", response_model=NodeSpec, summary="what `cosched node --json` prints for this service's node")
    async def get_node() -> Response:
        return Response(node_json, media_type="application/json")

    @app.get("/model", response_model=ModelDescription, summary="the loaded model (node trained for, W, Cmax, features, training figures), or the policy used instead")
    async def get_model() -> Response:
        return Response(model_json, media_type="application/json")

    @app.get("/profiles", summary="the profiles stored for this service's node")
    def list_profiles() -> dict[str, Any]:
        store = state.store()
        profiles = store.list(state.node_id)
        return {"store": str(store.path), "node_id": state.node_id, "profiles": [p.model_dump(mode="json") for p in profiles]}

    @app.get("/profiles/{name}", response_model=Profile, responses={404: {"description": "no such profile"}})
    def get_profile(name: ProfileName) -> Response:
        return Response(state.store().require(name, state.node_id).model_dump_json(), media_type="application/json")

    @app.put("/profiles/{name}", response_model=Profile,
             responses={201: {"description": "stored (new)"}, 422: {"description": "invalid profile, or its name or node do not match"}})
    def put_profile(name: ProfileName, profile: Annotated[Profile, Body()]) -> Response:
        problems = []
        if profile.name != name:
            problems.append({"field": "name", "reason": f"the profile's name {profile.name!r} is not the name in the path {name!r}",
                             "type": "value_error"})
        if profile.node_id != state.node_id:
            problems.append({"field": "node_id", "reason": f"this service stores profiles of node {state.node_id!r}, not {profile.node_id!r}",
                             "type": "value_error"})
        for key, value in profile:
            if isinstance(value, float) and not math.isfinite(value):
                problems.append({"field": key, "reason": f"must be a finite number, not {value}", "type": "finite_number"})
        if problems:
            return JSONResponse({"detail": problems, "message": "; ".join(f"{p['field']}: {p['reason']}" for p in problems)},
                                status_code=422)
        stored_json = profile.model_dump_json()
        try:
            Profile.model_validate_json(stored_json)  # what is stored must read back (JSON has no infinity)
        except ValidationError as exc:
            return JSONResponse(validation_detail(list(exc.errors())), status_code=422)
        store = state.store()
        existed = store.get(name, state.node_id) is not None
        store.put(profile)
        return Response(stored_json, media_type="application/json", status_code=200 if existed else 201)

    @app.delete("/profiles/{name}", responses={404: {"description": "no such profile"}})
    def delete_profile(name: ProfileName) -> dict[str, str]:
        store = state.store()
        if not store.delete(name, state.node_id):
            raise ProfileNotFoundError(f"no profile named {name!r} for node {state.node_id!r} in {store.path}")
        return {"deleted": name, "node_id": state.node_id}

    return app


def openapi_document(app: FastAPI) -> dict[str, Any]:
    """FastAPI's OpenAPI document, with the ``Window`` schema POST /schedule's body refers to (the route reads the
    raw body itself, so FastAPI does not find the model in its signature)."""
    if app.openapi_schema is None:
        doc = app.openapi()
        schemas = doc.setdefault("components", {}).setdefault("schemas", {})
        window = Window.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(window.pop("$defs", {}))
        schemas["Window"] = window
    return app.openapi_schema  # type: ignore[return-value]


def app_from_env() -> FastAPI:
    """Factory for ``uvicorn --factory`` (several workers): the configuration comes from the environment."""
    budget = os.environ.get(ENV_BUDGET)
    return create_app(os.environ.get(ENV_NODE, "local"), os.environ.get(ENV_MODEL) or None, os.environ.get(ENV_TOKEN) or None,
                      int(budget) if budget else None)
