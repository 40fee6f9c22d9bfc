"""The scheduler of POST /schedule's plans: small windows on the event loop, in turn; large ones in a worker thread.

The body's ``mode`` (``env.plan.stream_plan.ScheduleRequest``) is honoured by ``modes`` (``mode_planner``): groups, the
window plan (``plan``) saying so; continuous, the stream policy's launches; absent, whichever the node model predicts
to end sooner (``service.planning.choose_mode``), as ``cosched schedule`` chooses."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from starlette.concurrency import run_in_threadpool

from env.plan.models import Plan, Window

#: (the window, the groups planner: window -> the plan's JSON bytes) -> the answer's JSON bytes
Modes = Callable[[Window, Callable[[Window], bytes]], bytes]

#: Windows of at most this many jobs are planned on the event loop (a few ms); larger ones in a worker thread,
#: so a 1024-job window does not hold up every other client's request for its whole planning time.
INLINE_PLAN_JOBS = 32


class InlinePlanner:
    """Plans a window for POST /schedule: small windows on the event loop, in turn; large ones in a worker thread.

    ``plan`` turns a window into the plan's JSON bytes; the caller never holds ``lock`` (one plan at a time).
    """

    def __init__(self, plan: Callable[[Window], bytes], lock: threading.Lock, modes: Modes | None = None) -> None:
        self.plan = plan
        self.lock = lock
        self.modes = modes  # None: every window planned in groups by ``plan`` (the route sets mode_planner's)
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
                        return self._plan(window)
                    finally:
                        self.lock.release()
        return await run_in_threadpool(self._locked_plan, window)

    def _plan(self, window: Window) -> bytes:
        return self.plan(window) if self.modes is None else self.modes(window, self.plan)

    def _locked_plan(self, window: Window) -> bytes:
        with self.lock:
            return self._plan(window)


def mode_planner(state) -> Modes:
    """The answer in the body's mode for the service's node: groups (``plan``'s, which says so), continuous (the
    default stream policy), or absent: ``service.planning.choose_mode`` over ``plan``'s groups plan."""

    def answer(window: Window, plan: Callable[[Window], bytes]) -> bytes:
        from service.planning import as_groups, choose_mode, own_lengths_reason, plan_continuous

        mode = getattr(window, "mode", None)
        given = own_lengths_reason(window) if mode is None else ""
        if mode == "continuous" or given:
            doc = plan_continuous(window, state.node)
            return doc.model_copy(update={"mode_reason": given or "continuous: asked for"}).model_dump_json().encode()
        groups = Plan.model_validate_json(plan(window))
        chosen = as_groups(groups, "groups: asked for") if mode == "groups" else choose_mode(window, state.node, groups)
        return chosen.model_dump_json().encode()

    return answer
