"""The fitted parameters as one vector: which model field each entry is, in which transform, within which bounds.

General on purpose: the fit (``env.calibration.fit``) knows only a vector, bounds, a prior and, per
measurement, which entries it depends on. The per-job miss-ratio curve over L3 capacity (two working sets:
``ws_mb``, ``ws2_mb`` and the share ``ws2_share`` of the reuse traffic in the second) is three such fields; on
an RDT node the profiler's L3-way and MBA curves (``env.measure.interference``) are the runs that pin them down, elsewhere
the generator's pressure curve and the co-run probes do, more loosely.

Transforms: ``log`` fits log(v), ``log1p`` fits log(1 + v) (fields that may be 0), ``lin`` fits v,
``logc`` fits log(1 - v) (a fraction close to 1: the parallel fraction).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from env.sim.model import JobParams
from env.sim.params import SimParams


@dataclass(frozen=True)
class Field:
    name: str
    transform: str  # lin | log | log1p | logc
    lo: float  # bounds in the model's own units
    hi: float
    init: float  # a generic starting value (before the measurements say more)


#: Per job: every field of JobParams the contention model uses.
JOB_FIELDS: tuple[Field, ...] = (
    Field("work_s", "log", 0.05, 1e6, 500.0),
    Field("parallel", "logc", 0.0, 0.9999, 0.95),
    Field("comm", "lin", 0.0, 1.0, 0.05),
    Field("comm_gb", "log1p", 0.0, 2e4, 50.0),
    Field("irregular", "lin", 0.0, 1.0, 0.2),
    Field("init_serial", "lin", 0.0, 0.95, 0.05),
    Field("stream_gb", "log1p", 0.0, 1e6, 500.0),
    Field("reuse_gb", "log1p", 0.0, 1e6, 500.0),
    Field("ws_mb", "log", 0.1, 500.0, 4.0),
    Field("ws2_mb", "log", 0.1, 4000.0, 32.0),
    Field("ws2_share", "lin", 0.0, 1.0, 0.5),
    Field("bw_core", "log", 0.2, 100.0, 8.0),
)
#: Node-level fields fitted from co-runs and curves (the rest are read from the microbenchmarks).
NODE_FIELDS: tuple[Field, ...] = (
    Field("overlap", "lin", 0.0, 1.0, 0.5),
    Field("bubble_gbs_per_core", "log", 0.2, 100.0, 6.0),
)


def parallel_from_speedup(speedup: float, n_cpus: int) -> float:
    """Amdahl's parallel fraction of a program that runs ``speedup`` times faster on ``n_cpus`` than on one."""
    if n_cpus <= 1:
        return 0.5
    s = min(max(speedup, 1.0), float(n_cpus))
    return min(1.0, max(0.0, (1.0 - 1.0 / s) / (1.0 - 1.0 / n_cpus)))


#: A whole-node solo run that kept c CPUs busy (task-clock / wall time) ran at most c times faster than on one CPU;
#: the bound allows this factor over c for the counter's own noise.
BUSY_SLACK = 1.02


def busy_cpus(counters: Mapping[str, float | None] | None, wall_s: float) -> float | None:
    """The CPUs a run kept busy on average (perf's task-clock over its wall time); None when not counted."""
    clock = (counters or {}).get("task-clock")
    return clock / 1000.0 / wall_s if clock and wall_s > 0 else None


def max_speedup(counters: Mapping[str, float | None] | None, wall_s: float, n_cpus: int) -> float | None:
    """The most a program's whole-node solo run allows it to gain over one CPU (its busy CPUs, with
    ``BUSY_SLACK``); None when the run was not counted or the bound does not bind (it kept every CPU busy)."""
    busy = busy_cpus(counters, wall_s)
    if busy is None or n_cpus <= 1 or busy * BUSY_SLACK >= n_cpus:
        return None
    return max(busy, 1.0) * BUSY_SLACK


def to_x(f: Field, v: float) -> float:
    v = min(max(v, f.lo), f.hi)
    if f.transform == "log":
        return math.log(v)
    if f.transform == "log1p":
        return math.log1p(v)
    if f.transform == "logc":
        return math.log(max(1.0 - v, 1e-4))
    return v


def from_x(f: Field, x: float) -> float:
    if f.transform == "log":
        return math.exp(x)
    if f.transform == "log1p":
        return math.expm1(x)
    if f.transform == "logc":
        return 1.0 - math.exp(x)
    return x


def x_bounds(f: Field) -> tuple[float, float]:
    a, b = to_x(f, f.lo), to_x(f, f.hi)
    return (min(a, b), max(a, b))


class Space:
    """Entries 0..len(NODE_FIELDS)-1 are the node's; then ``len(JOB_FIELDS)`` entries per job, in ``jobs`` order."""

    def __init__(self, jobs: Sequence[str]) -> None:
        self.jobs = list(jobs)
        self.n_node = len(NODE_FIELDS)
        self.index = {j: self.n_node + k * len(JOB_FIELDS) for k, j in enumerate(self.jobs)}
        self.size = self.n_node + len(JOB_FIELDS) * len(self.jobs)
        fields = list(NODE_FIELDS) + [f for _ in self.jobs for f in JOB_FIELDS]
        self.fields = fields
        bounds = [x_bounds(f) for f in fields]
        self.lo = np.array([b[0] for b in bounds])
        self.hi = np.array([b[1] for b in bounds])

    def bound_by_busy_cpus(self, profiles: Mapping[str, object], n_cpus: int) -> dict[str, float]:
        """Bound each profiled job's parallel fraction by what its whole-node solo run's busy CPUs allow
        (``max_speedup``): a single-threaded program whose one-core run was a little slower (noise on that core)
        is not fitted a gain from more CPUs. ``profiles``: name -> InterferenceProfile. Returns the bounds set."""
        k = next(i for i, f in enumerate(JOB_FIELDS) if f.name == "parallel")
        out = {}
        for job, prof in profiles.items():
            cap = max_speedup(getattr(prof, "counters", None), getattr(prof, "solo_s", 0.0), n_cpus)
            if job in self.index and cap is not None:
                p_max = parallel_from_speedup(cap, n_cpus)
                i = self.index[job] + k
                self.lo[i] = max(self.lo[i], math.log(1.0 - p_max))  # logc: x = log(1 - parallel)
                out[job] = p_max
        return out

    def job_slice(self, job: str) -> slice:
        i = self.index[job]
        return slice(i, i + len(JOB_FIELDS))

    def encode(self, sp: SimParams, jobs: Mapping[str, JobParams]) -> np.ndarray:
        x = np.empty(self.size)
        for k, f in enumerate(NODE_FIELDS):
            x[k] = to_x(f, getattr(sp, f.name))
        for j in self.jobs:
            i = self.index[j]
            for k, f in enumerate(JOB_FIELDS):
                x[i + k] = to_x(f, getattr(jobs[j], f.name))
        return np.clip(x, self.lo, self.hi)

    def initial(self) -> np.ndarray:
        x = np.empty(self.size)
        for k, f in enumerate(self.fields):
            x[k] = to_x(f, f.init)
        return x

    def node_params(self, x: np.ndarray, base: SimParams) -> SimParams:
        return dataclasses.replace(base, **{f.name: from_x(f, float(x[k])) for k, f in enumerate(NODE_FIELDS)})

    def job_params(self, x: np.ndarray, job: str, name: str | None = None) -> JobParams:
        i = self.index[job]
        vals = {f.name: from_x(f, float(x[i + k])) for k, f in enumerate(JOB_FIELDS)}
        return JobParams(name=name or job, **vals)
