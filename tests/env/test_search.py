"""agent-guided search (env.planners.search, the agent-search policy) and the time-sharing guard, on the simulated node.

The agent is the model that ships for sim:reference (numpy inference); every figure is simulated (predicted).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from env.sim.backend import SimBackend
from env.planners.baselines import GroupEvaluator, PlanContext
from env.planners.registry import get_policy
from env.episode.window import Episode
from env.episode.gym_env import _window_jobs
from env.episode.jobinfo import sim_provider
from env.plan.models import Window, WindowJob
from env.sim.nodes import load_node
from env.planners.localsearch import CALLS_PER_ROLLOUT
from env.planners.guard import guard_plan
from env.planners.scoring import node_scorer, predicted_throughput
from env.planners.search import FunctionScores, episode_makespans, search_chunk

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "training" / "models" / "sim-reference.npz"
NODE = "sim:reference"
WINDOWS = [
    (["MG", "EP", "CG", "FT", "IS", "lu_cb", "fft", "SP"], 2),
    (["barnes", "BT", "ocean_cp", "EP", "water_nsquared", "MG"], 3),
    (["CG", "raytrace", "FT", "DC"], 4),
]


def window(names: list[str], cmax: int) -> Window:
    return Window(jobs=[WindowJob(id=f"{n}-{i}", profile=n) for i, n in enumerate(names)], max_concurrency=cmax)


def solo(names: list[str]) -> float:
    prov = sim_provider(load_node(NODE))
    return sum(prov.get(n).solo_s for n in names)


@pytest.fixture(scope="module")
def policies():
    if not MODEL.exists():
        pytest.skip("no model ships for sim:reference")
    from service.planning import provider_for
    from training.policies import AgentPolicy
    from training.search_policy import AgentSearchPolicy

    node = load_node(NODE)
    agent = AgentPolicy(str(MODEL))
    ctx = PlanContext(node=node, provider=provider_for(node, agent.pipeline(node)))
    return agent, lambda budget: AgentSearchPolicy(str(MODEL), budget), ctx


@pytest.mark.parametrize("names, cmax", WINDOWS, ids=["w8c2", "w6c3", "w4c4"])
def test_search_is_never_worse_than_the_agent_and_predicts_right(policies, names: list[str], cmax: int) -> None:
    agent, searching, ctx = policies
    w = window(names, cmax)
    sim = SimBackend(ctx.node)
    agent_thr = solo(names) / sum(sim.evaluate(agent.plan(w, ctx)))
    plan = searching(8).plan(w, ctx)
    searched = solo(names) / sum(sim.evaluate(plan))
    assert searched >= agent_thr - 1e-9
    assert plan.policy == "agent-search" and plan.search is not None and plan.search.rollouts >= 1
    assert plan.search.agent_predicted_throughput_vs_timeshare == pytest.approx(agent_thr)
    assert plan.predicted_throughput_vs_timeshare == pytest.approx(searched)  # the search's prediction is the sim's
    assert [g.predicted_makespan_s for g in plan.groups] == pytest.approx(sim.evaluate(plan))


def test_every_budget_beats_the_agent_and_keeps_to_its_work(policies) -> None:
    _, searching, ctx = policies
    w = window(*WINDOWS[0])
    plans = [searching(b).plan(w, ctx) for b in (1, 4, 16)]
    thr = [p.predicted_throughput_vs_timeshare for p in plans]
    agent = plans[0].search.agent_predicted_throughput_vs_timeshare
    assert all(t >= agent - 1e-12 for t in thr)  # never worse than the agent alone, whatever the budget
    assert [p.search.rollouts for p in plans] == [1, 4, 16]
    assert all(0 < p.search.local_calls <= CALLS_PER_ROLLOUT * b for p, b in zip(plans, (1, 4, 16)))
    assert thr[2] >= agent  # the agent's plan (the group-cost head's) is the first rollout
    # guided by the actor alone (the model without its group-cost head: a weaker guide) the search earns its keep
    import dataclasses

    from agent.modelfile import load_set_model
    from training.search_policy import AgentSearchPolicy

    actor_only = dataclasses.replace(load_set_model(MODEL), group_params=None)
    plan = AgentSearchPolicy(actor_only, 16).plan(w, ctx)
    assert plan.predicted_throughput_vs_timeshare > plan.search.agent_predicted_throughput_vs_timeshare + 0.05  # 1.17 -> 1.26


@pytest.mark.parametrize("budget", [4, 40])
def test_rollouts_scored_in_one_pass_plan_as_scored_state_by_state(policies, budget: int) -> None:
    """With the head choosing, a rollout's states are scored after it in one batched pass of the actor; the plans
    are those of scoring each state as it is visited (the batch's float32 sums differ by ulps only)."""
    from env.planners.agent_search import search_plan
    from env.planners.scoring import clear_evaluators, node_scorer
    from training.search_policy import SetPolicyScores

    _, searching, ctx = policies
    pol = searching(budget)
    for names, cmax in WINDOWS:
        w = window(names, cmax)
        batched = pol.plan(w, ctx).model_dump_json()
        m, planned, ref, size = pol.prepare(w, ctx.node)
        scores = SetPolicyScores(pol.agent_chooser(m))
        assert scores.batched
        scores.batched = False  # every state scored as it is visited
        clear_evaluators()
        one_by_one = search_plan(planned, ctx, scores, node_scorer(ctx.node), budget=budget, window_size=size, model=ref)
        assert one_by_one.model_dump_json() == batched


def test_the_same_window_gives_the_same_plan(policies) -> None:
    """The budget counts rollouts, not time: fresh policies and a cold evaluator give the identical plan."""
    from env.planners.scoring import clear_evaluators

    _, searching, ctx = policies
    w = window(*WINDOWS[1])
    first = searching(6).plan(w, ctx).model_dump_json()
    clear_evaluators()
    assert searching(6).plan(w, ctx).model_dump_json() == first


def test_the_search_expands_the_agents_near_misses() -> None:
    """A toy agent whose greedy plan is bad: the search's budget is spent in rollouts, and it finds better plans."""
    node = load_node(NODE)
    prov = sim_provider(node)
    names = ["MG", "EP", "CG", "FT"]
    infos = [prov.get(n) for n in names]
    ev = GroupEvaluator(node)

    def fresh() -> Episode:
        return Episode(node, _window_jobs(names), infos, max_concurrency=2, window_size=4, n_features=prov.n_features)

    scores = FunctionScores(lambda mask, ep: -np.arange(mask.size, dtype=np.float64))  # a poor, deterministic agent

    one = search_chunk(fresh, scores, ev.makespan, budget=1, pairs=False, local=False)
    many = search_chunk(fresh, scores, ev.makespan, budget=40, pairs=False, local=False)
    assert one.rollouts == 1 and many.rollouts == 40
    assert one.total_s == one.agent_total_s and many.agent_total_s == one.total_s
    assert many.total_s < one.total_s
    assert search_chunk(fresh, scores, ev.makespan, budget=40).total_s <= many.total_s  # pairs, local search only add
    assert search_chunk(fresh, scores, ev.makespan, budget=1, pairs=False).total_s < one.total_s  # the local search
    replayed = fresh()
    for a in many.actions:
        replayed.step(a)
    assert replayed.done and episode_makespans(replayed, ev.makespan) == many.makespans


def test_a_plan_below_time_sharing_is_replaced_and_says_why() -> None:
    from service.planning import plan_window

    node = load_node(NODE)
    w = window(["MG", "EP"], 4)
    ctx = PlanContext(node=node, provider=sim_provider(node))
    raw = get_policy("greedy").plan(w, ctx)
    raw_thr, _ = predicted_throughput(raw, node, solo(["MG", "EP"]))
    assert raw_thr < 1.0  # greedy's pair is slower than running the two one after the other (simulated)
    plan = plan_window(w, load_node(NODE), policy="greedy")
    assert plan.requested_policy == "greedy" and plan.policy in ("pairs", "timeshare")
    assert "below time sharing" in plan.fallback_reason and f"{raw_thr:.3f}" in plan.fallback_reason
    assert plan.predicted_throughput_vs_timeshare >= 1.0
    # a plan at or above time sharing is kept as it is, with its prediction
    good = plan_window(window(["EP", "MG", "CG"], 2), load_node(NODE), policy="pairs")
    assert good.requested_policy is None and good.fallback_reason is None


@pytest.mark.parametrize("policy", ["fifo", "random", "greedy", "agent", "agent-search"])
def test_no_policy_plans_below_time_sharing(policy: str) -> None:
    from service.planning import plan_window

    if policy in ("fifo", "agent", "agent-search") and not MODEL.exists():
        pytest.skip("no model ships for sim:reference")
    for names, cmax in WINDOWS:
        plan = plan_window(window(names, cmax), load_node(NODE), policy=policy, seed=1)
        sim_thr = solo(names) / sum(SimBackend(load_node(NODE)).evaluate(plan))
        assert sim_thr >= 1.0 - 1e-9 and plan.predicted_throughput_vs_timeshare == pytest.approx(sim_thr)
        assert (plan.policy == policy) == (plan.fallback_reason is None)


def test_without_a_node_model_the_plan_says_there_is_no_prediction(fake_sysroot_or_local) -> None:
    from service.planning import plan_window

    plan = plan_window(window(["MG"], 2), load_node("local"), policy="greedy")
    assert plan.predicted_throughput_vs_timeshare is None and "no node model" in plan.no_prediction
    assert node_scorer(load_node("local")) is None


@pytest.fixture
def fake_sysroot_or_local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COSCHED_HOME", str(tmp_path))  # an empty profile store: nothing of the user's is read


@pytest.mark.parametrize("value", ["0", "-3", "x", "1.5", "10001"])
def test_a_bad_search_budget_is_one_line(value: str, tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"jobs": [{"id": "MG"}]}))
    out = subprocess.run([sys.executable, "-m", "service.cli", "schedule", str(path), "--node", NODE, "--policy",
                          "agent-search", "--search-budget", value], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and "--search-budget" in out.stderr
    assert "Traceback" not in out.stderr


def test_guard_leaves_time_sharing_alone() -> None:
    node = load_node(NODE)
    ctx = PlanContext(node=node, provider=sim_provider(node))
    w = window(["MG", "EP"], 2)
    plan = get_policy("timeshare").plan(w, ctx)
    assert guard_plan(plan, w, ctx) is plan  # no prediction, no fallback planned


def test_eval_compares_agent_search_and_says_who_made_a_replaced_plan(tmp_path: Path) -> None:
    if not MODEL.exists():
        pytest.skip("no model ships for sim:reference")
    ws = tmp_path / "ws.json"
    ws.write_text(json.dumps([{"jobs": [{"id": "MG"}, {"id": "EP"}], "max_concurrency": 2}]))
    out = subprocess.run([sys.executable, "-m", "service.cli", "eval", "--windows", str(ws), "--policies",
                          "greedy,agent-search,timeshare", "--search-budget", "4", "--json"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    results = doc["windows"][0]["results"]
    assert doc["guarded"] is True and all(r["throughput_vs_timeshare"] >= 1.0 - 1e-9 for r in results.values())
    assert results["greedy"]["made_by"] in ("pairs", "timeshare")  # greedy's own pair is below time sharing


def test_sparse_recombination_matches_the_subset_dp_and_gives_up_past_its_bound() -> None:
    """A long chunk (a set model's, > 10 jobs) is recombined over the groups seen only: the same optimum as the
    3^W subset DP where both run, None (the best rollout stands) when the work cap is reached."""
    import random

    from env.planners.partitions import best_partition
    from env.planners.search import sparse_partition

    rng = random.Random(3)
    n = 9
    full = (1 << n) - 1
    for _ in range(20):
        sub = {1 << i: rng.uniform(5, 10) for i in range(n)}  # singles: a partition always exists
        for _ in range(25):
            m = sum(1 << i for i in rng.sample(range(n), rng.randint(2, 4)))
            sub[m] = rng.uniform(4, 16)
        total, masks = sparse_partition(sub, full)
        want, _ = best_partition(sub, full)
        assert total == pytest.approx(want) and sum(masks) == full and sum(sub[m] for m in masks) == pytest.approx(total)
        assert all(a & b == 0 for i, a in enumerate(masks) for b in masks[i + 1:])
    assert sparse_partition(sub, full, max_steps=3) is None
    assert sparse_partition({0b011: 1.0}, 0b111) is None  # job 2 in no group: no partition
