"""A program learned from production runs takes the character (all but its size, parallelism and memory intensity)
of the calibrated program nearest to what its solo run counted, where the node counts hardware events; else the
median program's (``env.calibration.learned.Learner.template_for``)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from env.calibration.calibrate import CalibrationConfig, calibrate
from env.calibration.learned import Learner
from env.measure.probing import Placement
from env.sim.measuring import sim_measuring_backend
from env.sim.nodes import load_node
from env.sim.variants import model_for_node
from profiler.events import PERF_EVENTS, SOFTWARE_EVENTS
from profiler.interference import PlacementRecord, RunRecord
from profiler.models import Profile

JOBS = ["EP", "MG", "CG", "lu_cb"]


def first_run(backend, job: str, whole: tuple[int, ...], software_only: bool) -> Profile:  # noqa: ANN001
    m = backend.measure([Placement(job, whole)], seed=5)
    counters = {e: v for e, v in (m.counters[0] or {}).items() if e in PERF_EVENTS
                and (not software_only or e in SOFTWARE_EVENTS or e == "duration_time")}
    return Profile(name=f"{job}-new", node_id="twin", command=["node/x"], counters=counters, wall_s=m.times_s[0],
                   simulated=True, created_at=datetime.now(timezone.utc))


@pytest.fixture(scope="module")
def calibrated():  # noqa: ANN201
    truth = model_for_node(load_node("sim:reference"))
    backend = sim_measuring_backend(truth, noise_sd=0.0, seed=3)
    return backend, calibrate(backend, CalibrationConfig(probes=2, heldout=2, seed=0, jobs=JOBS)).model


def test_the_template_is_the_nearest_calibrated_program_where_counters_say(calibrated) -> None:  # noqa: ANN001
    backend, model = calibrated
    learner = Learner(model)
    whole = tuple(model.node.cpus)
    params = {j.name: j.params for j in model.jobs}
    picked = {job: learner.template_for(first_run(backend, job, whole, software_only=False)) for job in JOBS}
    assert all(picked[job] == params[job] for job in JOBS)  # each program's own counters pick itself
    assert len({p.name for p in picked.values()}) == len(JOBS)  # not one template for all
    for job in JOBS:  # no hardware counters (this development machine): the median program, whatever the run
        assert learner.template_for(first_run(backend, job, whole, software_only=True)) == learner.template
    new, learned = learner.learn([first_run(backend, "MG", whole, software_only=False)], [])
    got = next(j.params for j in new.jobs if j.name == "MG-new")
    assert (got.ws_mb, got.irregular, got.bw_core) == (params["MG"].ws_mb, params["MG"].irregular, params["MG"].bw_core)
    assert got.stream_gb / got.work_s == learned[0].intensity  # its intensity is still the cautious prior's


def test_a_program_the_plans_keep_alone_is_paired_after_a_few_runs(calibrated) -> None:  # noqa: ANN001
    """Runs alone teach the model nothing of a program's sensitivity: each moves its cautious prior toward the
    median program's, reached after KNOWN_AFTER of them, so the plans pair it and it is learned."""
    from env.calibration.learned import KNOWN_AFTER

    backend, model = calibrated
    learner = Learner(model)
    prof = first_run(backend, "MG", tuple(model.node.cpus), software_only=True)
    alone = RunRecord(kind="corun", group=[PlacementRecord(job=prof.name, cpus=list(model.node.cpus))],
                      times_s=[prof.duration_s], node_seconds=prof.duration_s)
    ks = []
    for n in range(KNOWN_AFTER + 2):
        lj = learner.learn([prof], [alone] * n)[1][0]
        assert lj.alone == n and lj.coruns == 0
        ks.append(lj.intensity)
    assert ks[0] == pytest.approx(learner.k_high) and learner.k_high > learner.k_median
    assert all(a > b for a, b in zip(ks[:KNOWN_AFTER], ks[1:KNOWN_AFTER + 1]))  # less cautious with each run alone
    assert ks[KNOWN_AFTER] == pytest.approx(learner.k_median) == ks[-1]  # then the median program's
    assert "less so after 2 runs alone" in learner.learn([prof], [alone] * 2)[1][0].describe()
