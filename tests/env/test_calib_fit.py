"""The fit recovers known parameters from synthetic measurements (the simulated node, seeded, no noise)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from env.calibration.calibrate import CalibrationConfig, calibrate
from env.calibration.space import Space
from env.measure.probing import PROBE
from env.sim.measuring import sim_measuring_backend
from env.sim.variants import reference_model, variant_models


@pytest.fixture(scope="module")
def fitted():
    truth = variant_models()["variant-a"]  # not the paper's numbers: nothing can be right by default
    b = sim_measuring_backend(truth, noise_sd=0.0, seed=0)
    cfg = CalibrationConfig(probes=4, heldout=6, seed=3, jobs=["EP", "MG", "water_spatial"], max_nfev=25, rounds=1,
                            ensemble=4, candidates=30)
    return truth, calibrate(b, cfg)


def test_node_numbers_read_from_the_microbenchmarks(fitted):
    truth, r = fitted
    p, t = r.model.params, truth.params
    assert p.domain_bw_gbs == pytest.approx(t.domain_bw_gbs, rel=0.01)
    assert p.link_gbs == pytest.approx(t.link_gbs, rel=0.01)
    assert p.remote_latency_ratio == pytest.approx(t.remote_latency_ratio, rel=0.01)
    assert p.latency_ns == pytest.approx(t.latency_ns, rel=0.01)
    assert [d.memory_bandwidth_gbs for d in r.model.node.numa] == pytest.approx([50.0, 50.0], rel=0.01)


def test_fitted_parameters_near_the_hidden_ones(fitted):
    truth, r = fitted
    assert r.model.params.overlap == pytest.approx(truth.params.overlap, abs=0.08)
    assert r.model.params.bubble_gbs_per_core == pytest.approx(truth.params.bubble_gbs_per_core, rel=0.15)
    fit = {j.name: j.params for j in r.model.jobs}
    true = truth.job_params()
    assert fit["EP"].work_s == pytest.approx(true["EP"].work_s, rel=0.05)
    assert fit["EP"].parallel == pytest.approx(true["EP"].parallel, abs=0.002)
    assert fit["MG"].stream_gb == pytest.approx(true["MG"].stream_gb, rel=0.2)
    assert fit["water_spatial"].work_s == pytest.approx(true["water_spatial"].work_s, rel=0.1)
    assert r.model.provenance.fit_rms_log < 0.02  # without noise the model family holds the truth


def test_heldout_predictions_close_without_noise(fitted):
    _, r = fitted
    assert r.model.provenance.heldout.median_abs_error_pct < 5.0  # its pairs never probed (one of the three kept apart)
    assert len(r.heldout_records) == 6 and all(rec.predicted_s for rec in r.heldout_records)


def test_the_model_file_holds_every_parameter(fitted):
    _, r = fitted
    doc = json.loads(r.model.model_dump_json())
    from env.sim.model import JobParams
    from env.sim.params import SimParams
    import dataclasses

    assert set(doc["params"]) == {f.name for f in dataclasses.fields(SimParams)}
    for j in doc["jobs"]:
        assert set(j["params"]) == {f.name for f in dataclasses.fields(JobParams)}
    assert doc["probe"]["name"] == PROBE and doc["provenance"]["source"] == "calibrated"


def test_space_round_trip():
    m = reference_model()
    s = Space(["MG", "EP", PROBE])
    jobs = {**m.job_params(), PROBE: m.probe}
    x = s.encode(m.params, jobs)
    assert s.job_params(x, "MG").stream_gb == pytest.approx(jobs["MG"].stream_gb)
    assert s.job_params(x, "EP").parallel == pytest.approx(jobs["EP"].parallel, abs=1e-9)
    assert s.node_params(x, m.params).overlap == pytest.approx(0.75)
    assert np.all(x >= s.lo) and np.all(x <= s.hi)


def test_the_l3_miss_ratio_curve_is_recovered_from_the_way_curves(fitted):
    """variant-a has CAT and MBA, so profiling measured each job's slowdown against L3 ways: the fitted traffic
    curve follows the hidden one over the capacities the runs saw (1 way of half a socket to a whole L3)."""
    truth, r = fitted
    fit = {j.name: j.params for j in r.model.jobs}
    true = truth.job_params()
    for name in ("water_spatial", "MG"):
        f, t = fit[name], true[name]
        for mb in (1.5, 3.0, 7.5, 16.5):
            assert f.stream_gb + f.reuse_gb * f.miss(mb) == pytest.approx(t.stream_gb + t.reuse_gb * t.miss(mb), rel=0.05)
    assert fit["water_spatial"].ws2_mb == pytest.approx(true["water_spatial"].ws2_mb, rel=0.15)


def test_a_program_that_kept_one_cpu_busy_is_fitted_no_gain_from_more():
    # a single-threaded program whose one-core run was 6 % slower than its whole-node run (noise on that core): its
    # whole-node run kept 1.00 CPU busy, so it cannot have run faster there; the fit is bounded to a 2 % gain
    from types import SimpleNamespace

    from env.calibration.space import BUSY_SLACK, max_speedup, parallel_from_speedup

    space = Space(["serial", "wide", "uncounted"])
    profiles = {"serial": SimpleNamespace(counters={"task-clock": 5220.0}, solo_s=5.22),
                "wide": SimpleNamespace(counters={"task-clock": 7990.0}, solo_s=4.0),  # every CPU busy: no bound
                "uncounted": SimpleNamespace(counters=None, solo_s=5.0)}
    bounds = space.bound_by_busy_cpus(profiles, 2)
    assert set(bounds) == {"serial"}
    assert max_speedup({"task-clock": 5220.0}, 5.22, 2) == pytest.approx(BUSY_SLACK)
    assert bounds["serial"] == pytest.approx(parallel_from_speedup(BUSY_SLACK, 2))
    k = space.index["serial"] + [f.name for f in space.fields[space.n_node:space.n_node + 12]].index("parallel")
    x = space.initial()  # the generic start: parallel 0.95
    p = space.job_params(np.clip(x, space.lo, space.hi), "serial").parallel
    assert p == pytest.approx(bounds["serial"]) and space.lo[k] < space.hi[k]
    assert space.job_params(np.clip(x, space.lo, space.hi), "wide").parallel == pytest.approx(0.95)


def test_the_fits_predictor_keeps_what_it_built_and_gives_the_doubles_of_a_model_built_afresh(ref_node):
    """The Predictor keeps node-level parameters, geometries, placed jobs and job parameters between evaluations; a
    Jacobian's perturbations, an ensemble that cycles its node-level cache, and runs with the pressure generator
    must all give exactly what a GroupModel made from the vector alone gives."""
    import random

    from env.calibration.design import random_group
    from env.calibration.fit import Predictor
    from env.measure.probing import BUBBLE, Placement
    from env.sim.params import DEFAULT_PARAMS
    from env.sim.probes import DEFAULT_PROBE, GroupModel

    jobs = ["EP", "MG", "water_spatial", "CG"]
    space = Space(jobs)
    pred = Predictor(ref_node, DEFAULT_PARAMS, space)
    rng, nrng = random.Random(5), np.random.default_rng(5)
    groups = [random_group(ref_node, jobs, rng, k) for k in (2, 2, 3, 4)]
    groups.append([Placement("MG", tuple(range(6))), Placement(BUBBLE, tuple(range(12, 18)), level=0.7)])
    x0 = space.initial()
    xs = [x0]
    for c in range(space.size):  # one column at a time, as the Jacobian does
        x = x0.copy()
        x[c] += 0.01
        xs.append(x)
    xs += [x0 + nrng.normal(0, 0.05, space.size) for _ in range(3 * Predictor._NODES)]  # past the node cache
    xs.append(x0)  # back to a vector whose node-level entries were dropped from the cache
    for x in xs:
        for g in groups:
            sp = space.node_params(x, DEFAULT_PARAMS)
            fresh = GroupModel(ref_node, sp, {j: space.job_params(x, j) for j in jobs}, DEFAULT_PROBE).times(g)[0]
            assert pred.times(x, g) == fresh
