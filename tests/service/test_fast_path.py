"""POST /schedule is one route (service.api): the raw body validated by ``Window`` in one call, planned once (real HTTP).

The same body sent as ``application/json`` and as ``application/json; charset=utf-8`` gets the same bytes back, valid
or not (bad bodies are reported as FastAPI reports bad JSON bodies); a window is planned once a request, even when
planning fails; small windows are planned on the event loop in turn, large ones in a worker thread.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from svc_support import SIM_NODE, Server, running
from test_bad_bodies import CASES

from env.plan.models import Window, WindowJob
from service.api.main import create_app
from service.api.planner import INLINE_PLAN_JOBS, InlinePlanner

FAST = {"content-type": "application/json"}
ROUTED = {"content-type": "application/json; charset=utf-8"}

GOOD = [
    {"jobs": [{"id": "MG"}, {"id": "EP"}]},
    {"jobs": [{"id": f"j{i}", "profile": p, "command": [f"./{p}", "-n", str(i)], "env": {"OMP_NUM_THREADS": "4"}}
              for i, p in enumerate(["MG", "EP", "CG", "FT", "IS", "LU"])], "max_concurrency": 3},
    {"jobs": [{"id": "MG"}, {"id": "never-profiled"}, {"id": "x", "profile": "nope"}]},  # excluded jobs
    {"jobs": [{"id": f"j{i}", "profile": "MG"} for i in range(40)], "max_concurrency": 2},  # planned off the event loop
    {"jobs": [{"id": "MG"}], "max_concurrency": 64},  # a planning error (above the model's Cmax) or a plan
]


def both(server: Server, raw: bytes) -> tuple[tuple[int, bytes], tuple[int, bytes]]:
    fast = server.client.post("/schedule", content=raw, headers=FAST)
    routed = server.client.post("/schedule", content=raw, headers=ROUTED)
    return (fast.status_code, fast.content), (routed.status_code, routed.content)


@pytest.mark.parametrize("doc", GOOD, ids=range(len(GOOD)))
def test_fast_path_plans_as_the_route(server: Server, planning: None, doc: dict) -> None:
    fast, routed = both(server, json.dumps(doc).encode())
    assert fast == routed
    assert fast[0] in (200, 422)


def test_duplicate_keys_and_bom_as_the_route(server: Server, planning: None) -> None:
    for raw in (b'{"jobs": [{"id": "a"}], "jobs": [{"id": "MG"}]}', b'\xef\xbb\xbf{"jobs": [{"id": "MG"}]}',
                b' {"jobs": [{"id": "MG"}], "max_concurrency": 2.0}\n', b'{"jobs": [{"id": "MG"}], "max_concurrency": "2"}'):
        fast, routed = both(server, raw)
        assert fast == routed, raw


@pytest.mark.parametrize("name, raw", [(c[0], c[1]) for c in CASES], ids=[c[0] for c in CASES])
def test_bad_bodies_answered_as_the_route(server: Server, name: str, raw: bytes) -> None:
    fast, routed = both(server, raw)
    assert fast == routed


def test_a_window_is_planned_once_per_request(cosched_home: Path, planning: None) -> None:
    """Valid windows are planned once whatever the JSON content type; invalid ones never; a failing plan once."""
    app = create_app(SIM_NODE)
    planner = app.state.planner
    calls = []
    plan = planner.plan
    planner.plan = lambda window: calls.append(window) or plan(window)
    with running(app, cosched_home) as s:
        r = s.client.post("/schedule", content=b'{"jobs": [{"id": "MG"}]}', headers=FAST)
        assert r.status_code == 200 and r.headers["content-type"] == "application/json"
        assert int(r.headers["content-length"]) == len(r.content) and len(calls) == 1
        assert s.client.post("/schedule", content=b'{"jobs": [{"id": "MG"}]}', headers=ROUTED).content == r.content
        assert len(calls) == 2
        assert s.client.post("/schedule", content=b'{"jobs": [{"id": "a b"}]}', headers=FAST).status_code == 422
        assert len(calls) == 2
        failing = s.client.post("/schedule", content=b'{"jobs": [{"id": "MG"}], "max_concurrency": 64}', headers=FAST)
        assert failing.status_code in (200, 422) and len(calls) == 3  # above the model's Cmax: an error, planned once


def _run_on(loop_kind: str, main: "Callable[[], Awaitable[None]]") -> None:
    if loop_kind == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(main())
    else:
        asyncio.run(main())


@pytest.mark.parametrize("loop_kind", ["asyncio", "uvloop"])
def test_inline_plans_take_turns_in_arrival_order(loop_kind: str) -> None:
    """Small windows are planned on the event loop one per turn of the loop, first come first served: I/O is
    polled between two plans (new connections are accepted while the service is saturated), and no request
    overtakes another. Each loop gets its own queue (an app may serve from several loops, as the tests do)."""
    ticks = 0
    order: list[tuple[str, int]] = []

    def plan(window: Window) -> bytes:
        order.append((window.jobs[0].id, ticks))
        return window.jobs[0].id.encode()

    fast = InlinePlanner(plan, threading.Lock())
    windows = [Window(jobs=[WindowJob(id=f"w{i}")]) for i in range(8)]

    async def main() -> None:
        nonlocal ticks
        stop = False

        async def ticker() -> None:  # one step each turn of the loop
            nonlocal ticks
            while not stop:
                ticks += 1
                await asyncio.sleep(0)

        beat = asyncio.create_task(ticker())
        answers = await asyncio.gather(*(fast.planned(w) for w in windows))
        stop = True
        await beat
        assert answers == [w.jobs[0].id.encode() for w in windows]

    for _ in range(2):  # a second loop: a fresh queue, no "bound to a different event loop" error
        order.clear()
        _run_on(loop_kind, main)
        assert [name for name, _ in order] == [w.jobs[0].id for w in windows]
        seen = [t for _, t in order]
        assert all(b > a for a, b in zip(seen, seen[1:])), seen  # the loop turned between two plans


def test_large_windows_and_a_busy_planner_go_to_a_thread() -> None:
    """Over INLINE_PLAN_JOBS jobs, or while the planner lock is held (warm-up, a routed request): a worker thread."""
    threads: list[str] = []

    def plan(window: Window) -> bytes:
        threads.append(threading.current_thread().name)
        return b"ok"

    lock = threading.Lock()
    fast = InlinePlanner(plan, lock)
    big = Window(jobs=[WindowJob(id=f"j{i}") for i in range(INLINE_PLAN_JOBS + 1)])
    small = Window(jobs=[WindowJob(id="MG")])

    async def main() -> None:
        assert await fast.planned(small) == b"ok"
        assert await fast.planned(big) == b"ok"
        lock.acquire()
        try:
            pending = asyncio.ensure_future(fast.planned(small))
            await asyncio.sleep(0.05)
            assert not pending.done()  # waits for the lock, in a thread, without blocking the loop
        finally:
            lock.release()
        assert await pending == b"ok"

    asyncio.run(main())
    main_thread = threading.main_thread().name
    assert threads[0] == main_thread and threads[1] != main_thread and threads[2] != main_thread
