"""Hand-made plans for this node, shared by the runner tests."""

from __future__ import annotations

from fractions import Fraction

from env import actions as A
from env.discover import discover
from env.models import Plan, WindowJob
from env.plan import PlanBuilder

LOCAL = discover("/")
HALF = A.encode(A.JobAction(Fraction(1, 2), Fraction(8, 22), 100, "balanced"))


def make_plan(groups: list[list[tuple[str, list[str]] | tuple[str, list[str], str]]], action: int = HALF) -> Plan:
    """groups of (id, command[, profile]); each job gets half the node."""
    b = PlanBuilder(node=LOCAL, schedule=A.ScheduleAction("compact", "first-touch"), max_concurrency=4, window_size=sum(map(len, groups)))
    for group in groups:
        for spec in group:
            job = WindowJob(id=spec[0], command=spec[1], profile=spec[2] if len(spec) > 2 else None)  # type: ignore[misc]
            assert b.place(job, action) is not None, "the test plan must fit this node"
        b.close_group()
    return b.build("hand")
