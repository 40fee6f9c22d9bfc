"""Hand-made plans for this node, shared by the runner tests."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

from env.plan import actions as A
from env.node.discover import discover
from env.plan.models import Plan, WindowJob
from env.plan.builder import PlanBuilder

LOCAL = discover("/")
HALF = A.encode(A.JobAction(Fraction(1, 2), Fraction(8, 22), 100, "balanced"))
MOST = A.encode(A.JobAction(Fraction(7, 8), Fraction(8, 22), 100, "balanced"))  # all of a 2-CPU node


def make_plan(groups: list[list[tuple[str, list[str]] | tuple[str, list[str], str]]], action: int = HALF,
              pin_runtime: Path | None = None) -> Plan:
    """groups of (id, command[, profile]); each job gets half the node (or what ``action`` says)."""
    b = PlanBuilder(node=LOCAL, schedule=A.ScheduleAction("compact", "first-touch"), max_concurrency=4,
                    window_size=sum(map(len, groups)), pin_runtime=pin_runtime)
    for group in groups:
        for spec in group:
            job = WindowJob(id=spec[0], command=spec[1], profile=spec[2] if len(spec) > 2 else None)  # type: ignore[misc]
            assert b.place(job, action) is not None, "the test plan must fit this node"
        b.close_group()
    return b.build("hand")


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
