"""Scale-free starts and reuse of stored measurements (the simulated node as black-box hardware, seeded).

A real node's jobs take ~0.3 s, not the catalogue's minutes: the fit must start from each job's own measured
times (generic 500 s / 500 GB starts put every prediction at the clip and least squares stopped after one
evaluation). Stored curves and microbenchmarks are reused: a calibration after profiling measures only co-runs.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from env.calibration.calibrate import CalibrationConfig, calibrate
from env.measure.interference import measure_interference, measure_node
from env.measure.probing import BUBBLE, BUILTINS, PROBE
from env.sim.measuring import sim_measuring_backend
from env.sim.variants import variant_models

JOBS = ["EP", "MG", "water_spatial"]
CFG = dict(probes=4, heldout=6, seed=5, jobs=JOBS, max_nfev=25, rounds=1, ensemble=4, candidates=30)


def short_model(seconds: float = 0.3, bw: float = 12.0):
    """variant-a as a small real node: 12 GB/s per domain, and its jobs' (and the probe's) work and traffic scaled
    so each takes about ``seconds`` of compute and about as much of memory time on the whole node."""
    m = variant_models()["variant-a"]
    params = dataclasses.replace(m.params, domain_bw_gbs=bw, link_gbs=bw / 3)
    node = m.node.model_copy(update={"numa": [d.model_copy(update={"memory_bandwidth_gbs": bw}) for d in m.node.numa]})
    jobs = []
    for j in m.jobs:
        p = j.params
        f = seconds * 24 / p.work_s  # 24 cores: about ``seconds`` for the compute of a parallel job
        g = seconds * 2 * bw / max(p.stream_gb + p.reuse_gb, 1e-3)  # about ``seconds`` of traffic at the node's bandwidth
        jobs.append(j.model_copy(update={"params": dataclasses.replace(p, work_s=p.work_s * f, stream_gb=p.stream_gb * g,
                                                                         reuse_gb=p.reuse_gb * g, comm_gb=p.comm_gb * g)}))
    pr = m.probe  # the reference probe is a short program too (about a second here, measured)
    f = seconds / pr.work_s
    probe = dataclasses.replace(pr, work_s=pr.work_s * f, stream_gb=pr.stream_gb * f, reuse_gb=pr.reuse_gb * f)
    return m.model_copy(update={"jobs": jobs, "params": params, "node": node, "probe": probe})


class Counting:
    """The backend with every measure() call counted by what it ran (the calibrator sees the same protocol)."""

    def __init__(self, backend) -> None:
        self.b = backend
        self.simulated = backend.simulated
        self.calls: Counter[str] = Counter()

    def shape(self):
        return self.b.shape()

    def jobs(self):
        return self.b.jobs()

    def measure(self, group, *, seed=None):
        jobs = [p.job for p in group if p.job not in BUILTINS]
        builtins = {p.job for p in group if p.job in BUILTINS}
        kind = "corun" if len(jobs) >= 2 else "curve" if jobs and builtins & {BUBBLE, PROBE} else "solo" if jobs else "builtin"
        self.calls[kind] += 1
        return self.b.measure(group, seed=seed)


@pytest.fixture(scope="module")
def fresh():
    """A calibration with nothing stored: (its backend's counts, its result)."""
    counting = Counting(sim_measuring_backend(short_model(), noise_sd=0.0, seed=0))
    return counting, calibrate(counting, CalibrationConfig(**CFG))


@pytest.fixture(scope="module")
def short(fresh):
    return None, fresh[1]


def test_short_jobs_really_are_short(short):
    _, r = short
    solo = [j.interference.solo_s for j in r.model.jobs]
    assert max(solo) < 10 and min(solo) < 1  # seconds, as real calibration jobs (the catalogue: minutes)


def test_the_fit_converges_from_scale_free_starts(short):
    _, r = short
    assert r.fit_problem is None
    assert r.model.provenance.fit_rms_log < 0.1  # generic starts: 1.86 (every probe run at the clip)
    assert r.model.provenance.heldout.median_abs_error_pct < 10.0
    # the predictions are of the jobs' own scale, not minutes
    assert all(0.3 < p / m < 3 for m, p in r.heldout)


def test_a_failed_fit_is_one_line():
    from env.calibration.fit import Fit
    from types import SimpleNamespace

    import numpy as np

    fit = Fit.__new__(Fit)
    fit.rows = [(0, 0)] * 4
    res = SimpleNamespace(status=2, nfev=1, message="", fun=np.array([4.0, 4.0, -4.0, 0.1]))
    msg = fit.failure(res)
    assert msg and "\n" not in msg and "1 evaluations" in msg and "75%" in msg
    assert fit.failure(SimpleNamespace(status=2, nfev=9, message="", fun=np.array([0.01, -0.02, 0.0, 0.03]))) is None


def test_stored_curves_and_bench_are_reused(fresh):
    truth = short_model()
    pre = sim_measuring_backend(truth, noise_sd=0.0, seed=0)
    stored = {j: measure_interference(pre, j, seed=k) for k, j in enumerate(JOBS)}
    bench = measure_node(pre, seed=1)
    counting = Counting(sim_measuring_backend(truth, noise_sd=0.0, seed=0))
    r = calibrate(counting, CalibrationConfig(**CFG, stored_profiles=stored, stored_bench=bench))
    assert counting.calls["curve"] == 0  # no job next to the generator or the probe: its curves were stored
    assert counting.calls["corun"] == CFG["probes"] + CFG["heldout"]
    assert r.node_seconds["reused"] == pytest.approx(bench.node_seconds + sum(p.node_seconds for p in stored.values()))
    assert [j.interference for j in r.model.jobs] == [stored[j] for j in JOBS]
    assert fresh[0].calls["curve"] >= len(JOBS) * 2  # without stored curves they are measured
    assert fresh[0].calls["builtin"] > counting.calls["builtin"]  # and the microbenchmarks
