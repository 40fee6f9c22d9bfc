"""The node model for job streams: jobs start at any event with their allocation, carry their remaining work, and
running jobs' L3 ways and bandwidth caps may change at events; every job's rate is recomputed at every event.

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

    def __post_init__(self) -> None:
        self.g = geometry(self.node, self.params)
        self._rates: dict[str, float] | None = None

    def fork(self) -> "StreamNode":
        """An independent copy of the node now (the searches play decisions forward on it; the jobs' SimJobs, which
        never change, are shared)."""
        other = StreamNode(self.node, self.params, now=self.now, ended=dict(self.ended))
        other.running = {k: Running(r.name, r.params, r.alloc, r.sim, r.start_s, r.left, r.factor)
                         for k, r in self.running.items()}
        return other

    def free_cpus(self) -> set[int]:
        taken = {c for r in self.running.values() for c in r.alloc.cpus}
        return set(self.node.cpus) - taken

    def sim_job(self, params: JobParams, alloc: Allocation) -> SimJob:
        """What the model sees of a job of ``params`` on ``alloc`` on this node."""
        g = self.g
        masks = {g.l3_index[d]: m for d, (_, m) in alloc.l3.items()}
        mba = {g.numa_index[d]: p for d, p in alloc.mem_bw_percent.items()}
        return SimJob(g, params, alloc.cpus, alloc.memory, masks, mba)

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

    def rates(self) -> dict[str, float]:
        """Each running job's progress per second (fraction of its whole work) under the current contention."""
        if self._rates is None:
            ids = list(self.running)
            times = solve(self.g, [self.running[k].sim for k in ids]) if ids else []
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


__all__ = ["DONE", "Running", "StreamNode"]
