"""The real node's node model as planning uses it: the calibrated model (``cosched calibrate``) with every program
profiled since, learned from its production runs (no dedicated profiling runs).

A program the calibrated model does not know enters the model from its first production run (``cosched run``
runs a job without a profile alone on the whole node under perf and stores that run as its profile):

* its character beyond size, parallelism and memory intensity (working sets, access pattern, per-core bandwidth,
  communication) is that of the calibrated program nearest to what its solo run counted, where the node counts
  hardware events (IPC, cache and TLB misses per instruction: ``Learner.template_for``); else the median program's;
* its solo time is that run's; its scale factor the one-core run's when one was measured (``cosched profile``),
  else estimated from the run itself: the CPUs it kept busy (perf's task-clock / wall time) is its speed-up on the
  whole node, so its Amdahl parallel fraction follows (``parallel_from_speedup``);
* its interference sensitivity (its memory traffic per compute-second, ``intensity``) cannot be read from a solo run
  on a node without hardware counters: it starts high, at the geometric mean of the node's median and its most
  memory-bound calibrated program's (cautious: the planner pairs it as a heavy program, so with partners the model
  predicts little disturbed by one, or alone; not the worst case, which would keep two new programs apart for
  ever and so never learn them); each production run of it alone (a plan that found no partner for it) moves that
  prior toward the median program's, reached after ``KNOWN_AFTER`` such runs: a program kept alone teaches the model
  nothing, so it is paired after a few (``Learner.cautious``);
* every later co-run of it (the calibration data ``cosched run`` keeps, source ``run``: a groups run's groups, and
  a continuous run's sets of jobs that overlapped in time, each job predicted between the others' measured starts
  and ends; ``coruns_in`` counts them) refits that intensity (a
  one-dimensional least-squares fit of the log times of every program of those co-runs); until ``KNOWN_AFTER``
  co-runs the planner uses the fit's value or the pessimistic one's geometric mean with it, whichever is higher;
* after ``SHAPE_AFTER`` co-runs, its shape is fitted to them too: its parallel fraction (the solo run's estimate,
  an upper bound, or a share of it) and then its character (the calibrated program's, the guess above or another,
  that with the intensity fitted to it predicts those co-runs best);
* its uncertainty is shown (``LearnedJob``; ``cosched jobs`` lists it): co-runs so far, the median error of the
  model on them, and whether it is known well yet.

Everything here is keyed by what it reads (the model file, the profile store, the calibration store), so a new run
or a new profile is taken into account on the next plan, and nothing is recomputed otherwise.
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from env.calibration.space import busy_cpus, max_speedup, parallel_from_speedup
from env.calibration.learned_store import learned_cache_path, learned_key, read_learned, write_learned
from env.calibration.store import CalibrationStore, default_calibration_path, model_path
from env.measure.probing import Placement
from env.node.spec import NodeSpec
from env.sim.model import JobParams
from env.sim.nodemodel import ModelJob, NodeModel, checked
from profiler.interference import RunRecord
from profiler.models import Profile

if TYPE_CHECKING:
    from env.sim.probes import GroupModel

#: A fit's answer: (intensity, median abs error % of the program's own times, loss, median log error of its own times).
Fit = tuple[float, float, float, float]

#: Co-runs of a program after which its estimate is taken as it is (before: the cautious value).
KNOWN_AFTER = 3
#: Co-runs of a program after which its shape is fitted to them as well: its parallel fraction (``PARALLEL_FACTORS``
#: of the solo run's estimate) and its character (working sets, access pattern, per-core bandwidth: the calibrated
#: program's that predicts them best, else the guess from its solo run, ``Learner.template_for``). Chosen on the
#: simulated twin test (seeds 0-5, bench/twin_production.py; docs/real-node.md).
SHAPE_AFTER = 5
#: The parallel fractions a fit tries, as factors of the solo run's estimate: the CPUs a run keeps busy bound its
#: speed-up from above (a thread that spins or waits busily counts), so co-runs may only lower it.
PARALLEL_FACTORS = (0.99, 0.97, 0.94, 0.9, 0.8, 0.6, 0.3)
#: A program's solo time is its first run's, unless, once its shape is fitted (``SHAPE_AFTER`` co-runs), the model
#: still mispredicts its own co-run times by more than this fraction in the median, all one way: one run alone is one
#: sample of a shared node's speed, its co-runs are many. Then its solo time moves by the median error (within
#: ``SOLO_RANGE`` of the first run's) and its intensity is fitted again, kept only where the co-runs' fit is better.
SOLO_BIAS = 0.10
SOLO_RANGE = (0.5, 2.0)
#: The intensities (GB per compute-second) a fit tries, as factors of the calibrated programs' range.
GRID = 28
#: What a solo run counted that picks the calibrated program whose character a new one takes (hardware counters:
#: nodes without them keep the median program).
NEAR_FEATURES = ("ipc", "log10_llc_miss_pki", "log10_l1d_miss_pki", "log10_branch_miss_pki", "log10_dtlb_miss_pki")


@dataclass(frozen=True)
class LearnedJob:
    """What the node model knows of a program it learned from production runs."""

    name: str
    solo_s: float
    scale_factor: float
    scale_source: str  # "measured" (a one-core run) or "estimated" (from the CPUs its solo run kept busy)
    intensity: float  # the memory traffic per compute-second the model uses for it (GB/s of one core's work)
    fitted_intensity: float | None  # the co-runs' fit (None before any co-run)
    coruns: int
    error_pct: float | None  # the model's median abs error on its co-runs' times (None before any)
    alone: int = 0  # production runs of it alone since its first (in the calibration data)
    like: str | None = None  # the calibrated program whose character it takes, once its co-runs chose it
    first_run_s: float | None = None  # its first run's time, where its co-runs moved its solo time (``SOLO_BIAS``)

    @property
    def known(self) -> bool:
        return self.coruns >= KNOWN_AFTER

    def describe(self) -> str:
        if not self.coruns:
            state = "no co-run yet: paired as a heavy memory user until it has some" + (
                f", less so after {self.alone} run{'s' if self.alone != 1 else ''} alone" if self.alone else "")
        else:
            state = (f"{self.coruns} co-run{'s' if self.coruns != 1 else ''}, the model's median error on them "
                     f"{self.error_pct:.1f} %" + ("" if self.known else f"; paired cautiously until {KNOWN_AFTER}")
                     + (f"; its character {self.like}'s, which fits them best" if self.like else "")
                     + (f"; its solo time {self.solo_s:.3g} s from them, its first run took {self.first_run_s:.3g} s"
                        if self.first_run_s is not None else ""))
        return f"learned from production runs (scale factor {self.scale_source}); {state}"


def speedup_of(profile: Profile, n_cpus: int) -> tuple[float, str]:
    """The program's speed-up on the whole node and where it came from: the one-core run's scale factor, else the
    CPUs its solo run kept busy (task-clock / wall time), else 1 (nothing says it runs in parallel)."""
    if profile.scale_factor is not None and profile.scale_factor > 0:
        cap = max_speedup(profile.counters, profile.duration_s, n_cpus)  # no more than its busy CPUs allow
        return (profile.scale_factor if cap is None else min(profile.scale_factor, cap)), "measured"
    busy = busy_cpus(profile.counters, profile.duration_s)
    if busy is not None:
        return min(max(busy, 1.0), float(n_cpus)), "estimated"
    return 1.0, "estimated"


def _intensity(p: JobParams) -> float:
    return p.stream_gb / p.work_s


class Learner:
    """Programs of ``model``'s node learned from their solo run and co-runs (see the module docstring)."""

    def __init__(self, model: NodeModel) -> None:
        from env.sim.probes import GroupModel

        self.model = model
        self.GroupModel = GroupModel
        own = [j.params for j in model.jobs]
        self.template = sorted(own, key=_intensity)[len(own) // 2]  # the median program's other character
        ks = sorted(_intensity(p) for p in own)
        # the cautious prior: between the node's median program and its most memory-bound one (the geometric mean),
        # so a new program is paired as a heavy one, yet two new ones may still be paired and so learned from
        self.k_high = math.sqrt(max(ks[len(ks) // 2], 1e-9) * max(ks[-1], 1e-9))
        self.k_median = max(ks[len(ks) // 2], 1e-9)
        positive = [k for k in ks if k > 0] or [self.k_high or 1.0]
        lo, hi = min(positive) / 10.0, max(positive) * 3.0
        self.grid = [0.0] + [lo * (hi / lo) ** (i / (GRID - 2)) for i in range(GRID - 1)]
        self.whole = tuple(model.node.cpus)
        self._params: dict[tuple, JobParams] = {}
        self.memo: dict = {}  # the co-running sets' solves of the program being fitted (``GroupModel.memo``)
        self.fixed: dict[int, dict[int, float | None]] = {}  # its records' predictions it cannot move (``_timeline``)

    def cautious(self, alone: int) -> float:
        """The intensity a program without enough co-runs is paired with: the heavy prior, moving to the node's
        median program's (geometrically) over ``KNOWN_AFTER`` runs of it alone; a plan that keeps a program alone
        teaches the model nothing of its sensitivity, so it is paired after a few."""
        w = min(1.0, alone / KNOWN_AFTER)
        return self.k_high ** (1.0 - w) * self.k_median ** w

    def template_for(self, profile: Profile) -> JobParams:
        """The calibrated program whose character (all but its size, parallelism and memory intensity) a new program
        takes: where the node counts hardware events, the nearest in what its solo run counted (``NEAR_FEATURES``,
        standardized over the calibrated programs); else the median program."""
        import numpy as np

        from profiler.features import VALUE_FEATURES, raw_features

        own = [(j.params, j.profile) for j in self.model.jobs if j.profile is not None]
        cols = [VALUE_FEATURES.index(f) for f in NEAR_FEATURES]
        x = raw_features(profile)[cols]
        if len(own) < 2 or np.isnan(x).all():
            return self.template
        m = np.vstack([raw_features(p)[cols] for _, p in own])
        use = ~np.isnan(x) & ~np.isnan(m).any(axis=0)
        if not use.any():
            return self.template
        sd = m[:, use].std(axis=0)
        sd[sd == 0] = 1.0
        d = (((m[:, use] - x[use]) / sd) ** 2).sum(axis=1)
        return own[int(np.argmin(d))][0]

    def params(self, name: str, solo_s: float, parallel: float, k: float, template: JobParams | None = None) -> JobParams:
        """The program's parameters with intensity ``k``, its compute scaled so that the model's solo time on the
        whole node is its measured one; its other character ``template``'s (default: the median program's)."""
        key = (name, solo_s, parallel, k, template)
        got = self._params.get(key)
        if got is None:  # a fit asks for the same values under every shape it tries
            got = self._params[key] = self._scaled(name, solo_s, parallel, k, template)
        return got

    def _scaled(self, name: str, solo_s: float, parallel: float, k: float, template: JobParams | None) -> JobParams:
        t = template or self.template
        base = dataclasses.asdict(t)
        ratio_reuse = t.reuse_gb / t.stream_gb if t.stream_gb > 0 else 0.0
        ratio_comm = t.comm_gb / t.work_s
        work = solo_s
        p = t
        for _ in range(4):  # the solo time is nearly proportional to the work: a few steps converge
            base.update(name=name, work_s=work, parallel=parallel, stream_gb=k * work, reuse_gb=ratio_reuse * k * work,
                        comm_gb=ratio_comm * work)
            p = checked(JobParams(**base))
            got = self.GroupModel(self.model.node, self.model.params, {name: p}, self.model.probe).times(
                [Placement(name, self.whole)])[0][0]
            if not got or abs(got / solo_s - 1.0) < 1e-3:
                break
            work *= solo_s / got
        return p

    def learn(self, profiles: Sequence[Profile], runs: Sequence[RunRecord]) -> tuple[NodeModel, list[LearnedJob]]:
        """``model`` with every program of ``profiles`` it lacks, learned from ``runs`` (records of co-runs)."""
        known = {j.name for j in self.model.jobs}
        new = [p for p in profiles if p.name not in known and p.duration_s > 0]
        if not new:
            return self.model, []
        n = len(self.model.node.cpus)
        jobs = dict(self.model.job_params())
        shapes = {}
        alone = {p.name: sum(1 for r in runs if r.kind == "corun" and len(r.group) == 1 and r.group[0].job == p.name)
                 for p in new}
        prior = {name: self.cautious(a) for name, a in alone.items()}
        for prof in new:
            s, src = speedup_of(prof, n)
            shapes[prof.name] = (prof.duration_s, parallel_from_speedup(s, n), s, src, self.template_for(prof))
            jobs[prof.name] = self.params(prof.name, prof.duration_s, shapes[prof.name][1], prior[prof.name],
                                          shapes[prof.name][4])
        learned = []
        for prof in new:  # one after another, each with the others at their estimate so far
            self.memo, self.fixed = {}, {}  # the others' parameters change between programs: only this one's fit shares
            solo, par, s, src, tpl = shapes[prof.name]
            mine = [r for r in runs if r.kind == "corun" and len(r.group) > 1 and any(p.job == prof.name for p in r.group)
                    and all(p.job in jobs for p in r.group) and all(t is not None for t in r.times_s)]
            n_co = sum(coruns_in(r, prof.name) for r in mine)
            fit = self._fit(prof.name, solo, par, mine, jobs, tpl) if mine else None
            first = None
            if fit is not None and n_co >= SHAPE_AFTER:  # enough co-runs to tell shapes apart
                par, tpl, fit = self._fit_shape(prof.name, solo, par, tpl, mine, jobs, fit)
                moved, fit = self._fit_solo(prof.name, solo, par, tpl, mine, jobs, fit)
                solo, first = moved, (None if moved == solo else solo)
            fitted, err = (None, None) if fit is None else fit[:2]
            high = prior[prof.name]
            k = high if fitted is None else (
                fitted if n_co >= KNOWN_AFTER else max(fitted, math.sqrt(max(fitted, 1e-12) * high)))
            jobs[prof.name] = self.params(prof.name, solo, par, k, tpl)
            learned.append(LearnedJob(prof.name, solo, s, src, k, fitted, n_co, err, alone[prof.name],
                                      tpl.name if n_co >= SHAPE_AFTER else None, first))
        extra = [ModelJob(params=jobs[lj.name], role="other", suite="learned", character=lj.describe(),
                          profile=next(p for p in new if p.name == lj.name)) for lj in learned]
        return self.model.model_copy(update={"jobs": [*self.model.jobs, *extra]}), learned

    def _fit_shape(self, name: str, solo: float, par: float, template: JobParams, records: Sequence[RunRecord],
                   jobs: dict[str, JobParams], fit: Fit) -> tuple[float, JobParams, Fit]:
        """The shape that with the intensity fitted to it predicts ``records`` best, ties keeping the guess: first the
        parallel fraction (the estimate or a share of it, ``PARALLEL_FACTORS``), then the character (the calibrated
        program's). ``fit``: ``_fit``'s answer for the guess. Returns (parallel fraction, character, its ``_fit``)."""
        best = (par, template, fit)
        for f in PARALLEL_FACTORS:
            got = self._fit(name, solo, par * f, records, jobs, template)
            if got[2] < best[2][2] - 1e-12:
                best = (par * f, template, got)
        par, seen = best[0], {template.name}
        for j in self.model.jobs:
            if j.params.name in seen or j.suite == "learned":
                continue
            seen.add(j.params.name)
            got = self._fit(name, solo, par, records, jobs, j.params)
            if got[2] < best[2][2] - 1e-12:
                best = (par, j.params, got)
        return best

    def _fit_solo(self, name: str, solo: float, par: float, template: JobParams, records: Sequence[RunRecord],
                  jobs: dict[str, JobParams], fit: Fit) -> tuple[float, Fit]:
        """The solo time that with the intensity fitted to it predicts ``records`` best: the first run's, unless the
        program's own times are mispredicted by more than ``SOLO_BIAS`` in the median (``fit``'s bias), all one way;
        then moved by that median (within ``SOLO_RANGE``), twice at most, each step kept only if the fit's loss
        falls. Returns (solo time, its ``_fit``)."""
        best = (solo, fit)
        for _ in range(2):
            bias = best[1][3]
            if not abs(bias) > math.log1p(SOLO_BIAS):
                break
            moved = min(max(best[0] * math.exp(-bias), solo * SOLO_RANGE[0]), solo * SOLO_RANGE[1])
            got = self._fit(name, moved, par, records, jobs, template)
            if not got[2] < best[1][2] - 1e-12:
                break
            best = (moved, got)
        return best

    def _fit(self, name: str, solo: float, par: float, records: Sequence[RunRecord],
             jobs: dict[str, JobParams], template: JobParams | None = None) -> Fit:
        """The intensity that best predicts ``records`` (least squares of log times), the median abs error (%)
        of the program's own times under it, that least squares' loss, and the median of the program's own log
        errors (log predicted / measured: above 0 where the model predicts it longer than it ran)."""
        from env.calibration.calibrate import to_placement

        groups = [[to_placement(p) for p in r.group] for r in records]  # their cores, memory, L3 ways and MBA caps
        best: tuple[float, float, float] | None = None
        for k in self.grid:
            trial = {**jobs, name: self.params(name, solo, par, k, template)}
            gm = self.GroupModel(self.model.node, self.model.params, trial, self.model.probe, memo=self.memo)
            loss, own, logs = 0.0, [], []
            for r, group in zip(records, groups):
                pred = gm.times(group)[0] if r.start_s is None else self._timeline(gm, name, r, group)
                for p, t, m in zip(r.group, pred, r.times_s):
                    if t and m:
                        e = math.log(t / m)
                        loss += e * e
                        if p.job == name:
                            own.append(abs(t / m - 1.0) * 100.0)
                            logs.append(e)
            if best is None or loss < best[0] - 1e-12:
                best = (loss, k, statistics.median(own) if own else float("nan"),
                        statistics.median(logs) if logs else 0.0)
        assert best is not None
        return best[1], best[2], best[0], best[3]

    def _timeline(self, gm: GroupModel, name: str, r: RunRecord, group: list[Placement]) -> list[float | None]:
        """``GroupModel.times_as_run`` for a continuous run's record while program ``name`` is fitted: a job that ran
        beside no job of ``name`` (nor beside one that did, and so on) has the same prediction for every value the
        fit tries, so it is predicted once per program (``self.fixed``)."""
        from env.sim.probes import timeline_times

        measured = [t or 0.0 for t in r.times_s]
        fixed = self.fixed.get(id(r))
        if fixed is None:
            sets: list[set[int]] = []
            pred = timeline_times(gm, group, r.start_s, measured, sets=sets)
            self.fixed[id(r)] = {k: pred[k] for k, used in enumerate(sets)
                                 if not any(group[i].job == name for i in used)}
            return pred
        pred = timeline_times(gm, group, r.start_s, measured, which=[k for k in range(len(group)) if k not in fixed])
        for k, t in fixed.items():
            pred[k] = t
        return pred


def coruns_in(record: RunRecord, name: str) -> int:
    """The co-runs of program ``name`` that ``record`` holds: 1 for a group with it and a partner; for a continuous
    run's record (``start_s``), each of its jobs that overlapped another in time (one such run teaches as much of
    each of them as a group does)."""
    if len(record.group) < 2:
        return 0
    if record.start_s is None:
        return int(any(p.job == name for p in record.group))
    spans = [(s, s + (t or 0.0)) for s, t in zip(record.start_s, record.times_s)]
    return sum(1 for k, p in enumerate(record.group) if p.job == name and any(
        i != k and spans[i][0] < spans[k][1] and spans[k][0] < spans[i][1] for i in range(len(spans))))


# -- the node's planning model, cached by what it reads -------------------------------------------------------


def _stamp(path: Path) -> tuple[int, ...]:
    out: list[int] = []
    for suffix in ("", "-wal"):
        try:
            st = os.stat(f"{path}{suffix}")
            out += [st.st_mtime_ns, st.st_size]
        except OSError:
            out += [0, 0]
    return tuple(out)


def planning_model(node_key: str) -> tuple[Path, NodeModel, tuple[LearnedJob, ...]] | None:
    """The calibrated model of node ``node_key`` with the programs learned from production runs: (its file, the
    model, what was learned), or None when the node has no calibrated model (or it cannot be read)."""
    from profiler.store import ProfileStore

    path = model_path(node_key)
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        return None
    store = ProfileStore()
    return _planning_model(str(path.resolve()), mtime, node_key, str(store.path), _stamp(store.path),
                           str(default_calibration_path()), _stamp(default_calibration_path()))


@lru_cache(maxsize=8)
def _planning_model(path: str, _mtime: int, node_key: str, store_path: str, _store_stamp: tuple[int, ...],
                    calib_path: str, _calib_stamp: tuple[int, ...]) -> tuple[Path, NodeModel, tuple[LearnedJob, ...]] | None:
    from env.errors import CoschedError
    from env.sim.nodes import load_node
    from env.sim.world import world_for
    from profiler.errors import ProfilerError
    from profiler.store import ProfileStore

    try:
        model = world_for(load_node(f"sim:{path}")).model
    except CoschedError:
        return None
    if model is None or model.provenance.source != "calibrated":
        return None
    try:
        profiles = ProfileStore(store_path).list(node_key) if Path(store_path).exists() else []
        runs = [r.record for r in CalibrationStore(calib_path).runs(node_key, "run")] if Path(calib_path).exists() else []
    except (ProfilerError, CoschedError):
        profiles, runs = [], []
    key = _learned_key(path, profiles, runs)
    cached = read_learned(node_key, key)
    if cached is not None:
        return Path(path), cached[0], tuple(LearnedJob(**lj) for lj in cached[1])
    model, learned = Learner(model).learn(profiles, runs)
    write_learned(node_key, key, model, [dataclasses.asdict(lj) for lj in learned])
    return Path(path), model, tuple(learned)


def _learned_key(path: str, profiles: Sequence[Profile], runs: Sequence[RunRecord]) -> str:
    """``learned_key`` with the learner's settings as they are when called (a bench's ablation may change them)."""
    return learned_key(path, profiles, runs,
                       (KNOWN_AFTER, SHAPE_AFTER, PARALLEL_FACTORS, SOLO_BIAS, SOLO_RANGE, GRID, NEAR_FEATURES))


def scoring_node(node: NodeSpec) -> NodeSpec | None:
    """The simulated node that plans for the real ``node`` are scored on: its planning model (``planning_model``),
    registered under its own name (``sim:FILE+learned``), when it has one for this node's CPUs; else None."""
    from env.node.discover import node_id

    got = planning_model(node_id(node))
    if got is None or list(got[1].node.cpus) != list(node.cpus):
        return None
    return _registered(got[0], got[1])


_REGISTERED: dict[int, tuple[NodeModel, NodeSpec]] = {}  # id(model) -> (the model, kept alive; its node)


def _registered(path: Path, model: NodeModel) -> NodeSpec:
    """The node of ``model`` (one of the cached planning models) under its own name, its world registered once."""
    from env.sim.world import register

    hit = _REGISTERED.get(id(model))
    if hit is not None and hit[0] is model:
        return hit[1]
    name = f"sim:{path}+learned"
    register(name, model)
    spec = model.node.model_copy(update={"name": name})
    if len(_REGISTERED) >= 8:
        _REGISTERED.pop(next(iter(_REGISTERED)))
    _REGISTERED[id(model)] = (model, spec)
    return spec


def model_uncertainty(node: NodeSpec) -> float:
    """How far the node model decisions are made on may be from the node it stands for, as a fraction: for the real
    node's planning model (``scoring_node``), the p90 of its calibration's held-out abs errors (9 in 10 held-out
    co-runs were predicted closer); 0 for any other node (a simulated node is its own model)."""
    for model, spec in _REGISTERED.values():
        if spec.name == node.name:
            h = model.provenance.heldout
            return h.p90_abs_error_pct / 100.0 if h is not None and h.n and math.isfinite(h.p90_abs_error_pct) else 0.0
    return 0.0


__all__ = ["KNOWN_AFTER", "LearnedJob", "coruns_in", "Learner", "parallel_from_speedup", "model_uncertainty", "planning_model", "scoring_node",
           "speedup_of"]
