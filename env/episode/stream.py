"""Job streams decided at every event (no group barriers): the decision loop, and what a stream's run measured.

A *stream* is jobs with submit times (0 for a saturated queue), in submit order (ties by position). An *event* is a
job ending or arriving; between two events nothing changes. At every event the policy sees the node (the running
jobs, their allocations and work left, the free CPUs), the queue of arrived jobs and Cmax, and returns a
``Decision``: which queued jobs start now with which allocations, and new ways / bandwidth caps for running jobs.
Starting nothing is a valid decision. The loop checks every decision (one line naming what is wrong: never more than
Cmax jobs at once, never a CPU twice, only queued jobs) and advances the node model (``env.sim.stream``) to the
next event. Every figure it makes on a simulated node is simulated.

Metrics (of the stream, as ``cosched eval --streams`` reports them): makespan = first submit to last end;
throughput vs time sharing = sum of solo times / makespan; turnaround of a job = end - submit; bounded slowdown =
max(1, turnaround / max(solo time, 10 s)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Container, Protocol, Sequence

from env.errors import InputError
from env.node.spec import NodeSpec
from env.plan.allocate import Allocation
from env.sim.model import JobParams
from env.sim.stream import Running, StreamNode

#: Jobs at the head of the queue a stream policy may choose among (the window).
DEFAULT_STREAM_WINDOW = 8

#: Bounded slowdown's floor on a job's solo time (s): short jobs do not dominate the mean.
SLOWDOWN_FLOOR_S = 10.0


@dataclass(frozen=True)
class StreamJob:
    id: str
    name: str  # its program (catalogue name on a simulated node)
    params: JobParams
    solo_s: float  # alone on the whole node
    submit_s: float = 0.0
    #: its program loses nothing when CPUs are taken from it while it runs: only such a job may give CPUs back. A
    #: program fixes its thread count at its start; re-pinned onto fewer CPUs, threads that spin while they wait run
    #: two orders of magnitude slower (bench/giveback_cost.py, measured), which the node model does not foresee.
    adapts: bool = False


@dataclass(frozen=True)
class Decision:
    starts: tuple[tuple[str, Allocation], ...] = ()  # (queued job id, its allocation)
    changes: tuple[tuple[str, Allocation], ...] = ()  # (running job id, its new ways / caps, or fewer CPUs)
    note: str = ""  # why, when the policy departs from its rule (e.g. a search falling back to packing)


WAIT = Decision()


@dataclass
class StreamView:
    """What a policy sees at an event. ``queue``: the arrived jobs not started, in submit order."""

    sim: StreamNode
    queue: list[StreamJob]
    max_concurrency: int
    pending: int  # jobs not arrived yet

    @property
    def node(self) -> NodeSpec:
        return self.sim.node

    @property
    def now(self) -> float:
        return self.sim.now

    @property
    def running(self) -> dict[str, Running]:
        return self.sim.running

    def free_cpus(self) -> set[int]:
        return self.sim.free_cpus()

    def places(self) -> int:
        """How many more jobs may start now (Cmax less the running ones)."""
        return max(0, self.max_concurrency - len(self.sim.running))


class StreamPolicy(Protocol):
    name: str

    def reset(self, node: NodeSpec, jobs: Sequence[StreamJob], max_concurrency: int) -> None: ...

    def decide(self, view: StreamView) -> Decision: ...


@dataclass
class JobRun:
    id: str
    name: str
    submit_s: float
    start_s: float
    end_s: float
    solo_s: float
    cpus: tuple[int, ...]

    @property
    def turnaround_s(self) -> float:
        return self.end_s - self.submit_s

    @property
    def bounded_slowdown(self) -> float:
        return max(1.0, self.turnaround_s / max(self.solo_s, SLOWDOWN_FLOOR_S))


@dataclass
class StreamRun:
    policy: str
    jobs: list[JobRun]
    decisions: int = 0  # events the policy was asked at
    changes: list[tuple[float, str, Allocation]] = field(default_factory=list)  # (when, job id, new allocation)
    notes: list[tuple[float, str]] = field(default_factory=list)  # (when, the decision's note)

    @property
    def makespan_s(self) -> float:
        return max(j.end_s for j in self.jobs) - min(j.submit_s for j in self.jobs)

    def metrics(self) -> dict[str, float]:
        n = len(self.jobs)
        return {"makespan_s": self.makespan_s,
                "throughput_vs_timeshare": sum(j.solo_s for j in self.jobs) / self.makespan_s,
                "mean_turnaround_s": sum(j.turnaround_s for j in self.jobs) / n,
                "mean_bounded_slowdown": sum(j.bounded_slowdown for j in self.jobs) / n}


def check_decision(view: StreamView, d: Decision, adapts: Container[str] | None = None) -> None:
    """One line naming what is wrong with ``d`` in this state (ValueError), or nothing. ``adapts``: the jobs that may
    give CPUs back (``StreamJob.adapts``); None: not checked."""
    queued = {j.id for j in view.queue}
    free = set(view.free_cpus())
    for jid, alloc in d.changes:  # CPUs given back are free for this decision's starts
        if jid in view.running:
            free |= set(view.running[jid].alloc.cpus) - set(alloc.cpus)
    taken: set[int] = set()
    for jid, alloc in d.starts:
        if jid not in queued:
            raise ValueError(f"the decision starts {jid!r}, which is not in the queue")
        queued.discard(jid)
        cpus = set(alloc.cpus)
        if not cpus:
            raise ValueError(f"the decision starts {jid!r} on no CPU")
        if not cpus <= free or cpus & taken:
            raise ValueError(f"the decision starts {jid!r} on CPUs {sorted(cpus - free or cpus & taken)} that are taken")
        taken |= cpus
    if len(view.running) + len(d.starts) > view.max_concurrency:
        raise ValueError(f"the decision would run {len(view.running) + len(d.starts)} jobs at once, "
                         f"above Cmax {view.max_concurrency}")
    for jid, alloc in d.changes:
        if jid not in view.running:
            raise ValueError(f"the decision changes {jid!r}, which is not running")
        held = set(view.running[jid].alloc.cpus)
        if not alloc.cpus or not set(alloc.cpus) <= held:
            raise ValueError(f"the decision gives {jid!r} CPUs {sorted(set(alloc.cpus) - held) or '[]'} it does not hold "
                             "(a running job may only give CPUs back)")
        if adapts is not None and jid not in adapts and set(alloc.cpus) != held:
            raise ValueError(f"it takes CPUs from {jid}, whose program does not adapt to fewer CPUs while it runs (its "
                             "job does not say adapts)")


def run_stream(node: NodeSpec, jobs: Sequence[StreamJob], max_concurrency: int, policy: StreamPolicy, *,
               params=None, factors: dict[str, float] | None = None) -> StreamRun:  # noqa: ANN001 - SimParams
    """The stream decided by ``policy`` at every event on the node model; ``factors``: each job's noise factor."""
    from env.sim.world import world_for

    if max_concurrency < 1:
        raise InputError("max_concurrency must be at least 1")
    order = sorted(range(len(jobs)), key=lambda i: (jobs[i].submit_s, i))
    pending = [jobs[i] for i in order]
    by_id = {j.id: j for j in jobs}
    adapting = {j.id for j in jobs if j.adapts}
    if len(by_id) != len(jobs):
        raise InputError("job ids must be unique in a stream")
    sim = StreamNode(node, params if params is not None else world_for(node).params)
    policy.reset(node, pending, max_concurrency)
    queue: list[StreamJob] = []
    runs: dict[str, JobRun] = {}
    out = StreamRun(policy.name, [])
    if pending:
        sim.now = pending[0].submit_s
    while pending or queue or sim.running:
        while pending and pending[0].submit_s <= sim.now:
            queue.append(pending.pop(0))
        view = StreamView(sim, queue, max_concurrency, len(pending))
        d = policy.decide(view)
        out.decisions += 1
        check_decision(view, d, adapting)
        if d.note:
            out.notes.append((sim.now, d.note))
        for jid, alloc in d.changes:
            sim.apply(jid, alloc)
            out.changes.append((sim.now, jid, alloc))
        for jid, alloc in d.starts:
            j = by_id[jid]
            sim.start(jid, j.name, j.params, alloc, factor=(factors or {}).get(jid, 1.0))
            runs[jid] = JobRun(jid, j.name, j.submit_s, sim.now, math.nan, j.solo_s, tuple(alloc.cpus))
        if d.starts:
            started = {jid for jid, _ in d.starts}
            queue = [j for j in queue if j.id not in started]
        if not sim.running:
            if not pending:
                if queue:
                    raise ValueError(f"policy {policy.name!r} started nothing with {len(queue)} jobs queued and "
                                     "none running or to come")
                break
            sim.now = max(sim.now, pending[0].submit_s)
            continue
        for jid in sim.advance(pending[0].submit_s if pending else math.inf):
            runs[jid].end_s = sim.ended[jid]
    out.jobs = [runs[j.id] for j in jobs]
    return out


__all__ = ["DEFAULT_STREAM_WINDOW", "Decision", "WAIT", "StreamJob", "sim_stream", "StreamView", "StreamPolicy", "StreamRun", "JobRun", "run_stream",
           "check_decision", "SLOWDOWN_FLOOR_S", "program_for"]


def program_for(node: NodeSpec, profile: str, solo_s: float | None = None) -> tuple[JobParams, float]:
    """A program's params and time alone on ``node``'s model, scaled to a job's own time alone ``solo_s`` where one
    is given (``JobParams.scaled``: work and traffic, not working sets); the program must be known there."""
    from env.sim.catalogue import catalogue
    from env.sim.world import world_for

    params, solo = world_for(node).entries[profile].params, catalogue(node)[profile].solo_s
    return (params, solo) if solo_s is None else (params.scaled(solo_s / solo), solo_s)


def sim_stream(node: NodeSpec, jobs: Sequence) -> list[StreamJob]:  # noqa: ANN001 - WindowJobs
    """A stream document's jobs on a simulated node: each job's program from the node's catalogue (one line naming
    the unknown ones), scaled to the job's own ``solo_s`` where it gives one."""
    from env.sim.world import world_for

    world = world_for(node)
    unknown = [j.profile_name for j in jobs if not world.is_known(j.profile_name)]
    if unknown:
        raise InputError(f"{node.name} does not know {', '.join(dict.fromkeys(unknown))} (see 'cosched jobs --backend sim')")
    return [StreamJob(j.id, j.profile_name, *program_for(node, j.profile_name, j.solo_s), j.submit_s or 0.0,
                      bool(j.adapts)) for j in jobs]
