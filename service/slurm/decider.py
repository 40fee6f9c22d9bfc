"""The Slurm controller's one door to the decision code of continuous mode (``service.decide.decide_state``, the
code behind ``POST /decide`` and ``cosched run --mode continuous``): a node's state at an event in, the jobs to
start there with their allocations and the new ways / caps of the jobs running there out.

Two things are settled here and nowhere else: a queued job whose program the node model does not know is left out
of the decision and named (the controller runs it alone on an empty node), and a policy that needs a node model on
a node without one falls back to ``packing`` (said once by the caller). In ``decide``'s node model a CPU runs one
job at a time, so at most one job per CPU runs at once whatever Cmax the partition allows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from env.node.spec import NodeSpec
from env.planners.streams import DEFAULT_CONTINUOUS_POLICY
from service.decide import (
    ONLINE_POLICIES,
    DecideAllocation,
    DecideError,
    DecideRequest,
    QueuedIn,
    RunningIn,
    decide_state,
)
from service.lengths import expectations

FALLBACK_POLICY = "packing"


@dataclass(frozen=True)
class Running:
    id: int
    profile: str
    allocation: DecideAllocation
    seconds_run: float
    solo_s: float | None = None  # its time alone on the node where the caller knows it better than the profile


@dataclass(frozen=True)
class Queued:
    id: int
    profile: str
    submit_s: float  # on the caller's clock, as ``now_s``
    solo_s: float | None = None


@dataclass
class Decided:
    policy: str
    starts: list[tuple[int, DecideAllocation]] = field(default_factory=list)
    changes: list[tuple[int, DecideAllocation]] = field(default_factory=list)
    predicted_makespan_s: float | None = None  # the known jobs of this node, on the node model; None without one
    unknown: list[int] = field(default_factory=list)  # queued jobs whose program the node model does not know
    fallback: str | None = None  # why the policy asked for did not decide (no node model), else None
    note: str | None = None  # why the policy departed from its own rule (its guard decided as packing), else None
    # each started job: (its time alone as the decision took it, the seconds to its end the node model predicts);
    # only jobs both are known for
    expected: dict[int, tuple[float, float]] = field(default_factory=dict)


def max_jobs(node: NodeSpec, cmax: int) -> int:
    """Jobs at most at once on ``node``: Cmax, and one per CPU."""
    return max(1, min(cmax, len(node.cpus)))


def decide(node: NodeSpec, running: list[Running], queue: list[Queued], max_concurrency: int, *, now_s: float,
           policy: str | None = None, window: int | None = None) -> Decided:
    """The decision for ``node`` now. Raises DecideError only for state the controller got wrong (a CPU held
    twice, an allocation off the node): a bug, never the users' input."""
    cmax = max_jobs(node, max_concurrency)
    unknown: list[int] = []
    fallback = None
    queue = list(queue)
    while True:
        req = DecideRequest(
            running=[RunningIn(id=str(r.id), profile=r.profile, allocation=r.allocation,
                               seconds_run=max(0.0, r.seconds_run), solo_s=r.solo_s) for r in running],
            queue=[QueuedIn(id=str(q.id), profile=q.profile, submit_s=min(max(0.0, q.submit_s), now_s), solo_s=q.solo_s)
                   for q in queue],
            max_concurrency=cmax, policy=policy, window=window, now_s=now_s)
        try:
            out = decide_state(node, req)
        except DecideError as exc:
            if exc.field == "policy" and (policy or DEFAULT_CONTINUOUS_POLICY) in ONLINE_POLICIES and policy != FALLBACK_POLICY:
                fallback, policy = exc.reason, FALLBACK_POLICY
                continue
            k = _queue_index(exc.field)
            if k is None or not exc.field.endswith(".profile"):
                raise
            unknown.append(queue.pop(k).id)
            continue
        pred = out.predicted.makespan_s if out.predicted is not None else None
        ends = {p.id: p.end_s for p in out.predicted.jobs} if out.predicted is not None else {}
        expected = {int(k): v for k, v in expectations([(s.id, s.solo_s) for s in out.starts], ends, out.now_s).items()}
        return Decided(policy=out.policy, starts=[(int(s.id), s.allocation) for s in out.starts],
                       changes=[(int(c.id), c.allocation) for c in out.changes], predicted_makespan_s=pred,
                       unknown=unknown, fallback=fallback, note=out.note, expected=expected)


def _queue_index(name: str) -> int | None:
    """'queue[3].profile' -> 3."""
    if not name.startswith("queue["):
        return None
    try:
        return int(name[6:name.index("]")])
    except ValueError:
        return None
