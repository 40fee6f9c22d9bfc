"""A group of ``env.measure.probing.Placement``s on the contention model: the built-in programs as model jobs.

Used by both sides of the twin test with different parameters: the simulated node's measuring backend
(``env.sim.measuring``, the hidden true parameters) and the calibrator's predictions (the fitted ones).

The built-in programs in the model:

* ``BUBBLE`` at level L: a streaming loop, no cache reuse, ``L x bubble_gbs_per_core`` GB/s per core demanded,
  and so much work that it outlasts every foreground program (its time is ``None``); its cache pressure grows
  with L like its traffic.
* ``PROBE``: an ordinary model job (``World.probe`` / a node model's ``probe``; ``DEFAULT_PROBE`` otherwise).
* ``STREAM``: pure streaming with unbounded per-core pull, so it reads the memory domain's (and, remote, the
  link's) bandwidth: metric GB/s = its traffic / its time.
* ``LATENCY``: a dependent-load chain of ``LATENCY_LOADS`` loads, ``latency_ns`` each (x ``remote_latency_ratio``
  remote); it does not contend (one thread, one load in flight) and is read alone.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from env.errors import InputError
from env.node.spec import NodeSpec
from env.measure.probing import BUBBLE, BUILTINS, LATENCY, PROBE, STREAM, Placement
from env.sim.model import Geometry, JobParams, SimJob, run_group, solve
from env.sim.params import SimParams

DEFAULT_PROBE = JobParams("cosched:probe", work_s=40.0, parallel=0.95, comm=0.0, comm_gb=0.0, irregular=0.3,
                          init_serial=0.0, stream_gb=60.0, reuse_gb=150.0, ws_mb=2.0, ws2_mb=8.0,
                          ws2_share=0.5, bw_core=8.0)
BUBBLE_WORK_S = 1e7
STREAM_GB = 200.0
LATENCY_LOADS = 1e8


def bubble_params(level: float, sp: SimParams) -> JobParams:
    return JobParams(BUBBLE, work_s=BUBBLE_WORK_S, parallel=1.0, comm=0.0, comm_gb=0.0, irregular=0.0,
                     init_serial=0.0, stream_gb=level * sp.bubble_gbs_per_core * BUBBLE_WORK_S, reuse_gb=0.0,
                     ws_mb=1.0, ws2_mb=1.0, ws2_share=0.0, bw_core=1e3)


STREAM_PARAMS = JobParams(STREAM, work_s=1e-3, parallel=1.0, comm=0.0, comm_gb=0.0, irregular=0.0, init_serial=0.0,
                          stream_gb=STREAM_GB, reuse_gb=0.0, ws_mb=1.0, ws2_mb=1.0, ws2_share=0.0,
                          bw_core=1e3)


def check_group(node: NodeSpec, known: Sequence[str], group: Sequence[Placement]) -> None:
    """A group a node could run: known programs, existing and disjoint CPUs, options the node has."""
    if not group:
        raise InputError("a measurement needs at least one placement")
    online = set(node.cpus)
    used: set[int] = set()
    numa_ids = {d.id for d in node.numa}
    for p in group:
        if p.job not in BUILTINS and p.job not in known:
            raise InputError(f"unknown job {p.job!r} on {node.name}: its jobs are {', '.join(known)}")
        if not p.cpus or not set(p.cpus) <= online:
            raise InputError(f"{p.job}: CPUs {sorted(set(p.cpus) - online) or '(none)'} are not on {node.name}")
        if used & set(p.cpus):
            raise InputError(f"{p.job}: CPUs {sorted(used & set(p.cpus))} are given to two programs of one measurement")
        used |= set(p.cpus)
        if p.memory == "bind" and p.memory_domain not in numa_ids:
            raise InputError(f"{p.job}: memory bind needs a memory_domain of {sorted(numa_ids)}, not {p.memory_domain}")
        if p.job == BUBBLE and (p.level is None or not 0.0 <= p.level <= 1.0):
            raise InputError(f"the pressure generator needs a level in [0, 1], not {p.level}")
        if p.l3_ways is not None and (node.cat is None or not node.capabilities.l3_cat.available):
            raise InputError(f"{p.job}: {node.name} has no L3 CAT, so no l3_ways")
        if p.mba_percent is not None and (node.mba is None or not node.capabilities.mba.available):
            raise InputError(f"{p.job}: {node.name} has no MBA, so no mba_percent")
    if all(p.job == BUBBLE for p in group):
        raise InputError("the pressure generator runs next to a program, not alone")


class GroupModel:
    """Times of placement groups under one set of parameters (node-level and per job)."""

    def __init__(self, node: NodeSpec, sp: SimParams, jobs: Mapping[str, JobParams], probe: JobParams = DEFAULT_PROBE,
                 memo: dict | None = None, geometry: Geometry | None = None) -> None:
        self.node = node
        self.sp = sp
        # its own Geometry, not the id-keyed cache: a fit makes a new SimParams per evaluation, and a reused id
        # must not bring back another evaluation's geometry. ``geometry``: the caller's, made for this node and ``sp``
        self.g: Geometry = geometry if geometry is not None else Geometry(node, sp)
        self.jobs = jobs
        self.probe = probe
        # solves of co-running sets keyed by their placements and parameters (and each placed job's SimJob), shared by
        # the models of one node and SimParams that differ only in some jobs' parameters (a fit trying values of one
        # program's): a set without that program is solved once, not once per value (``timeline_times``)
        self.memo = memo

    def _params(self, p: Placement) -> JobParams:
        if p.job == BUBBLE:
            return bubble_params(p.level or 0.0, self.sp)
        if p.job == PROBE:
            return self.probe
        if p.job == STREAM:
            return STREAM_PARAMS
        return self.jobs[p.job]

    def sim_jobs(self, group: Sequence[Placement]) -> list[SimJob | None]:
        g = self.g
        cursor = [0] * g.n_l3  # next free way per L3 for jobs with their own partition
        out: list[SimJob | None] = []
        for p in group:
            if p.job == LATENCY:
                out.append(None)
                continue
            memory = "first-touch"
            if p.memory == "interleave":
                memory = "interleave"
            elif p.memory == "bind" and p.memory_domain is not None:
                memory = f"bind:{g.numa_index[p.memory_domain]}"
            masks = None
            if p.l3_ways is not None:
                masks = {}
                for li in sorted({g.cpu_l3[c] for c in p.cpus}):
                    bits = g.bits[li]
                    if cursor[li] + p.l3_ways > len(bits):
                        raise InputError(f"{p.job}: {p.l3_ways} ways do not fit in L3 {g.l3_ids[li]} "
                                         f"({len(bits) - cursor[li]} of {len(bits)} left)")
                    masks[li] = sum(1 << b for b in bits[cursor[li]:cursor[li] + p.l3_ways])
                    cursor[li] += p.l3_ways
            mba = None
            if p.mba_percent is not None:
                mba = {g.cpu_numa[c]: p.mba_percent for c in p.cpus}
            params = self._params(p)
            key = None if self.memo is None else (
                "job", params, p.cpus, memory, None if masks is None else tuple(sorted(masks.items())), p.mba_percent)
            job = None if key is None else self.memo.get(key)
            if job is None:  # what the job's placement fixes, the same in every set it runs in
                job = SimJob(g, params, list(p.cpus), memory, masks, mba)
                if key is not None:
                    self.memo[key] = job
            out.append(job)
        return out

    def times_as_run(self, group: Sequence[Placement], start_s: Sequence[float] | None,
                     measured: Sequence[float | None]) -> list[float | None]:
        """Each placement's time as a measured run had it: started together (``start_s`` None: ``times``), or a
        continuous run's jobs, each between the others' measured starts and ends (``timeline_times``)."""
        if start_s is None:
            return self.times(group)[0]
        return list(timeline_times(self, group, start_s, [t or 0.0 for t in measured]))

    def times(self, group: Sequence[Placement], factors: Sequence[float] | None = None) -> tuple[list[float | None], list[float | None]]:
        """(time per placement, metric per placement): None for the generator's time and non-benchmarks' metric."""
        sims = self.sim_jobs(group)
        idx = [k for k, s in enumerate(sims) if s is not None]
        ends = run_group(self.g, [sims[k] for k in idx], [factors[k] for k in idx] if factors is not None else None) if idx else []
        times: list[float | None] = [None] * len(group)
        metric: list[float | None] = [None] * len(group)
        for k, t in zip(idx, ends):
            p = group[k]
            if p.job != BUBBLE:
                times[k] = t
            if p.job == STREAM:
                metric[k] = STREAM_GB / t
        for k, p in enumerate(group):
            if p.job == LATENCY:
                remote = p.memory == "bind" and p.memory_domain is not None and any(
                    self.node.numa_of(c) != p.memory_domain for c in p.cpus)
                ns = self.sp.latency_ns * (self.sp.remote_latency_ratio if remote else 1.0)
                f = factors[k] if factors is not None else 1.0
                metric[k] = ns * f
                times[k] = LATENCY_LOADS * ns * f * 1e-9
        return times, metric


def _solved(g: Geometry, sims: Sequence[SimJob | None]) -> list[float | None]:
    """Each job's whole-run time in the set ``sims`` (None where the placement is not a job)."""
    idx = [q for q, sj in enumerate(sims) if sj is not None]
    out: list[float | None] = [None] * len(sims)
    for q, t in zip(idx, solve(g, [sims[q] for q in idx])):
        out[q] = t
    return out


def timeline_times(gm: "GroupModel", group: Sequence[Placement], starts: Sequence[float],
                   measured: Sequence[float], which: Sequence[int] | None = None,
                   sets: list[set[int]] | None = None) -> list[float | None]:
    """Each job's predicted time in a continuous run whose jobs started at ``starts`` (seconds) and took ``measured``:
    a job progresses at the rate the model gives the set of jobs running beside it, which changes at the measured
    starts and ends of the others (their real times, not predictions, so that one job's error does not move another's
    prediction). Past its own measured end a job keeps its partners of then, less the jobs that started afterwards on
    its CPUs (they took them because it had ended). All started together, the measured ends stand in where the
    group run (``GroupModel.times``) uses predicted ones: the same where the prediction is right.

    ``which``: the jobs to predict (default all; the others' entries None). ``sets``: where given, gets for each job
    predicted the jobs whose rates its prediction used (every job of every set it ran beside), so that a fit can tell
    which predictions a job's parameters cannot move."""
    n = len(group)
    ends = [s + m for s, m in zip(starts, measured)]
    events = sorted(set(starts) | set(ends))
    cpus = [set(p.cpus) for p in group]
    solved: dict[tuple[int, ...], dict[int, float]] = {}
    eps = 1e-9

    def time_of(k: int, members: tuple[int, ...]) -> float:
        got = solved.get(members)
        if got is None:  # one solve a set of co-runners, shared by every job of the set (ways given in order)
            placed = [group[i] for i in members]
            key = None if gm.memo is None else tuple((p, gm._params(p)) for p in placed)
            rates = None if key is None else gm.memo.get(key)
            if rates is None:
                sims = gm.sim_jobs(placed)
                rates = tuple(None if sj is None else t for sj, t in zip(sims, _solved(gm.g, sims)))
                if key is not None:
                    gm.memo[key] = rates
            got = solved[members] = {i: t for i, t in zip(members, rates) if t is not None}
        return got[k]

    out: list[float | None] = [None] * n
    for k in range(n) if which is None else which:
        t, left = starts[k], 1.0
        used: set[int] = set()
        while True:
            past = t >= ends[k] - eps
            members = tuple(i for i in range(n) if i == k or (
                starts[i] <= t + eps and ends[i] > t + eps
                and not (past and starts[i] >= ends[k] - eps and cpus[i] & cpus[k])))
            used.update(members)
            whole = time_of(k, members)
            nxt = next((e for e in events if e > t + eps), math.inf)
            if t + left * whole <= nxt:
                out[k] = t + left * whole - starts[k]
                if sets is not None:
                    sets.append(used)
                break
            left -= (nxt - t) / whole
            t = nxt
    return out
