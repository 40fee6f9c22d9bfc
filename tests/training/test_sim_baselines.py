"""Baselines: valid plans (every job once, disjoint CPUs, <= Cmax), time sharing is 1.0, the searches'
predictions are the simulator's, best-found's gap to exhaustive search, the registry's messages."""

from __future__ import annotations

import pytest

from env.planners.baselines import NO_PARTITIONING, GroupEvaluator, Grid, PlanContext, search
from env.planners.registry import get_policy, parse_policies
from env.errors import InputError
from env.episode.jobinfo import sim_provider
from env.plan.models import Plan, Window, WindowJob
from env.sim.nodes import load_node
from env.sim.simulate import simulate_plan
from fractions import Fraction

NODE = load_node("sim:reference")
WINDOWS = [
    (["fmm", "FT", "EP", "fft", "CG", "lu_ncb"], 4),
    (["IS", "MG", "EP", "DC"], 2),
    (["raytrace", "cholesky", "DC", "BT", "fft", "lu_ncb", "MG", "EP"], 3),  # two chunks of W = 6
    (["EP", "MG", "SP"], 1),
]


def window(names, cmax):
    return Window(jobs=[WindowJob(id=f"{n}-{i}", profile=n) for i, n in enumerate(names)], max_concurrency=cmax)


@pytest.fixture(scope="module")
def ctx():
    return PlanContext(node=NODE, provider=sim_provider(NODE), seed=3)


@pytest.mark.parametrize("policy", ["timeshare", "greedy", "random", "pairs", "best-found"])
@pytest.mark.parametrize("names,cmax", WINDOWS[:2] + WINDOWS[3:])
def test_plans_are_valid(ctx, policy, names, cmax):
    plan = get_policy(policy).plan(window(names, cmax), ctx)
    Plan.model_validate(plan.model_dump())
    ids = sorted(j.id for g in plan.groups for j in g.jobs)
    assert ids == sorted(f"{n}-{i}" for i, n in enumerate(names))
    limit = 2 if policy == "pairs" else cmax
    for g in plan.groups:
        assert len(g.jobs) <= min(limit, cmax)
        cpus = [c for j in g.jobs for c in j.cpus]
        assert len(cpus) == len(set(cpus))
    res = simulate_plan(plan, NODE)
    if policy == "timeshare":
        assert res.throughput_vs_timeshare == pytest.approx(1.0)


@pytest.mark.parametrize("policy", ["greedy", "random", "pairs"])
def test_long_windows_are_planned_in_chunks(ctx, policy):
    names, cmax = WINDOWS[2]
    plan = get_policy(policy).plan(window(names, cmax), ctx)
    assert sorted(j.id for g in plan.groups for j in g.jobs) == sorted(f"{n}-{i}" for i, n in enumerate(names))


def test_search_predictions_are_the_simulators(ctx):
    plan = get_policy("pairs").plan(window(*WINDOWS[0]), ctx)
    res = simulate_plan(plan, NODE)
    assert [g.predicted_makespan_s for g in plan.groups] == pytest.approx(res.makespans)
    assert plan.predicted_throughput_vs_timeshare == pytest.approx(res.throughput_vs_timeshare)
    assert plan.predictions_source.startswith("simulated")


def test_best_found_beats_the_others_on_a_window(ctx):
    w = window(["IS", "MG", "EP", "water_spatial"], 4)
    got = {p: simulate_plan(get_policy(p).plan(w, ctx), NODE).throughput_vs_timeshare
           for p in ("timeshare", "greedy", "random", "pairs", "best-found")}
    assert got["best-found"] >= max(got.values()) - 1e-9
    assert got["best-found"] > 1.2


def test_best_found_is_close_to_exhaustive_on_a_small_grid():
    grid = Grid(schedules=(0, 3), cores=(Fraction(1, 4), Fraction(1, 2), Fraction(3, 4)),
                ways=(Fraction(8, 22), Fraction(22, 22)), bw=(40, 100), splits=("balanced",))
    names = ["MG", "EP", "water_spatial"]
    ev = GroupEvaluator(NODE)
    found = search(NODE, names, 3, grid, evaluator=ev)
    exact = search(NODE, names, 3, grid, exhaustive=True, evaluator=ev)
    assert exact.predicted_total_s <= found.predicted_total_s + 1e-9
    assert found.predicted_total_s <= 1.02 * exact.predicted_total_s


def test_random_is_seeded():
    w = window(*WINDOWS[0])
    a = get_policy("random").plan(w, PlanContext(node=NODE, provider=sim_provider(NODE), seed=5))
    b = get_policy("random").plan(w, PlanContext(node=NODE, provider=sim_provider(NODE), seed=5))
    assert a == b


def test_registry_messages():
    with pytest.raises(InputError, match="unknown policy 'nope'"):
        get_policy("nope")
    with pytest.raises(InputError, match="--policies is empty"):
        parse_policies(" , ")
    assert parse_policies("greedy, timeshare,greedy") == ["greedy", "timeshare"]
    for name in ("timeshare", "greedy", "random", "pairs", "best-found"):
        assert get_policy(name).name == name


def test_searches_refuse_a_real_node(ctx):
    local_ctx = PlanContext(node=NODE, provider=ctx.provider, simulated=False)
    with pytest.raises(InputError, match="simulated node"):
        get_policy("best-found").plan(window(["EP", "MG"], 2), local_ctx)
