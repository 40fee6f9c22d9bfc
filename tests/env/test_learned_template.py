"""A program learned from production runs takes the character (all but its size, parallelism and memory intensity)
of the calibrated program nearest to what its solo run counted, where the node counts hardware events; else the
median program's (``env.calibration.learned.Learner.template_for``)."""

from __future__ import annotations

from datetime import datetime, timezone

from env.calibration.calibrate import CalibrationConfig, calibrate
from env.calibration.learned import Learner
from env.measure.probing import Placement
from env.sim.measuring import sim_measuring_backend
from env.sim.nodes import load_node
from env.sim.variants import model_for_node
from profiler.events import PERF_EVENTS, SOFTWARE_EVENTS
from profiler.models import Profile

JOBS = ["EP", "MG", "CG", "lu_cb"]


def first_run(backend, job: str, whole: tuple[int, ...], software_only: bool) -> Profile:  # noqa: ANN001
    m = backend.measure([Placement(job, whole)], seed=5)
    counters = {e: v for e, v in (m.counters[0] or {}).items() if e in PERF_EVENTS
                and (not software_only or e in SOFTWARE_EVENTS or e == "duration_time")}
    return Profile(name=f"{job}-new", node_id="twin", command=["node/x"], counters=counters, wall_s=m.times_s[0],
                   simulated=True, created_at=datetime.now(timezone.utc))


def test_the_template_is_the_nearest_calibrated_program_where_counters_say() -> None:
    truth = model_for_node(load_node("sim:reference"))
    backend = sim_measuring_backend(truth, noise_sd=0.0, seed=3)
    model = calibrate(backend, CalibrationConfig(probes=2, heldout=2, seed=0, jobs=JOBS)).model
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
