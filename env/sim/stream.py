"""The node model for job streams: jobs start at any event with their allocation, carry their remaining work, and
running jobs' L3 ways and bandwidth caps may change at events (and a running job may give back CPUs); every job's
rate is recomputed at every event.

The group run (``env.sim.model.run_group_py``) is the special case where every job starts at 0 and nothing changes:
between two events each running job progresses at ``1 / T`` of its work per second, ``T`` its time for the whole work
under the current contention (``env.sim.model.solve`` over the running set, times its noise factor). Pure: the same
starts, changes and factors give the same ends. Every figure it makes is simulated.

``Allocation`` (``env.plan.allocate``) is the one vocabulary for what a job holds: CPUs, memory policy, ways by L3
domain id, bandwidth percent by NUMA domain id.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from env.node.spec import NodeSpec
from env.plan.allocate import Allocation
from env.sim.model import JobParams, SimJob, geometry, memory_key, solve
from env.sim.params import SimParams

#: Work left below this fraction counts as done (the group run's threshold).
DONE = 1e-9


@dataclass
class Running:
    """A job on the node: what it holds, its work left (a fraction of its whole work) and when it started."""

    name: str
    params: JobParams
    alloc: Allocation
    sim: SimJob
    start_s: float
    left: float = 1.0
    factor: float = 1.0  # its noise factor: its times under any contention are multiplied by it


class Memo:
    """The SimJobs and contention solves a node and its forks have seen. Searches fork the node hundreds of times per
    event and meet the same running sets again and again; a solve's result depends only on its SimJobs (and their
    order), so it is kept. Bounded: emptied when the solves reach ``LIMIT``."""

    LIMIT = 200_000

    __slots__ = ("jobs", "solves", "playout")

    def __init__(self) -> None:
        self.jobs: dict[tuple, tuple[JobParams, SimJob]] = {}
        self.solves: dict[tuple[int, ...], tuple[tuple[SimJob, ...], list[float]]] = {}
        self.playout = None  # env.sim.kernel.Playout, made by the first play-out in C (its records and solves)

    def sim_job(self, g, params: JobParams, alloc: Allocation) -> SimJob:  # noqa: ANN001 - Geometry
        key = (id(params), alloc.cpus, alloc.memory, tuple(sorted(alloc.l3.items())),
               tuple(sorted(alloc.mem_bw_percent.items())))
        hit = self.jobs.get(key)
        if hit is None:
            masks = {g.l3_index[d]: m for d, (_, m) in alloc.l3.items()}
            mba = {g.numa_index[d]: p for d, p in alloc.mem_bw_percent.items()}
            hit = self.jobs[key] = (params, SimJob(g, params, alloc.cpus, alloc.memory, masks, mba))  # params: kept alive
        return hit[1]

    def solve(self, g, sims: list[SimJob]) -> list[float]:  # noqa: ANN001 - Geometry
        key = tuple(map(id, sims))
        hit = self.solves.get(key)
        if hit is None:
            if len(self.solves) >= self.LIMIT:
                self.solves.clear()
                self.jobs.clear()
            # the entry holds its SimJobs: the ids in its key name live objects for as long as it exists
            hit = self.solves[key] = (tuple(sims), solve(g, sims))
        return hit[1]


@dataclass
class StreamNode:
    """The simulated node advanced from event to event. ``start`` and ``change`` act at ``now``; ``advance`` moves
    time to the next job end (or to ``until``, an arrival) and returns the jobs that ended then, in start order."""

    node: NodeSpec
    params: SimParams
    now: float = 0.0
    running: dict[str, Running] = field(default_factory=dict)
    ended: dict[str, float] = field(default_factory=dict)  # job id -> its end (s)
    events: int = 0  # contention solves so far (one per interval between events)
    memo: Memo = field(default_factory=Memo, repr=False, compare=False)  # shared with its forks

    def __post_init__(self) -> None:
        self.g = geometry(self.node, self.params)
        self._rates: dict[str, float] | None = None

    @classmethod
    def from_running(cls, node: NodeSpec, params: SimParams,
                     jobs: "list[tuple[str, str, JobParams, Allocation, float]]", now: float = 0.0,
                     floor: float = 0.01) -> "StreamNode":
        """The node with ``jobs`` running, each (id, program, params, allocation, seconds run), as a real node or a
        caller reports them. A job's work left is estimated from the model's rate at its current allocation under
        the current contention (the running set as it is now; what ran beside it before is not known):
        1 - seconds run x rate, at least ``floor`` (a job past the model's end is taken to end soon). Its start is
        now - seconds run. A CPU held twice raises ValueError (``start``)."""
        sim = cls(node, params, now=now)
        for jid, name, p, alloc, ran in jobs:
            sim.start(jid, name, p, alloc)
            sim.running[jid].start_s = now - ran
        rates = sim.rates()
        for jid, _, _, _, ran in jobs:
            sim.running[jid].left = max(floor, 1.0 - ran * rates[jid])
        return sim

    def fork(self) -> "StreamNode":
        """An independent copy of the node now (the searches play decisions forward on it; the jobs' SimJobs, which
        never change, are shared)."""
        other = StreamNode(self.node, self.params, now=self.now, ended=dict(self.ended), memo=self.memo)
        other.g = self.g
        other.running = {k: Running(r.name, r.params, r.alloc, r.sim, r.start_s, r.left, r.factor)
                         for k, r in self.running.items()}
        return other

    def free_cpus(self) -> set[int]:
        taken = {c for r in self.running.values() for c in r.alloc.cpus}
        return set(self.node.cpus) - taken

    def sim_job(self, params: JobParams, alloc: Allocation) -> SimJob:
        """What the model sees of a job of ``params`` on ``alloc`` on this node."""
        return self.memo.sim_job(self.g, params, alloc)

    def start(self, job_id: str, name: str, params: JobParams, alloc: Allocation, factor: float = 1.0) -> None:
        """``job_id`` starts now on ``alloc`` (its CPUs must be free)."""
        if job_id in self.running or job_id in self.ended:
            raise ValueError(f"job {job_id!r} has already started")
        busy = set(alloc.cpus) - self.free_cpus()
        if busy:
            raise ValueError(f"job {job_id!r} asks for CPUs {sorted(busy)}, which running jobs hold")
        self.running[job_id] = Running(name, params, alloc, self.sim_job(params, alloc), self.now, factor=factor)
        self._rates = None

    def change(self, job_id: str, alloc: Allocation) -> None:
        """New ways / bandwidth caps for a running job from now on; its CPUs and memory policy stay."""
        r = self.running[job_id]
        if alloc.cpus != r.alloc.cpus or memory_key(self.g, alloc.cpus, alloc.memory) != memory_key(
                self.g, r.alloc.cpus, r.alloc.memory):
            raise ValueError(f"job {job_id!r}: only its ways and bandwidth caps may change while it runs")
        r.alloc, r.sim = alloc, self.sim_job(r.params, alloc)
        self._rates = None

    def give_back(self, job_id: str, alloc: Allocation) -> None:
        """A running job keeps only ``alloc``'s CPUs (a subset of its own) from now on, its work left carried on: a
        node that ran it alone takes others beside it. Its pages stay where it touched them, so ``alloc`` should say
        where they are (first-touch over CPUs in each domain it had keeps half its threads near their pages)."""
        r = self.running[job_id]
        if not alloc.cpus or not set(alloc.cpus) < set(r.alloc.cpus):
            raise ValueError(f"job {job_id!r}: it can give back CPUs, not take new ones (keeps {list(alloc.cpus)} of "
                             f"{list(r.alloc.cpus)})")
        r.alloc, r.sim = alloc, self.sim_job(r.params, alloc)
        self._rates = None

    def apply(self, job_id: str, alloc: Allocation) -> None:
        """A decision's change for a running job: fewer of its CPUs (``give_back``) or new ways / caps (``change``)."""
        if set(alloc.cpus) != set(self.running[job_id].alloc.cpus):
            self.give_back(job_id, alloc)
        else:
            self.change(job_id, alloc)

    def rates(self) -> dict[str, float]:
        """Each running job's progress per second (fraction of its whole work) under the current contention."""
        if self._rates is None:
            ids = list(self.running)
            times = self.memo.solve(self.g, [self.running[k].sim for k in ids]) if ids else []
            self.events += 1
            self._rates = {k: 1.0 / (t * self.running[k].factor) for k, t in zip(ids, times)}
        return self._rates

    def next_end(self) -> float:
        """When the next running job ends if nothing else happens first (inf with nothing running)."""
        rates = self.rates()
        return min((self.now + r.left / rates[k] for k, r in self.running.items()), default=math.inf)

    def advance(self, until: float = math.inf) -> list[str]:
        """Time moves to the next job end, or to ``until`` when that comes first; the jobs ended then."""
        rates = self.rates()
        if not self.running:
            if math.isfinite(until):
                self.now = max(self.now, until)
            return []
        dt = min(r.left / rates[k] for k, r in self.running.items())
        if until < self.now + dt:
            dt = max(0.0, until - self.now)
        self.now += dt
        done = []
        for k, r in self.running.items():
            r.left -= rates[k] * dt
            if r.left <= DONE:
                done.append(k)
        for k in done:
            del self.running[k]
            self.ended[k] = self.now
        if done:
            self._rates = None  # another running set: other contention
        return done


__all__ = ["DONE", "Memo", "Running", "StreamNode"]
