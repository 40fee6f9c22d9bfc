"""A program the calibrated model does not know is learned from production runs: its first run (alone on the whole
node under perf, stored as its profile) gives its solo time and an estimated scale factor, every later co-run
refines its interference sensitivity; it is paired cautiously until known, and the uncertainty is shown."""

from __future__ import annotations

import copy
from datetime import datetime, timezone
from pathlib import Path

import pytest
from test_real_node_model import store_local, window

from env.calibration.learned import KNOWN_AFTER, parallel_from_speedup, planning_model
from env.calibration.store import CalibrationStore
from env.node.discover import local_node_id
from env.sim.nodes import load_node
from profiler.interference import PlacementRecord, RunRecord
from profiler.models import Profile
from profiler.store import ProfileStore
from service.cli import main
from service.planning import plan_window, provider_for

CPUS = load_node("local").cpus
pytestmark = pytest.mark.skipif(len(CPUS) < 2, reason="co-runs need two CPUs")  # every machine of the project has 2+


@pytest.fixture(scope="module")
def fitted(calibrated_local: dict) -> dict:
    return copy.deepcopy(calibrated_local)


@pytest.fixture()
def home(fitted: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COSCHED_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COSCHED_MODELS_DIR", str(tmp_path / "none"))
    store_local(fitted)
    return tmp_path / "home"


def first_run(name: str, wall_s: float, busy_cpus: float) -> None:
    """What ``cosched run`` stores of a job without a profile: its solo run on the whole node (no one-core run)."""
    ProfileStore().put(Profile(name=name, node_id=local_node_id(), command=[f"/bin/{name}"], wall_s=wall_s,
                               counters={"task-clock": wall_s * busy_cpus * 1000.0, "duration_time": wall_s * 1e9},
                               created_at=datetime.now(timezone.utc)))


def co_runs(pairs: list[tuple[str, str, float, float]]) -> None:
    """Co-runs as ``cosched run`` keeps them: each job on one CPU of its own, its measured time."""
    CalibrationStore().add(local_node_id(), [
        RunRecord(kind="corun", group=[PlacementRecord(job=a, cpus=[CPUS[0]]), PlacementRecord(job=b, cpus=[CPUS[1]])],
                  times_s=[ta, tb], node_seconds=max(ta, tb)) for a, b, ta, tb in pairs], "run")


def learned(name: str):  # noqa: ANN201
    got = planning_model(local_node_id())
    assert got is not None
    return next(lj for lj in got[2] if lj.name == name)


def test_the_first_production_run_is_the_profile(home: Path) -> None:
    first_run("serial", 2.0, 1.0)
    first_run("wide", 2.0, len(CPUS) * 0.95)
    s, w = learned("serial"), learned("wide")
    assert s.scale_factor == pytest.approx(1.0) and s.scale_source == "estimated"
    assert w.scale_factor == pytest.approx(len(CPUS) * 0.95) and w.scale_source == "estimated"
    assert s.coruns == 0 and not s.known and "no co-run yet" in s.describe()
    model = planning_model(local_node_id())[1]
    job = next(j for j in model.jobs if j.name == "serial")
    assert job.params.parallel == pytest.approx(0.0) and job.suite == "learned"
    assert parallel_from_speedup(len(CPUS), len(CPUS)) == pytest.approx(1.0)


def test_co_runs_refine_its_sensitivity_and_it_is_cautious_until_known(home: Path) -> None:
    first_run("light", 2.0, 1.0)
    first_run("heavy", 2.0, 1.0)
    first_run("other", 3.0, 1.0)
    prior = learned("light").intensity
    co_runs([("light", "other", 2.0, 3.0)])  # no slowdown at all: light uses little memory
    one = learned("light")
    assert one.coruns == 1 and one.fitted_intensity < prior and one.intensity > one.fitted_intensity  # cautious
    co_runs([("light", "other", 2.0, 3.0)] * (KNOWN_AFTER - 1) + [("heavy", "other", 3.6, 4.5)] * KNOWN_AFTER)
    lt, hv = learned("light"), learned("heavy")
    assert lt.known and lt.intensity == lt.fitted_intensity < prior and lt.error_pct < 5
    assert hv.known and hv.fitted_intensity > lt.fitted_intensity  # slowed down: it is the heavier one
    assert f"{KNOWN_AFTER} co-runs" in lt.describe()


def test_plans_carry_each_learned_programs_uncertainty(home: Path) -> None:
    first_run("serial-a", 2.0, 1.0)
    first_run("serial-b", 3.0, 1.0)
    plan = plan_window(window(("serial-a", "serial-b", "EP", "MG")), load_node("local"), policy="greedy")
    assert plan.no_prediction is None and plan.predicted_throughput_vs_timeshare is not None
    assert "serial-a: 0 co-runs, cautious" in plan.predictions_source


def test_jobs_lists_this_nodes_programs_with_their_uncertainty(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    first_run("serial-a", 2.0, 1.0)
    co_runs([("serial-a", "EP", 2.0, 1.0)])
    assert main(["jobs", "--backend", "real", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    by = {j["name"]: j for j in doc["jobs"]}
    assert by["serial-a"]["source"] == "learned" and by["serial-a"]["coruns"] == 1 and not by["serial-a"]["known"]
    assert by["EP"]["source"] == "calibrated"
    assert main(["jobs", "--backend", "real"]) == 0
    out = capsys.readouterr().out
    assert "serial-a" in out and "cautious" in out


def test_on_this_node_no_plan_is_kept_below_a_baselines_prediction(home: Path) -> None:
    """Two light single-threaded programs (known from co-runs that slowed neither): greedy pairs them; a plan the
    node's model predicts below greedy's (random plans here) is replaced, saying by what and why."""
    first_run("light-a", 2.0, 1.0)
    first_run("light-b", 2.0, 1.0)
    co_runs([("light-a", "light-b", 2.0, 2.0)] * KNOWN_AFTER)
    local = load_node("local")
    w = window(("light-a", "light-b", "light-a", "light-b", "light-a", "light-b"), cmax=2)
    greedy = plan_window(w, local, policy="greedy").predicted_throughput_vs_timeshare
    assert greedy is not None and greedy > 1.1
    replaced = 0
    for seed in range(8):
        plan = plan_window(w, local, policy="random", seed=seed)
        assert plan.predicted_throughput_vs_timeshare >= greedy / 1.01 - 0.02  # predicted: the guard's, then relabelled
        if plan.requested_policy == "random":
            replaced += 1
            assert plan.policy != "random" and "replaced by" in plan.fallback_reason
    assert replaced >= 1


def test_a_searched_plan_within_the_models_error_of_greedys_is_replaced_by_greedys(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan searched on the real node's model (here greedy's own pairs, relabelled, two like jobs swapped so that
    its groups differ and its prediction does not) is not predicted better than greedy's by more than the model's
    held-out error: greedy's plan is taken, saying why. Without that error (REAL_MARGIN alone) it was kept."""
    import env.planners.guard as guard
    from env.planners.baselines import PlanContext
    from env.planners.scoring import model_node

    first_run("light-a", 2.0, 1.0)
    first_run("light-b", 2.0, 1.0)
    co_runs([("light-a", "light-b", 2.0, 2.0)] * KNOWN_AFTER)
    local = load_node("local")
    w = window(("light-a", "light-b", "light-a", "light-b"), cmax=2)
    greedy = plan_window(w, local, policy="greedy")
    assert greedy.policy == "greedy" and greedy.fallback_reason is None
    a, b = greedy.groups[0].jobs, greedy.groups[1].jobs
    k = next(i for i, x in enumerate(b) if x.profile == a[0].profile)  # its like in the other group
    swapped = [greedy.groups[0].model_copy(update={"jobs": [b[k].model_copy(update={"cpus": a[0].cpus}), *a[1:]]}),
               greedy.groups[1].model_copy(update={"jobs": [*b[:k], a[0].model_copy(update={"cpus": b[k].cpus}),
                                                            *b[k + 1:]]}), *greedy.groups[2:]]
    searched = greedy.model_copy(update={"policy": "agent-search", "groups": swapped,
                                         "predicted_throughput_vs_timeshare": None, "predictions_source": None})
    ctx = PlanContext(node=local, provider=provider_for(local))
    assert guard.model_uncertainty(model_node(local)) > 0
    got = guard.guard_plan(searched, w, ctx)
    assert got.policy == "greedy" and got.requested_policy == "agent-search"
    assert "within the node model's error" in got.fallback_reason and "replaced by 'greedy'" in got.fallback_reason
    same = greedy.model_copy(update={"policy": "agent-search"})  # the search found greedy's own plan: kept as it is
    assert guard.guard_plan(same, w, ctx).fallback_reason is None
    monkeypatch.setattr(guard, "model_uncertainty", lambda node: 0.0)
    kept = guard.guard_plan(searched, w, ctx)
    assert kept.policy == "agent-search" and kept.fallback_reason is None


def test_decisions_on_the_real_nodes_model_allow_for_its_held_out_error(home: Path, fitted: dict) -> None:
    from env.calibration.learned import model_uncertainty, scoring_node
    from env.planners.continuous import Rollout

    real = scoring_node(load_node("local"))
    assert real is not None
    p90 = fitted["provenance"]["heldout"]["p90_abs_error_pct"]
    assert p90 > 0 and model_uncertainty(real) == pytest.approx(p90 / 100.0)
    assert model_uncertainty(load_node("sim:reference")) == 0.0  # a simulated node is its own model
    pol = Rollout()
    pol.reset(real, [], 2)
    assert pol.margin == pytest.approx(p90 / 100.0)


def test_a_measured_scale_factor_is_bounded_by_the_cpus_the_solo_run_kept_busy() -> None:
    from env.calibration.learned import speedup_of

    def prof(scale: float | None, busy: float) -> Profile:
        return Profile(name="p", node_id=local_node_id(), command=["/bin/p"], wall_s=5.0, scale_factor=scale,
                       one_core_s=5.0 * scale if scale else None,
                       counters={"task-clock": 5000.0 * busy, "duration_time": 5e9},
                       created_at=datetime.now(timezone.utc))

    assert speedup_of(prof(1.06, 1.0), 2) == (pytest.approx(1.02), "measured")  # one busy CPU: no 6 % gain
    assert speedup_of(prof(1.9, 1.95), 2) == (pytest.approx(1.9), "measured")  # both busy: as measured
    assert speedup_of(prof(None, 1.5), 2) == (pytest.approx(1.5), "estimated")


def test_after_enough_co_runs_a_program_takes_the_character_they_fit_best(home: Path) -> None:
    """A new program that behaves like one calibrated program (its co-runs made by the model with that program's
    character; not the median program's, which is the guess on a node without hardware counters): before
    SHAPE_AFTER co-runs it keeps the guess; after, it takes that character, and the model predicts its co-runs."""
    from env.calibration.learned import SHAPE_AFTER, Learner
    from env.sim.probes import GroupModel
    from env.measure.probing import Placement

    first_run("mystery", 2.0, 1.0)
    base = planning_model(local_node_id())[1]
    learner = Learner(base.model_copy(update={"jobs": [j for j in base.jobs if j.suite != "learned"]}))
    guess = learner.template.name
    partners = [j.name for j in learner.model.jobs]
    truths = []
    for j in learner.model.jobs:  # the character most unlike the guess's on these partners
        if j.name == guess:
            continue
        p = learner.params("mystery", 2.0, 0.0, learner.k_median, j.params)
        gm = GroupModel(learner.model.node, learner.model.params, {**learner.model.job_params(), "mystery": p},
                        learner.model.probe)
        times = [gm.times([Placement("mystery", (CPUS[0],)), Placement(q, (CPUS[1],))])[0] for q in partners]
        truths.append((j.name, times))
    g = learner.params("mystery", 2.0, 0.0, learner.k_median)
    gm = GroupModel(learner.model.node, learner.model.params, {**learner.model.job_params(), "mystery": g},
                    learner.model.probe)
    guessed = [gm.times([Placement("mystery", (CPUS[0],)), Placement(q, (CPUS[1],))])[0] for q in partners]
    like, times = max(truths, key=lambda t: sum(abs(a[0] / b[0] - 1) for a, b in zip(t[1], guessed)))
    runs = [(("mystery", q, t[0], t[1])) for q, t in zip(partners, times)]
    co_runs((runs * SHAPE_AFTER)[:SHAPE_AFTER - 1])
    assert learned("mystery").like is None
    co_runs((runs * SHAPE_AFTER)[SHAPE_AFTER - 1:SHAPE_AFTER])
    got = learned("mystery")
    # A character that, with its own fitted intensity and parallel fraction, predicts the co-runs: the one they were
    # made with, or another that fits them as well (the fit keeps the guess on ties). Which one depends on the node:
    # on a machine whose discovered L3 is 260 MB the guess, refitted, predicts co-runs made with the most unlike
    # character to 0.016 %, so only the fit, not the name, is asserted here.
    assert got.coruns == SHAPE_AFTER and got.like in {guess, *dict(truths)} and got.error_pct < 1.0
    assert f"its character {got.like}'s" in got.describe()


def test_after_enough_co_runs_a_program_takes_the_parallel_fraction_they_fit_best(home: Path) -> None:
    """A first run that kept every CPU busy estimates a perfectly parallel program; its co-runs on one CPU each ran as a
    program whose parallel fraction is 0.6 of that (made by the model). From SHAPE_AFTER co-runs on, the model takes
    0.6 and predicts them; before, the estimate stands."""
    from env.calibration.learned import SHAPE_AFTER, Learner
    from env.measure.probing import Placement
    from env.sim.probes import GroupModel

    first_run("spinner", 2.0, float(len(CPUS)))
    model = planning_model(local_node_id())[1]
    est = next(j.params for j in model.jobs if j.name == "spinner")
    assert est.parallel == pytest.approx(1.0)
    learner = Learner(model.model_copy(update={"jobs": [j for j in model.jobs if j.suite != "learned"]}))
    truth = learner.params("spinner", 2.0, 0.6, learner.grid[len(learner.grid) // 2])  # a value the fit tries
    gm = GroupModel(learner.model.node, learner.model.params, {**learner.model.job_params(), "spinner": truth},
                    learner.model.probe)
    partners = [j.name for j in learner.model.jobs]
    runs = [("spinner", q, *gm.times([Placement("spinner", (CPUS[0],)), Placement(q, (CPUS[1],))])[0])
            for q in partners]
    co_runs((runs * SHAPE_AFTER)[:SHAPE_AFTER - 1])
    before = next(j.params for j in planning_model(local_node_id())[1].jobs if j.name == "spinner")
    assert before.parallel == pytest.approx(1.0)
    co_runs((runs * SHAPE_AFTER)[SHAPE_AFTER - 1:SHAPE_AFTER])
    after = next(j.params for j in planning_model(local_node_id())[1].jobs if j.name == "spinner")
    assert after.parallel == pytest.approx(0.6) and learned("spinner").error_pct < 1.0


def test_a_program_is_learned_from_continuous_runs_as_from_groups(home: Path) -> None:
    """Continuous runs' jobs start when CPUs free, so they overlap only in part; the model learns a new program from
    them all the same: its co-runs (made by the model with a known sensitivity, each partner starting a third of the
    way into its run) are kept as ``cosched run --mode continuous`` keeps them, count as co-runs, and the fit finds
    that sensitivity again."""
    from env.calibration.learned import Learner
    from env.calibration.runs import online_records
    from env.measure.probing import Placement
    from env.sim.probes import GroupModel, timeline_times

    first_run("stagger", 2.0, 1.0)
    model = planning_model(local_node_id())[1]
    learner = Learner(model.model_copy(update={"jobs": [j for j in model.jobs if j.suite != "learned"]}))
    k = learner.grid[len(learner.grid) - 3]  # a heavy value the fit tries, far from the cautious prior
    truth = learner.params("stagger", 2.0, 0.0, k)
    gm = GroupModel(learner.model.node, learner.model.params, {**learner.model.job_params(), "stagger": truth},
                    learner.model.probe)
    records = []
    for q in [j.name for j in learner.model.jobs]:
        group, starts = [Placement("stagger", (CPUS[0],)), Placement(q, (CPUS[1],))], [0.0, 0.7]
        times = [2.0, 2.0]
        for _ in range(50):  # the times that the model itself would measure (a fixed point of the timeline)
            times = timeline_times(gm, group, starts, times)
        records += online_records([("stagger", [CPUS[0]], None, 10.0, 10.0 + times[0]),
                                   (q, [CPUS[1]], None, 10.7, 10.7 + times[1])], simulated=True)
    assert all(r.start_s == [0.0, 0.7] for r in records)
    CalibrationStore().add(local_node_id(), records, "run")
    got = learned("stagger")
    assert got.coruns == len(records) and got.fitted_intensity == pytest.approx(k) and got.error_pct < 1.0


def test_the_fit_predicts_once_what_the_fitted_program_cannot_move_and_finds_the_same_answer(home: Path) -> None:
    """The fit shares solves between the values it tries and predicts once the jobs of a continuous run that never
    ran beside the fitted program (``Learner._timeline``); its losses, values and errors are those of predicting every
    record afresh for every value."""
    import math

    from env.calibration.calibrate import to_placement
    from env.calibration.learned import Learner
    from env.calibration.runs import online_records

    first_run("fitme", 2.0, 1.0)
    model = planning_model(local_node_id())[1]
    learner = Learner(model.model_copy(update={"jobs": [j for j in model.jobs if j.suite != "learned"]}))
    a, b = (j.name for j in learner.model.jobs[:2])
    jobs = {**learner.model.job_params(), "fitme": learner.params("fitme", 2.0, 0.0, learner.k_high)}
    records = online_records([(a, [CPUS[0]], None, 0.0, 2.5), ("fitme", [CPUS[1]], None, 0.5, 3.0),
                              (b, [CPUS[0]], None, 2.5, 5.0), (a, [CPUS[1]], None, 3.0, 6.0),
                              (b, [CPUS[0]], None, 5.0, 7.5)], simulated=True)
    assert len(records) == 1 and records[0].start_s is not None
    records += online_records([("fitme", [CPUS[0]], None, 10.0, 12.4), (b, [CPUS[1]], None, 10.0, 12.0)], True)

    def plain(k: float) -> float:
        gm = learner.GroupModel(learner.model.node, learner.model.params,
                                {**jobs, "fitme": learner.params("fitme", 2.0, 0.0, k)}, learner.model.probe)
        return sum(math.log(t / m) ** 2 for r in records
                   for t, m in zip(gm.times_as_run([to_placement(p) for p in r.group], r.start_s, r.times_s), r.times_s))

    k, err, loss, _ = learner._fit("fitme", 2.0, 0.0, records, jobs)
    losses = {g: plain(g) for g in learner.grid}
    assert loss == pytest.approx(min(losses.values()), rel=1e-12) and k == min(losses, key=losses.get)
    fixed = learner.fixed[id(records[0])]
    assert set(fixed) == {3, 4}  # the jobs that started after fitme's end, on CPUs it had not shared with them
    k2, err2, loss2, _ = learner._fit("fitme", 2.0, 0.0, records, jobs)  # again, from what the first fit kept
    assert (k2, err2, loss2) == (k, err, loss)


def _truthful_coruns(name: str, solo: float, k: float, first_s: float) -> None:
    """``name``'s first run took ``first_s``; its co-runs (each calibrated program twice, one CPU each) are what the
    node model makes of it with solo time ``solo`` and intensity ``k``."""
    from env.calibration.learned import Learner
    from env.measure.probing import Placement
    from env.sim.probes import GroupModel

    first_run(name, first_s, 1.0)
    model = planning_model(local_node_id())[1]
    learner = Learner(model.model_copy(update={"jobs": [j for j in model.jobs if j.suite != "learned"]}))
    gm = GroupModel(learner.model.node, learner.model.params,
                    {**learner.model.job_params(), name: learner.params(name, solo, 0.0, k)}, learner.model.probe)
    pairs = []
    for q in [j.name for j in learner.model.jobs] * 2:
        t = gm.times([Placement(name, (CPUS[0],)), Placement(q, (CPUS[1],))])[0]
        pairs.append((name, q, t[0], t[1]))
    co_runs(pairs)


def test_a_first_run_that_its_co_runs_contradict_gives_way_to_them(home: Path) -> None:
    """One run alone is one sample of a shared node's speed: a first run 40 % slow (the node busy with other work)
    made every co-run look 40 % faster than the model said. Once the program's shape is fitted, its solo time moves
    to what its co-runs say and the model predicts them again; a first run they agree with is kept as it was."""
    from env.calibration.learned import SOLO_BIAS, Learner

    model = planning_model(local_node_id())[1]
    grid = Learner(model.model_copy(update={"jobs": [j for j in model.jobs if j.suite != "learned"]})).grid
    _truthful_coruns("slowfirst", 2.0, grid[len(grid) // 2], 2.8)
    _truthful_coruns("rightfirst", 2.0, grid[len(grid) // 2], 2.0)
    slow, right = learned("slowfirst"), learned("rightfirst")
    assert slow.first_run_s == pytest.approx(2.8) and slow.solo_s == pytest.approx(2.0, rel=0.03)
    assert slow.error_pct < SOLO_BIAS * 100 / 3 and "its first run took 2.8 s" in slow.describe()
    assert right.first_run_s is None and right.solo_s == 2.0 and right.error_pct < 1.0
    job = next(j for j in planning_model(local_node_id())[1].jobs if j.name == "slowfirst")
    assert "from them, its first run took" in job.character
    from service.commands.jobs import real_document

    rows = {r["name"]: r for r in real_document()["jobs"]}  # cosched jobs --backend real: the solo time the model uses
    assert rows["slowfirst"]["solo_s"] == slow.solo_s and rows["slowfirst"]["first_run_s"] == pytest.approx(2.8)
    assert rows["rightfirst"]["solo_s"] == 2.0 and rows["rightfirst"]["first_run_s"] is None


def test_a_window_with_a_program_not_yet_known_is_not_planned_in_groups_on_its_prior(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A program with fewer than 3 co-runs is paired as a heavy memory user (a prior); a groups plan whose advantage
    over continuous rests on that prior (here: predicted far shorter) is not taken on a real node: continuous, which
    falls back to packing, and the plan says which programs are not yet known. Once they are, the model decides."""
    import service.planning as planning

    first_run("fresh", 2.0, 1.0)
    node = load_node("local")
    w = window(("EP", "fresh", "MG", "CG"))
    groups = planning.plan_window(w, node)
    g_s = sum(g.predicted_makespan_s for g in groups.groups)
    cont = planning.plan_continuous(w, node)
    monkeypatch.setattr(planning, "plan_continuous",
                        lambda *a, **k: cont.model_copy(update={"predicted_makespan_s": g_s * 3.0}))
    chosen = planning.choose_mode(w, node, groups)
    assert chosen.mode == "continuous" and "knows fresh from fewer than 3 co-runs" in chosen.mode_reason
    co_runs([("fresh", "EP", 2.0, 1.0), ("fresh", "MG", 2.0, 1.0), ("fresh", "CG", 2.0, 1.0)])
    assert learned("fresh").known
    chosen = planning.choose_mode(w, node, groups)
    assert chosen.mode == "groups" and "by more than the node model's error" in chosen.mode_reason


def test_what_was_learned_is_kept_for_the_next_command_until_what_it_was_learned_from_changes(home: Path) -> None:
    """Each command is a process of its own: the learned programs are kept beside the node's model and read back
    (the same model, to the bit) while the model, the profiles, the runs and the learner's code are unchanged; a new
    co-run makes them learned again; a damaged file is learned again, never an error."""
    from env.calibration import learned as lp

    first_run("kept", 2.0, 1.0)
    co_runs([("kept", "EP", 2.4, 1.0)])
    fresh = lp.planning_model(local_node_id())
    path = lp.learned_cache_path(local_node_id())
    assert path.exists() and path.parent == lp.model_path(local_node_id()).parent
    calls = []
    real = lp.Learner.learn
    lp.Learner.learn = lambda self, *a: calls.append(1) or real(self, *a)  # type: ignore[method-assign]
    try:
        lp._planning_model.cache_clear()  # as a new process
        again = lp.planning_model(local_node_id())
        assert not calls and again[1] == fresh[1] and again[2] == fresh[2]
        co_runs([("kept", "MG", 2.6, 1.0)])
        assert lp.planning_model(local_node_id())[2] != fresh[2] and calls == [1]
        for damaged in ("{not json", "[]", '{"key": 1}'):
            path.write_text(damaged)
            lp._planning_model.cache_clear()
            assert lp.planning_model(local_node_id())[2][0].coruns == 2
        assert calls == [1, 1, 1, 1]
    finally:
        lp.Learner.learn = real  # type: ignore[method-assign]
    model_file = str(lp.model_path(local_node_id()))
    shipped, key = lp.SOLO_BIAS, lp._learned_key(model_file, [], [])
    lp.SOLO_BIAS = float("inf")  # an ablation's setting is a different fit, not the kept one
    try:
        assert lp._learned_key(model_file, [], []) != key
    finally:
        lp.SOLO_BIAS = shipped
