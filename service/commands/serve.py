"""``cosched serve``: the HTTP service (``service.api``) on uvicorn.

Binds 127.0.0.1 by default. Any other address needs ``COSCHED_TOKEN`` (refused with exit 2 otherwise); with a
token set, every route but ``/healthz`` checks ``Authorization: Bearer <token>``. Logs are JSON lines on stderr
(one access line a request). SIGTERM or SIGINT stops it gracefully: no new connections, requests in flight
finish (up to --grace seconds), exit status 0.
"""

from __future__ import annotations

import argparse
import importlib.util
import ipaddress
import json
import os
import signal
import sys
import time

from env.errors import InputError
from env.planners.search import BUDGET_HELP


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="the HTTP service: POST /schedule (window in, plan out), POST /decide (nothing is run)",
        description="Serve the planner over HTTP (FastAPI on uvicorn): POST /schedule, POST /decide, GET /healthz, /node, /model, "
        "/profiles, GET/PUT/DELETE /profiles/NAME, /docs, /openapi.json. It plans for NODE with the model M "
        "(without one: the 'greedy' heuristic) and never executes anything it receives. Binding an address other "
        "than loopback requires COSCHED_TOKEN; with it set, clients send 'Authorization: Bearer $COSCHED_TOKEN' "
        "(except to /healthz).",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; others need COSCHED_TOKEN)")
    p.add_argument("--port", type=int, default=8000, help="TCP port (default 8000; 0 picks a free one)")
    p.add_argument("--node", default="local", help="'local' (default) or 'sim:NAME': the node plans are for")
    p.add_argument("--model", default=None, metavar="M", help="the agent's model file (default: none, plan with 'greedy')")
    p.add_argument("--search-budget", type=int, default=None, metavar="N",
                   help=BUDGET_HELP)
    p.add_argument("--workers", type=int, default=1, metavar="N", help="worker processes (default 1)")
    p.add_argument("--grace", type=float, default=10.0, metavar="S", help="seconds requests in flight get on shutdown (default 10)")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"],
                   help="info logs every request (default); warning only problems")
    p.set_defaults(handler=run)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost: may resolve anywhere


def check_bind(host: str, token: str | None) -> None:
    if not is_loopback(host) and not token:
        raise InputError(f"refusing to bind {host}, which is not a loopback address, without a token: "
                         "set COSCHED_TOKEN (clients then send 'Authorization: Bearer <token>')")


def server_backends() -> dict[str, str]:
    """uvicorn's HTTP parser and event loop: the C ones (httptools, uvloop; pinned dependencies, much less CPU
    a request) when installed, else the pure-Python h11 and asyncio, which serve the same answers, slower."""
    def have(module: str) -> bool:
        return importlib.util.find_spec(module) is not None

    return {"http": "httptools" if have("httptools") else "h11", "loop": "uvloop" if have("uvloop") else "asyncio"}


def _log_line(msg: str, **fields: object) -> None:
    """A JSON log line on stderr outside uvicorn's logging (before it configures it, after it is gone)."""
    sys.stderr.write(json.dumps({"ts": round(time.time(), 3), "level": "info", "logger": "cosched.serve", "msg": msg, **fields}) + "\n")


def run(args: argparse.Namespace) -> int:
    from service.api.settings import ServiceSettings

    # the arguments, and the token from the environment: what every worker starts from
    settings = ServiceSettings.load(node=args.node, model=args.model, search_budget=args.search_budget)
    check_bind(args.host, settings.token)
    if not 0 <= args.port <= 65535:
        raise InputError(f"--port must be 0-65535, not {args.port}")
    if args.workers < 1:
        raise InputError(f"--workers must be at least 1, not {args.workers}")

    import uvicorn

    from service.api.logs import log_config
    from service.api.main import create_app

    # a bad node, model or budget: one line, before serving
    app = create_app(settings.node, settings.model, settings.token, settings.search_budget)
    stopped_by: list[str] = []

    def note(signum: int, frame: object) -> None:  # uvicorn re-raises the signal it caught after shutting down
        stopped_by.append(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, note)
    signal.signal(signal.SIGINT, note)

    backends = server_backends()
    common = dict(host=args.host, port=args.port, log_config=log_config(args.log_level), access_log=False,
                  server_header=False, timeout_graceful_shutdown=args.grace, proxy_headers=False, **backends)
    _log_line("starting", workers=args.workers, **backends)
    if args.workers == 1:
        uvicorn.run(app, **common)  # type: ignore[arg-type]
    else:
        for name, value in settings.environ().items():  # the workers serve exactly what was checked above
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        uvicorn.run("service.api.main:app_from_env", factory=True, workers=args.workers, **common)  # type: ignore[arg-type]
    _log_line("stopped", by=stopped_by[0] if stopped_by else "server exit")
    return 0
