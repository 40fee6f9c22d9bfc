"""``calibrate(backend)``: a node model from the node's own measurements, through the ``MeasuringBackend`` only.

Steps (each measurement's node time counted):

1. microbenchmarks (``env.measure.interference.measure_node``): per-domain bandwidth and latency, local and remote:
   read directly as the model's node-level numbers (domain bandwidth, link bandwidth, remote latency ratio);
2. each job's interference curves (``measure_interference``) and solo design (``design.solo_design``), the
   reference probe's too (it is fitted like a job);
3. a first fit of every free parameter (``fit.Fit``: node-level overlap and generator rate, ten per job);
4. ``probes`` job-with-job co-runs, in rounds: random candidate pairs scored by the spread of their predicted
   makespan over an ensemble of plausible fits, the most uncertain measured, then a refit;
5. held-out co-runs (random groups of 2-4 jobs) measured and predicted: the median and p90 absolute error (%)
   of group makespans. Held-out pairs are never probed: a share of the job pairs (``HELDOUT_PAIR_SHARE``) is set
   aside before the probes are chosen, and held-out groups of two are drawn from it (where there are 2 job pairs
   or more);
6. ``repeats`` of the probed groups measured once more: the repeat-noise floor (``noise_floor``), the median
   error that even a model knowing each group's true time would show against one measurement, beside the
   held-out error.

The backend is wrapped in ``ProtocolOnly`` before anything else, so this module can reach nothing of it but
the protocol (the twin test: a simulated node's parameters are out of reach).
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np

from env.calibration.design import random_group, solo_design
from env.calibration.fit import Fit, Obs, Predictor
from env.calibration.space import Space
from env.node.discover import node_id
from env.errors import InputError
from env.measure.interference import Runner, curve_cpus, measure_interference, measure_node, to_placement
from env.node.spec import NodeSpec
from env.measure.probing import BUBBLE, PROBE, Measurement, MeasuringBackend, Placement
from env.sim.nodemodel import HeldOutError, ModelJob, NodeModel, Provenance, checked
from env.sim.params import DEFAULT_PARAMS, SimParams
from profiler.interference import InterferenceProfile, NodeBench, RunRecord
from profiler.models import Profile

Progress = Callable[[str], None]
PROTOCOL = ("simulated", "shape", "jobs", "measure")


class ProtocolOnly:
    """The backend as the protocol and nothing else: any other attribute is an error, not a way in."""

    __slots__ = ("_b",)

    def __init__(self, backend: MeasuringBackend) -> None:
        object.__setattr__(self, "_b", backend)

    def __getattribute__(self, name: str):
        if name not in PROTOCOL:
            raise AttributeError(f"the calibrator may use only the MeasuringBackend protocol {PROTOCOL}, not {name!r}")
        return getattr(object.__getattribute__(self, "_b"), name)


@dataclass
class CalibrationConfig:
    probes: int | None = None  # job-with-job co-runs (default: 2 per job + 30)
    heldout: int = 40
    repeats: int = 0  # probed groups measured once more, for the noise floor (0: none; 'cosched calibrate' asks 8)
    seed: int = 0
    jobs: Sequence[str] | None = None  # a subset of the node's jobs (default: all)
    max_nfev: int = 40
    rounds: int = 2
    ensemble: int = 12
    candidates: int = 250
    noise_sd: float | None = None  # the sim backend's noise, recorded in the provenance
    stored_profiles: Mapping[str, InterferenceProfile] | None = None  # curves measured before ('cosched profile'): reused
    stored_bench: NodeBench | None = None  # microbenchmarks measured before ('cosched node --bench'): reused


@dataclass
class CalibrationResult:
    model: NodeModel
    records: list[RunRecord]  # every measurement the fit used (probes with the prediction made when chosen)
    heldout_records: list[RunRecord] = field(default_factory=list)  # held-out co-runs, with the final prediction
    heldout: list[tuple[float, float]] = field(default_factory=list)  # (measured, predicted) group makespans
    node_seconds: dict[str, float] = field(default_factory=dict)  # profiling (now) / reused (stored) / probes / heldout
    fit_problem: str | None = None  # why the final fit is no fit (one line); the model is then not to be used
    repeat_pairs: list[tuple[float, float]] = field(default_factory=list)  # a probed group's makespan, then again
    heldout_disjoint: bool = False  # no held-out group holds the jobs of a probe (False: too few job pairs to keep apart)

    @property
    def noise_floor(self) -> HeldOutError | None:
        """``noise_floor`` of the repeated probes (None without repeats)."""
        return noise_floor(self.repeat_pairs) if self.repeat_pairs else None

    @property
    def errors_pct(self) -> list[float]:
        return [abs(p - m) / m * 100.0 for m, p in self.heldout]


def error_summary(errors: Sequence[float]) -> HeldOutError:
    if not errors:
        return HeldOutError(median_abs_error_pct=float("nan"), p90_abs_error_pct=float("nan"), n=0)
    s = sorted(errors)
    return HeldOutError(median_abs_error_pct=statistics.median(s), p90_abs_error_pct=float(np.percentile(s, 90)), n=len(s))


def noise_floor(pairs: Sequence[tuple[float, float]]) -> HeldOutError:
    """The repeat-noise floor from groups measured twice (a, b): each repeat's relative difference
    |a - b| / ((a + b) / 2) divided by sqrt(2), the error one measurement carries against the group's true time when
    both carry the same independent noise; as a median and a p90 over the groups, in % (``HeldOutError``'s fields)."""
    return error_summary([abs(a - b) / ((a + b) / 2) / math.sqrt(2) * 100.0 for a, b in pairs if a > 0 and b > 0])


HELDOUT_PAIR_SHARE = 1 / 3  # of the job pairs, set aside for the held-out co-runs (never probed)


def heldout_pairs(jobs: Sequence[str], rng: random.Random) -> set[frozenset[str]]:
    """The job pairs set aside for held-out co-runs before any probe is chosen: a third of them, at least one, and
    never every one (the probes need a pair); none when there is a single pair."""
    pairs = [frozenset(p) for p in itertools.combinations(sorted(set(jobs)), 2)]
    if len(pairs) < 2:
        return set()
    return set(rng.sample(pairs, min(len(pairs) - 1, max(1, round(len(pairs) * HELDOUT_PAIR_SHARE)))))


def heldout_group(node: NodeSpec, jobs: Sequence[str], rng: random.Random, reserved: set[frozenset[str]]) -> list[Placement]:
    """A held-out group of 2-4 jobs; a group of two is one of the ``reserved`` pairs (when any is)."""
    k = min(rng.choice((2, 3, 4)), len(jobs), len(node.cpus))
    if k == 2 and reserved:
        pair = rng.choice(sorted(sorted(p) for p in reserved))
        return random_group(node, pair, rng, 2)
    return random_group(node, jobs, rng, k)


def base_params(node: NodeSpec, bench: NodeBench) -> tuple[SimParams, NodeSpec]:
    """Node-level numbers read from the microbenchmarks, and the shape with each domain's measured bandwidth."""
    local = {d.cpu_domain: d for d in bench.domains if d.local}
    remote = [d for d in bench.domains if not d.local]
    bw_local = statistics.median(d.bandwidth_gbs for d in local.values())
    lat_local = statistics.median(d.latency_ns for d in local.values())
    link = statistics.median(d.bandwidth_gbs for d in remote) if remote else bw_local
    ratio = max(1.0, statistics.median(d.latency_ns for d in remote) / lat_local) if remote else 1.0
    l3 = node.l3[0]
    l3_mb = l3.size_bytes / 2**20 if l3.size_bytes else float(l3.ways)  # discovery normally knows the size
    sp = SimParams(domain_bw_gbs=bw_local, link_gbs=link, remote_latency_ratio=ratio, overlap=0.5, l3_mb=l3_mb,
                   clock_ghz=2.0, noise_sd=0.0, latency_ns=lat_local, bubble_gbs_per_core=6.0,
                   iterations=DEFAULT_PARAMS.iterations)
    spec = node.model_copy(update={"numa": [d.model_copy(update={"memory_bandwidth_gbs": local[d.id].bandwidth_gbs})
                                            for d in node.numa]}, deep=True)
    return sp, spec


FAR = 20.0  # a generic start whose implied time is beyond this factor of the measured one is replaced (e^3: near the clip)


def initial_x(space: Space, profiles: dict[str, InterferenceProfile], node: NodeSpec, base: SimParams,
              probe_alone_s: float | None = None) -> np.ndarray:
    """Starting values (also the fit's prior) of the job's own scale: each job's compute time and parallel fraction
    from its solo runs; where the generic traffic (1000 GB) would take more than ``FAR`` times the job's measured
    solo time at the node's measured bandwidth, its traffic too, from its curves and that bandwidth; the same for
    the reference probe from its time alone. Jobs of the generic scale (the simulated catalogue's, minutes) keep
    the generic traffic: the twin test's fits are those it was tuned on.

    Why: the generic sizes (500 s of work, 500 GB of traffic) predict minutes for a 0.3 s real job; every residual
    then sits at the clip, the gradient is zero and least squares stops after one evaluation (the 86 s fit).
    The job's memory-bound share ``m`` is read from its sensitivity to the generator (a compute-bound job is not
    slowed); its traffic is what the node's bandwidth moves in ``m`` of its solo time; its per-core bandwidth is
    a fair share of the domain's. The reference probe (no curves) starts from its measured time alone.
    """
    from env.calibration.space import JOB_FIELDS, to_x

    x = space.initial()
    f = {fl.name: (k, fl) for k, fl in enumerate(JOB_FIELDS)}
    n_cpus = len(node.cpus)
    per_domain = max(1, min(len(d.cpus) for d in node.numa))
    bw_core = base.domain_bw_gbs / per_domain * 1.5  # a few cores saturate a domain
    n_probe = len(curve_cpus(node)[0])

    def put(i: int, name: str, v: float) -> None:
        k, fl = f[name]
        x[i + k] = to_x(fl, v)

    def generic_s(n: int) -> tuple[float, float]:
        """The time the generic sizes imply on ``n`` cores (compute, then traffic at the node's bandwidth)."""
        g = {fl.name: fl.init for fl in JOB_FIELDS}
        volume = g["stream_gb"] + g["reuse_gb"]
        return g["work_s"] * ((1 - g["parallel"]) + g["parallel"] / n), volume / min(base.domain_bw_gbs, n * g["bw_core"])

    def start(job: str, one_core_s: float, solo_s: float, n: int, mem: float) -> None:
        i = space.index[job]
        speedup = one_core_s / solo_s
        p = (1 - 1 / speedup) / (1 - 1 / n) if n > 1 and speedup > 1 else 0.5
        put(i, "work_s", 0.8 * one_core_s)
        put(i, "parallel", min(max(p, 0.3), 0.999))
        if generic_s(n)[1] <= FAR * solo_s:
            return  # the generic traffic is of the job's scale: a start the fit recovers from (the twin's jobs)
        volume = mem * solo_s * min(base.domain_bw_gbs, n * bw_core)
        put(i, "stream_gb", 0.5 * volume)
        put(i, "reuse_gb", 0.5 * volume)
        put(i, "comm_gb", min(f["comm_gb"][1].init, 0.1 * volume))  # generic, at most a tenth of its traffic
        put(i, "bw_core", bw_core)

    for job, prof in profiles.items():
        if job not in space.index:
            continue
        slow = max((pt.slowdown for pt in prof.sensitivity), default=1.0)
        start(job, prof.one_core_s, prof.solo_s, n_cpus, min(max(slow - 1.0, 0.05), 0.8))
    if probe_alone_s and PROBE in space.index and sum(generic_s(n_probe)) > FAR * probe_alone_s:
        # alone on the curves' CPUs; memory-sensitive by design
        start(PROBE, probe_alone_s * n_probe, probe_alone_s, n_probe, 0.5)
    return np.clip(x, space.lo, space.hi)


def _key(run: RunRecord | Sequence[Placement]) -> tuple[Placement, ...]:
    """A measurement's group as hashable placements (to skip a run an earlier one already made)."""
    return tuple(to_placement(p) for p in run.group) if isinstance(run, RunRecord) else tuple(run)


def _obs(records: Sequence[RunRecord]) -> list[Obs]:
    return [Obs(tuple(to_placement(p) for p in r.group), tuple(r.times_s)) for r in records]


def makespan(times: Sequence[float | None], group: Sequence[Placement]) -> float:
    return max(t for t, p in zip(times, group) if p.job != BUBBLE and t is not None)


def calibrate(backend: MeasuringBackend, cfg: CalibrationConfig = CalibrationConfig(),
              progress: Progress | None = None) -> CalibrationResult:
    say = progress or (lambda _m: None)
    b = ProtocolOnly(backend)
    node = b.shape()
    jobs = list(cfg.jobs) if cfg.jobs else b.jobs()
    if not jobs:
        raise InputError(f"node {node.name} has no jobs to calibrate on: profile some first ('cosched profile')")
    unknown = [j for j in jobs if j not in b.jobs()]
    if unknown:
        raise InputError(f"unknown job(s) {', '.join(unknown)} on {node.name}: its jobs are {', '.join(b.jobs())}")
    budget = cfg.probes if cfg.probes is not None else 2 * len(jobs) + 30
    if budget < 1:
        raise InputError("--probes must be at least 1 (a fit without a single co-run cannot be checked on co-runs)")
    if len(jobs) < 2:
        raise InputError("calibration needs at least 2 jobs (co-run probes pair them)")
    seed = cfg.seed
    if cfg.stored_bench is not None and cfg.stored_bench.node_id == node_id(node):
        bench = cfg.stored_bench
        say(f"microbenchmarks on {node.name}: reusing the stored ones ({bench.node_seconds:.0f} s of node time saved)")
        reused_s = bench.node_seconds
        bench_records = [r for r in bench.runs if r.kind != "probe"]  # the probe is timed below with this run's sizes
    else:
        say(f"microbenchmarks on {node.name}")
        bench = measure_node(b, seed=seed, progress=say)
        reused_s, bench_records = 0.0, list(bench.runs)
    measured_s = 0.0 if bench is cfg.stored_bench else bench.node_seconds
    base, spec = base_params(node, bench)
    profiles: dict[str, InterferenceProfile] = {}
    records: list[RunRecord] = list(bench_records)
    runner = Runner(b, seed=seed + 1)
    stored = {j: p for j, p in (cfg.stored_profiles or {}).items() if p.node_id == node_id(node)}
    for k, job in enumerate(jobs):
        if job in stored:
            say(f"{job}: reusing its stored curves ({k + 1}/{len(jobs)})")
            profiles[job] = stored[job]
            reused_s += stored[job].node_seconds
        else:
            say(f"profiling {job} ({k + 1}/{len(jobs)})")
            profiles[job] = measure_interference(b, job, seed=seed * 7919 + k + 2)
            measured_s += profiles[job].node_seconds
        records += profiles[job].runs
    done = {_key(r) for r in records}
    for job in jobs:
        for group in solo_design(node, job):
            if _key(group) not in done:  # e.g. one domain is the whole node: its curves' solo run already says it
                done.add(_key(group))
                runner.run("solo", group)
    for group in solo_design(node, PROBE, with_curves=True):
        if _key(group) not in done:
            done.add(_key(group))
            runner.run("probe", group)
    records += runner.records
    profiling_s = measured_s + runner.node_seconds
    if reused_s:
        say(f"profiling: {profiling_s:.0f} s of node time now, {reused_s:.0f} s reused from stored measurements")

    space = Space(jobs + [PROBE])
    space.bound_by_busy_cpus(profiles, len(spec.cpus))
    probe_alone = [t for r in runner.records for t, pl in zip(r.times_s, r.group) if r.kind == "probe" and len(r.group) == 1
                   and pl.cpus == list(curve_cpus(node)[0])]
    prior = initial_x(space, profiles, spec, base, probe_alone[0] if probe_alone else bench.probe_alone_s)
    then = [r.times_s[0] for j in jobs if j in stored for r in profiles[j].runs if r.kind == "probe" and len(r.group) == 1 and r.times_s[0]]
    if then and probe_alone:
        ratio = statistics.median(then) / probe_alone[0]
        if not 0.8 <= ratio <= 1.25:  # a shared or throttled node: the stored curves' times are of another node state
            say(f"warning: the reference probe alone took {statistics.median(then):.2f} s when the stored curves were "
                f"measured and {probe_alone[0]:.2f} s now ({ratio:.2f}x): the node's load has changed since; "
                "predictions from those curves may be off by as much ('cosched calibrate --remeasure' measures them again)")
    fit = Fit(spec, base, space, _obs(records), prior)
    say(f"first fit: {space.size} parameters from {len(fit.rows)} timed runs")
    res = fit.run(prior, cfg.max_nfev, say)
    x = res.x

    rng = random.Random(seed + 17)
    nrng = np.random.default_rng(seed + 18)
    reserved = heldout_pairs(jobs, random.Random(seed + 31))  # before any probe: the held-out pairs stay unseen
    probe_runner = Runner(b, seed=seed + 3)
    probe_records: list[RunRecord] = []
    left = budget
    for rnd in range(cfg.rounds):
        n = left if rnd == cfg.rounds - 1 else max(1, budget // cfg.rounds)
        n = min(n, left)
        if n <= 0:
            break
        chosen = choose_probes(fit, res, jobs, node, n, rng, nrng, cfg, avoid=reserved)
        say(f"co-run probes, round {rnd + 1}: measuring {len(chosen)} pairs where the fit is least sure")
        pred = Predictor(spec, base, space)
        for group in chosen:
            m = probe_runner.run("corun", group)
            probe_runner.records[-1].predicted_s = pred.times(x, group)
        probe_records = probe_runner.records
        left -= len(chosen)
        fit = Fit(spec, base, space, _obs(records + probe_records), prior)
        res = fit.run(x, cfg.max_nfev, say)
        x = res.x

    problem = fit.failure(res)
    if problem:
        say(f"the fit failed: {problem}; held-out co-runs skipped")
        model = build_model(node, spec, base, space, x, jobs, profiles, bench, fit, backend_simulated=bool(b.simulated),
                            probes=len(probe_records), profiling_runs=len(records), summary=error_summary([]),
                            seconds=(profiling_s + reused_s, probe_runner.node_seconds, 0.0), noise_sd=cfg.noise_sd)
        return CalibrationResult(model=model, records=records + probe_records, fit_problem=problem,
                                 node_seconds={"profiling": profiling_s, "reused": reused_s,
                                               "probes": probe_runner.node_seconds, "heldout": 0.0})
    probed = {frozenset(p.job for p in r.group) for r in probe_records}
    kmax = min(4, len(jobs), len(node.cpus))
    say(f"held-out co-runs: {cfg.heldout} random groups of {'2' if kmax == 2 else f'2-{kmax}'} jobs"
        + (", none of them a probed pair" if reserved else f" (the only job pair, {' + '.join(sorted(jobs))}, is probed too)"))
    held_runner = Runner(b, seed=seed + 5)
    pred = Predictor(spec, base, space)
    heldout: list[tuple[float, float]] = []
    hrng = random.Random(seed + 29)
    disjoint = True
    for _ in range(cfg.heldout):
        group = heldout_group(node, jobs, hrng, reserved)
        disjoint = disjoint and frozenset(p.job for p in group) not in probed
        predicted = pred.times(x, group)
        m: Measurement = held_runner.run("corun", group)
        held_runner.records[-1].predicted_s = predicted
        heldout.append((makespan(m.times_s, group), makespan(predicted, group)))
    errs = [abs(p - mm) / mm * 100 for mm, p in heldout]
    summary = error_summary(errs)
    rep_runner = Runner(b, seed=seed + 7)
    repeats = _repeat_probes(rep_runner, probe_records, cfg.repeats, say)
    check_s = held_runner.node_seconds + rep_runner.node_seconds  # the check's node time: held out and repeats
    floor = f"; noise floor {noise_floor(repeats).median_abs_error_pct:.1f} % ({len(repeats)} probes repeated)" if repeats else ""
    if repeats:  # kept with the held-out error in the model file
        summary = summary.model_copy(update={"noise_floor": round(noise_floor(repeats).median_abs_error_pct, 3)})
    say(f"held-out: median abs error {summary.median_abs_error_pct:.1f} %, p90 {summary.p90_abs_error_pct:.1f} % (n {summary.n}){floor}")

    model = build_model(node, spec, base, space, x, jobs, profiles, bench, fit, backend_simulated=bool(b.simulated),
                        probes=len(probe_records), profiling_runs=len(records), summary=summary,
                        seconds=(profiling_s + reused_s, probe_runner.node_seconds, check_s), noise_sd=cfg.noise_sd)
    return CalibrationResult(model=model, records=records + probe_records + rep_runner.records, heldout_records=held_runner.records,
                             heldout=heldout, node_seconds={"profiling": profiling_s, "reused": reused_s,
                                                            "probes": probe_runner.node_seconds, "heldout": check_s},
                             repeat_pairs=repeats, heldout_disjoint=disjoint and bool(reserved))


def _repeat_probes(runner: Runner, probes: list[RunRecord], n: int, say: Progress) -> list[tuple[float, float]]:
    """``n`` of the probed groups (``probes``, spread over them) measured once more with ``runner``, after the
    held-out co-runs: (first makespan, repeat's) of each; the repeats' records are the runner's."""
    k = min(max(n, 0), len(probes))
    picks = [probes[round(i * (len(probes) - 1) / max(1, k - 1))] for i in range(k)]
    if picks:
        say(f"noise floor: {len(picks)} probed groups measured once more")
    out = []
    for r in picks:
        group = [to_placement(p) for p in r.group]
        m = runner.run("corun", group)
        out.append((makespan(r.times_s, group), makespan(m.times_s, group)))
    return out


def choose_probes(fit: Fit, res, jobs: Sequence[str], node: NodeSpec, n: int, rng: random.Random,
                  nrng: np.random.Generator, cfg: CalibrationConfig,
                  avoid: set[frozenset[str]] = frozenset()) -> list[list[Placement]]:  # type: ignore[assignment]
    """The ``n`` candidate pairs whose predicted makespan varies most over the fit's ensemble: one per job pair
    first (spread over the jobs), then the next most uncertain placements of pairs already chosen. Pairs in
    ``avoid`` (kept for the held-out co-runs) are never candidates."""
    members = fit.ensemble(res, cfg.ensemble, nrng)
    cands = [c for c in (random_group(node, jobs, rng, 2) for _ in range(cfg.candidates))
             if frozenset(p.job for p in c) not in avoid]
    scored = []
    for c in cands:
        logs = [np.log(makespan(fit.pred.times(xm, c), c)) for xm in members]
        scored.append((float(np.std(logs)), c))
    scored.sort(key=lambda t: -t[0])
    out, seen = [], set()
    for _, c in scored:
        pair = frozenset(p.job for p in c)
        if pair in seen:
            continue
        seen.add(pair)
        out.append(c)
        if len(out) == n:
            return out
    rest = [c for _, c in scored if not any(c is o for o in out)]
    return out + rest[: n - len(out)]


def measured_profile(prof: InterferenceProfile, simulated: bool) -> Profile:
    """The job's profile from its calibration runs: the whole-node solo run's time and counters (what the node
    counted; the rest missing), the one-core run's scale factor. Planning on the node model uses it as features."""
    from profiler.events import PERF_EVENTS

    counters = {e: v for e, v in (prof.counters or {}).items() if e in PERF_EVENTS}
    counters.setdefault("duration_time", prof.solo_s * 1e9)
    return Profile(name=prof.name, node_id=prof.node_id, command=[f"node/{prof.name}"], counters=counters,
                   wall_s=prof.solo_s, scale_factor=prof.one_core_s / prof.solo_s, one_core_s=prof.one_core_s,
                   simulated=simulated, created_at=prof.created_at)


def build_model(node: NodeSpec, spec: NodeSpec, base: SimParams, space: Space, x: np.ndarray, jobs: Sequence[str],
                profiles: dict[str, InterferenceProfile], bench: NodeBench, fit: Fit, *, backend_simulated: bool,
                probes: int, profiling_runs: int, summary: HeldOutError, seconds: tuple[float, float, float],
                noise_sd: float | None = None, updates: int = 0) -> NodeModel:
    sp = space.node_params(x, base)
    model_jobs = []
    for j in jobs:
        prof = profiles.get(j)
        model_jobs.append(ModelJob(params=space.job_params(x, j), role="train", suite="node",
                                   character="calibrated from its own measurements", interference=prof,
                                   profile=measured_profile(prof, backend_simulated) if prof else None))
    return NodeModel(
        node=spec.model_copy(update={"notes": {**spec.notes, "model": "calibrated by cosched calibrate"}}),
        params=sp, jobs=model_jobs, probe=space.job_params(x, PROBE, PROBE),
        provenance=Provenance(
            source="calibrated", backend="sim" if backend_simulated else "real", measured_node=node.name,
            measured_node_id=node_id(node), noise_sd=noise_sd, corun_probes=probes, profiling_runs=profiling_runs,
            node_seconds_profiling=seconds[0], node_seconds_probes=seconds[1], node_seconds_heldout=seconds[2],
            fit_rms_log=fit.rms_log(x), heldout=summary, bench=bench, updates=updates,
        ),
    )


def refit(model: NodeModel, records: Sequence[RunRecord], cfg: CalibrationConfig = CalibrationConfig(),
          progress: Progress | None = None) -> tuple[NodeModel, Fit, int]:
    """``model`` refitted from ``records`` (everything measured on its node so far), warm-started from its own
    parameters with the same prior as the first fit. Returns (the new model, the fit, the records used)."""
    from env.measure.probing import BUILTINS

    jobs = [j.name for j in model.jobs]
    known = set(jobs) | set(BUILTINS)
    # the fit's rows are groups started together: a continuous run's record (start_s) is for the learned programs
    usable = [r for r in records if all(p.job in known for p in r.group) and r.start_s is None]
    if not usable:
        raise InputError(f"no stored measurement of {model.node.name}'s jobs to refit from: run 'cosched calibrate' first")
    base = model.params
    space = Space(jobs + [PROBE])
    profiles = {j.name: j.interference for j in model.jobs if j.interference is not None}
    space.bound_by_busy_cpus(profiles, len(model.node.cpus))
    bench = model.provenance.bench
    prior = initial_x(space, profiles, model.node, base, bench.probe_alone_s if bench else None)
    x0 = space.encode(base, {**model.job_params(), PROBE: model.probe})
    fit = Fit(model.node, base, space, _obs(usable), prior)
    (progress or (lambda _m: None))(f"refit: {space.size} parameters from {len(fit.rows)} timed runs")
    res = fit.run(x0, cfg.max_nfev, progress)
    x = res.x
    new_jobs = [j.model_copy(update={"params": checked(space.job_params(x, j.name))}) for j in model.jobs]
    prov = model.provenance.model_copy(update={"updates": model.provenance.updates + 1, "fit_rms_log": fit.rms_log(x)})
    new = model.model_copy(update={"params": checked(space.node_params(x, base)), "jobs": new_jobs,
                                   "probe": checked(space.job_params(x, PROBE, PROBE)), "provenance": prov})
    return new, fit, len(usable)


def predict_times(model: NodeModel, records: Sequence[RunRecord]) -> list[list[float | None] | None]:
    """The model's predicted time of each program of each record's group (None where it holds a job the model lacks)."""
    from env.measure.probing import BUILTINS
    from env.sim.probes import GroupModel

    gm = GroupModel(model.node, model.params, model.job_params(), model.probe)
    out: list[list[float | None] | None] = []
    for r in records:
        group = [to_placement(p) for p in r.group]
        out.append(gm.times_as_run(group, r.start_s, r.times_s) if all(p.job in gm.jobs or p.job in BUILTINS for p in group) else None)
    return out


def predict_records(model: NodeModel, records: Sequence[RunRecord]) -> list[float | None]:
    """The model's predicted makespan of each record's group (None where it holds a job the model lacks)."""
    return [None if t is None else makespan(t, [to_placement(p) for p in r.group])
            for t, r in zip(predict_times(model, records), records)]
