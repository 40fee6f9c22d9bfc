"""Support for the service tests: a real HTTP server: uvicorn in a thread on 127.0.0.1 and a free port, httpx as the client.

Every server gets its own profile store ($COSCHED_HOME in a temporary directory) so tests never see the user's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import uvicorn

from env.errors import InputError
from env.plan.models import Window

SIM_NODE = "sim:reference"
TOKEN = "t0ken-for-tests"


@dataclass
class Server:
    url: str
    client: httpx.Client
    home: Path


@contextmanager
def running(app, home: Path) -> Iterator[Server]:  # noqa: ANN001 - an ASGI app
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=url, timeout=30) as client:
            yield Server(url, client, home)
    finally:
        server.should_exit = True
        thread.join(10)


def planning_unavailable() -> str | None:
    """Why planning cannot be tested yet (plan_window still the stub), or None when it works."""
    from env.sim.nodes import load_node
    from service.planning import plan_window

    try:
        plan_window(Window.model_validate({"jobs": [{"id": "MG"}]}), load_node(SIM_NODE), policy="greedy")
    except InputError as exc:
        if "not available yet" in str(exc):
            return f"service.planning.plan_window is not wired yet ({exc})"
    return None


@contextmanager
def running_app(node: str = SIM_NODE, *, model_path: str | None = None, token: str | None = None, home: Path) -> Iterator[Server]:
    from service.api.main import create_app

    with running(create_app(node, model_path, token), home) as s:
        yield s
