"""A cluster of simulated nodes driven by a job trace in the Standard Workload Format (SWF): every figure it makes is
simulated (the node model on every node), and the time the controller's decisions take is measured.

The trace and its jobs: ``service.slurm.swf`` (``read_swf``, ``map_jobs``; the rule from trace to cluster is
its docstring).

The cluster (``simulate``): N ``StreamNode``s (``env.sim.stream``) of one node model, a FCFS queue with EASY
backfilling (the head job gets a reservation at the earliest time the estimates free enough nodes for it; a later job
starts now only if it fits now and does not delay that reservation), and a cluster policy
(``service.slurm.tracesim_policies``) that says how many jobs a node takes (Cmax) and where a job's ranks go.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from env.errors import InputError
from env.node.spec import NodeSpec
from env.plan.allocate import Allocation
from env.sim.stream import StreamNode
from service.slurm.swf import SwfJob, Trace, TraceJob, map_jobs, read_swf

#: Bounded slowdown's floor (s), as for streams (``env.episode.stream.SLOWDOWN_FLOOR_S``).
SLOWDOWN_FLOOR_S = 10.0
#: Jobs past the head that one backfill pass looks at (a bf_max_job_test-like bound).
BACKFILL_DEPTH = 200
_EPS = 1e-6


@dataclass
class JobRun:
    id: str
    program: str
    nodes: int
    submit_s: float
    start_s: float
    end_s: float
    run_s: float
    ranks: tuple[int, ...] = ()  # its nodes

    @property
    def turnaround_s(self) -> float:
        return self.end_s - self.submit_s

    @property
    def bounded_slowdown(self) -> float:
        return max(1.0, self.turnaround_s / max(self.run_s, SLOWDOWN_FLOOR_S))


@dataclass
class TraceRun:
    policy: str
    nodes: int
    jobs: list[JobRun]
    busy_node_s: float  # node-seconds with at least one job on the node
    passes: int  # scheduling passes (one at each event time)
    decide_s: float  # CPU time in them (the controller's decisions)
    wall_s: float  # CPU time of the whole simulation
    give_backs: int = 0  # running jobs that gave back CPUs (the policy's ``give_back``)

    def metrics(self) -> dict[str, float]:
        n = len(self.jobs)
        t0 = min(j.submit_s for j in self.jobs)
        makespan = max(j.end_s for j in self.jobs) - t0
        work = sum(j.nodes * j.run_s for j in self.jobs)
        return {"jobs": n, "makespan_s": makespan,
                "mean_turnaround_s": sum(j.turnaround_s for j in self.jobs) / n,
                "mean_wait_s": sum(j.start_s - j.submit_s for j in self.jobs) / n,
                "mean_bounded_slowdown": sum(j.bounded_slowdown for j in self.jobs) / n,
                "node_utilisation": self.busy_node_s / (self.nodes * makespan),
                "work_utilisation": work / (self.nodes * makespan),
                "decisions": self.passes, "decisions_per_s": self.passes / max(self.decide_s, 1e-9),
                "give_backs": self.give_backs,
                "events_per_s": self.passes / max(self.wall_s, 1e-9)}


class ClusterPolicy(Protocol):
    """Where a job's ranks go. ``cmax``: the jobs a node runs at once (their CPUs disjoint); ``place``: one
    (node, allocation) a rank on ``k`` distinct nodes among ``candidates`` (node indices, ascending, each with a free
    place), or None to leave the job waiting. A policy may also have ``give_back(cluster, queue)``: the running jobs
    that keep fewer CPUs from now on, (job id, the allocation each keeps on every node it holds), asked at each pass
    before the queue is scheduled; and ``wake(cluster, queue)``: a time after now at which it wants a pass although
    nothing ends or arrives (inf: none)."""

    name: str
    cmax: int

    def reset(self, cluster: Cluster) -> None: ...

    def place(self, cluster: Cluster, job: TraceJob, candidates: list[int]) -> list[tuple[int, Allocation]] | None: ...


@dataclass
class _Running:
    job: TraceJob
    ranks: list[int]
    est_end: float
    left: float = 1.0
    rate: float = 0.0
    t_upd: float = 0.0
    version: int = 0
    cols: dict = field(default_factory=dict)  # node -> its place there


@dataclass
class Cluster:
    """N simulated nodes of one node model; jobs run as one rank a node (the state the policies read)."""

    node: NodeSpec
    params: object  # env.sim.params.SimParams
    size: int
    cmax: int
    entries: dict  # program -> catalogue entry (its JobParams)
    solo: dict[str, float]  # program -> solo time on a whole node (s)
    now: float = 0.0
    waiting_nodes: int = 0  # what the other queued jobs that could start now ask for, in nodes (a policy reads it)
    sims: list[StreamNode] = field(default_factory=list)
    running: dict[str, _Running] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.sims = [StreamNode(self.node, self.params) for _ in range(self.size)]
        self.est_ends = np.zeros((self.size, self.cmax))  # estimated end of the job in each place of a node (0: free)
        self.held = np.zeros((self.size, self.cmax), dtype=np.int64)  # the CPUs it holds
        self.count = np.zeros(self.size, dtype=np.int64)  # ranks on each node
        self.idle_cpus = np.full(self.size, len(self.node.cpus), dtype=np.int64)
        self.sig: list[tuple] = [() for _ in range(self.size)]  # what each node runs (programs and allocations)
        self._slow: dict[tuple, float] = {}
        self._scale: dict[str, float] = {}  # program -> its time on one of Cmax slots over the whole node
        self.busy_s = 0.0
        self._busy_since: dict[int, float] = {}

    def free_nodes(self) -> list[int]:
        return np.flatnonzero((self.count < self.cmax) & (self.idle_cpus > 0)).tolist()

    def scale(self, program: str) -> float:
        """How much longer than on a whole node the program takes alone on one of Cmax equal slots (the node model):
        what a user asking for a slot's share of the node would request; 1 with Cmax 1."""
        if program not in self._scale:
            from env.planners.streams import slot_slowdown

            self._scale[program] = slot_slowdown(self.node, self.entries[program].params, self.cmax)
        return self._scale[program]

    def slowdown(self, program: str, alloc: Allocation) -> float:
        """The program alone on ``alloc`` against alone on the whole node (the node model): the estimate's scale."""
        key = (program, alloc.cpus, alloc.memory, tuple(sorted(alloc.l3.items())),
               tuple(sorted(alloc.mem_bw_percent.items())))
        if key not in self._slow:
            from env.sim.model import solve

            sim = self.sims[0]
            self._slow[key] = solve(sim.g, [sim.sim_job(self.entries[program].params, alloc)])[0] / self.solo[program]
        return self._slow[key]

    # ------------------------------------------------------------------ changes
    def start(self, job: TraceJob, placed: list[tuple[int, Allocation]]) -> None:
        nodes = [n for n, _ in placed]
        if len(set(nodes)) != job.nodes:
            raise ValueError(f"job {job.id} needs {job.nodes} distinct nodes, the policy gave {nodes}")
        factor = job.run_s / self.solo[job.program]
        est = self.now + job.est_s * max(self.slowdown(job.program, a) for _, a in placed)
        cols = {}
        for n, alloc in placed:
            sim = self.sims[n]
            if self.count[n] >= self.cmax:
                raise ValueError(f"node {n} already runs Cmax {self.cmax} jobs")
            sim.now = self.now
            sim.start(job.id, job.program, self.entries[job.program].params, alloc, factor=factor)
            c = cols[n] = int(np.flatnonzero(self.est_ends[n] == 0)[0])
            self.est_ends[n, c], self.held[n, c] = est, len(alloc.cpus)
            if self.count[n] == 0:
                self._busy_since[n] = self.now
            self.count[n] += 1
            self.idle_cpus[n] -= len(alloc.cpus)
            self._resig(n)
        self.running[job.id] = _Running(job, nodes, est, t_upd=self.now, cols=cols)

    def finish(self, jid: str) -> list[int]:
        r = self.running.pop(jid)
        for n in r.ranks:
            sim = self.sims[n]
            sim.now = self.now
            alloc = sim.running[jid].alloc
            sim.running[jid].left = 0.0
            if jid not in sim.advance(self.now):
                raise ValueError(f"job {jid} did not leave node {n}")
            self.est_ends[n, r.cols[n]], self.held[n, r.cols[n]] = 0.0, 0
            self.count[n] -= 1
            if self.count[n] == 0:
                self.busy_s += self.now - self._busy_since.pop(n)
            self.idle_cpus[n] += len(alloc.cpus)
            self._resig(n)
        return r.ranks

    def give_back(self, jid: str, alloc: Allocation) -> list[int]:
        """Job ``jid`` keeps only ``alloc``'s CPUs on each of its nodes from now on (its work left carried on; the
        policy names a subset of what it holds); its estimate stretches by the program's slowdown there. Its nodes,
        whose rates are to be refreshed now."""
        r = self.running[jid]
        old = self.sims[r.ranks[0]].running[jid].alloc
        for n in r.ranks:
            sim = self.sims[n]
            sim.now = self.now
            sim.give_back(jid, alloc)
            self.held[n, r.cols[n]] = len(alloc.cpus)
            self.idle_cpus[n] += len(old.cpus) - len(alloc.cpus)
            self._resig(n)
        stretch = self.slowdown(r.job.program, alloc) / self.slowdown(r.job.program, old)
        r.est_end = self.now + max(0.0, r.est_end - self.now) * stretch
        for n in r.ranks:
            self.est_ends[n, r.cols[n]] = r.est_end
        return list(r.ranks)

    def sync_left(self, n: int) -> None:
        """Node ``n``'s jobs carry their work left now (what a policy that plays the node forward reads)."""
        for jid, rr in self.sims[n].running.items():
            r = self.running[jid]
            rr.left = max(1e-6, r.left - r.rate * (self.now - r.t_upd))

    def _resig(self, n: int) -> None:
        self.sig[n] = tuple(sorted((r.name, r.alloc.cpus, r.alloc.memory, tuple(sorted(r.alloc.l3.items())),
                                    tuple(sorted(r.alloc.mem_bw_percent.items()))) for r in self.sims[n].running.values()))

    def refresh(self, nodes: set[int]) -> list[tuple[float, int, str]]:
        """New rates for every job on ``nodes`` (their contention changed): the (end, version, id) to schedule."""
        jobs = {jid for n in nodes for jid in self.sims[n].running}
        out = []
        for jid in jobs:
            r = self.running[jid]
            r.left = max(0.0, r.left - r.rate * (self.now - r.t_upd))
            r.t_upd = self.now
            r.rate = min(self.sims[n].rates()[jid] for n in r.ranks)
            r.version += 1
            out.append((self.now + r.left / r.rate, r.version, jid))
        return out

    # ------------------------------------------------------------------ EASY's reservation
    def room(self, jobs: np.ndarray, cpus: np.ndarray) -> np.ndarray:
        """Whether a node running ``jobs`` jobs on ``cpus`` CPUs has room for one more on a slot of N/Cmax CPUs."""
        n = len(self.node.cpus)
        return (jobs < self.cmax) & (cpus <= n - n // self.cmax)

    def reservation(self, k: int) -> tuple[float, int, np.ndarray, np.ndarray]:
        """For a head job of ``k`` nodes that does not start now: the shadow time (when the estimates give ``k`` nodes
        room for a rank), the extra nodes (with room then, beyond its k), and each node's jobs and CPUs still held at
        the shadow time. An overdue estimate counts as ending any moment."""
        taken = self.est_ends > 0
        ends = np.where(taken, np.maximum(self.est_ends, self.now), math.inf)
        order = np.argsort(ends, axis=1)
        ends = np.take_along_axis(ends, order, axis=1)
        cpus = np.take_along_axis(np.where(taken, self.held, 0), order, axis=1)
        jobs, total = taken.sum(axis=1), cpus.sum(axis=1)
        ready = np.full(self.size, math.inf)
        for j in range(self.cmax + 1):  # once the j earliest-ending jobs have ended
            t = np.full(self.size, self.now) if j == 0 else ends[:, j - 1]
            ok = self.room(jobs - j, total - cpus[:, :j].sum(axis=1)) & (j <= jobs) & np.isinf(ready)
            ready[ok] = t[ok]
        shadow = float(np.partition(ready, k - 1)[k - 1]) if k <= self.size else math.inf
        after = taken & (self.est_ends > shadow + _EPS)
        jobs_s, cpus_s = after.sum(axis=1), (self.held * after).sum(axis=1)
        return shadow, int(self.room(jobs_s, cpus_s).sum()) - k, jobs_s, cpus_s


def simulate(jobs: Sequence[TraceJob], policy: ClusterPolicy, node: NodeSpec, size: int, *,
             backfill_depth: int = BACKFILL_DEPTH) -> TraceRun:
    """The trace on ``size`` nodes of ``node``'s model, FCFS with EASY backfilling, ranks placed by ``policy``."""
    from env.sim.catalogue import catalogue
    from env.sim.world import world_for

    world, cat = world_for(node), catalogue(node)
    unknown = sorted({j.program for j in jobs} - set(cat))
    if unknown:
        raise InputError(f"{node.name} does not know {', '.join(unknown)}")
    too_big = [j.id for j in jobs if j.nodes > size]
    if too_big:
        raise InputError(f"job {too_big[0]} asks for more than the cluster's {size} nodes")
    cl = Cluster(node, world.params, size, policy.cmax, {n: world.entries[n] for n in cat},
                 {n: c.solo_s for n, c in cat.items()})
    policy.reset(cl)
    arrivals = sorted(jobs, key=lambda j: j.submit_s)
    queue: list[TraceJob] = []
    heap: list[tuple[float, int, str]] = []
    runs: dict[str, JobRun] = {}
    passes, decide_s, t_start, give_backs = 0, 0.0, time.process_time(), 0
    give, wake = getattr(policy, "give_back", None), getattr(policy, "wake", None)
    i = 0
    while i < len(arrivals) or queue or cl.running:
        while heap and (heap[0][2] not in cl.running or cl.running[heap[0][2]].version != heap[0][1]):
            heapq.heappop(heap)
        t_end = heap[0][0] if heap else math.inf
        t_arr = arrivals[i].submit_s if i < len(arrivals) else math.inf
        t = min(t_end, t_arr, wake(cl, queue) if wake is not None and queue else math.inf)
        if math.isinf(t):
            raise ValueError(f"policy {policy.name!r} left {len(queue)} jobs waiting with nothing running")
        cl.now = max(cl.now, t)
        dirty: set[int] = set()
        while heap and heap[0][0] <= cl.now + _EPS:
            _, ver, jid = heapq.heappop(heap)
            r = cl.running.get(jid)
            if r is None or r.version != ver:
                continue
            runs[jid].end_s = cl.now
            dirty.update(cl.finish(jid))
        while i < len(arrivals) and arrivals[i].submit_s <= cl.now:
            queue.append(arrivals[i])
            i += 1
        t0 = time.process_time()
        if give is not None and queue:
            for jid, alloc in give(cl, queue):
                dirty.update(cl.give_back(jid, alloc))
                give_backs += 1
        started = _schedule(cl, policy, queue, backfill_depth)
        decide_s += time.process_time() - t0
        passes += 1
        for j, placed in started:
            runs[j.id] = JobRun(j.id, j.program, j.nodes, j.submit_s, cl.now, math.nan, j.run_s, tuple(n for n, _ in placed))
            dirty.update(n for n, _ in placed)
        for item in cl.refresh(dirty):
            heapq.heappush(heap, item)
    return TraceRun(policy.name, size, [runs[j.id] for j in jobs], cl.busy_s, passes, decide_s,
                    time.process_time() - t_start, give_backs)


def _schedule(cl: Cluster, policy: ClusterPolicy, queue: list[TraceJob], depth: int) -> list:
    """One pass: FCFS from the head while jobs fit, then EASY backfilling behind the head's reservation."""
    started = []
    free = cl.free_nodes()
    fits = len(free)
    asked = sum(j.nodes for j in queue if j.nodes <= fits)  # what the jobs that could start now ask for
    while queue and queue[0].nodes <= len(free):
        cl.waiting_nodes = asked - queue[0].nodes
        placed = policy.place(cl, queue[0], free)
        if not placed:
            break
        job = queue.pop(0)
        asked -= job.nodes
        cl.start(job, placed)
        started.append((job, placed))
        free = cl.free_nodes()
    if len(queue) < 2 or not free:
        return started
    shadow, extra, jobs_s, cpus_s = cl.reservation(queue[0].nodes)
    slot = len(cl.node.cpus) // cl.cmax
    k = 1
    while k < len(queue) and k <= depth and free:
        job = queue[k]
        if job.nodes > len(free):
            k += 1
            continue
        ends_before = cl.now + job.est_s * cl.scale(job.program) <= shadow + _EPS
        cands = free
        if not ends_before and extra < job.nodes:  # nodes that keep room for the head at the shadow time
            keep = cl.room(jobs_s[free] + 1, cpus_s[free] + slot)
            cands = [n for n, ok in zip(free, keep) if ok]
            if len(cands) < job.nodes:
                k += 1
                continue
        cl.waiting_nodes = max(0, asked - job.nodes)
        placed = policy.place(cl, job, cands)
        if not placed:
            k += 1
            continue
        if not ends_before:
            ns = np.array([n for n, _ in placed])
            add = np.array([len(a.cpus) for _, a in placed])
            cost = int((cl.room(jobs_s[ns], cpus_s[ns]) & ~cl.room(jobs_s[ns] + 1, cpus_s[ns] + add)).sum())
            if cost > extra:
                k += 1
                continue
            extra -= cost
            jobs_s[ns] += 1
            cpus_s[ns] += add
        queue.pop(k)
        asked -= job.nodes if job.nodes <= fits else 0
        cl.start(job, placed)
        started.append((job, placed))
        free = cl.free_nodes()
    return started


__all__ = [
    "BACKFILL_DEPTH",
    "SLOWDOWN_FLOOR_S",
    "Cluster",
    "ClusterPolicy",
    "JobRun",
    "SwfJob",
    "Trace",
    "TraceJob",
    "TraceRun",
    "map_jobs",
    "read_swf",
    "simulate",
]
