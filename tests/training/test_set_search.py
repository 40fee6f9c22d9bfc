"""agent-search and the sweep with a set-encoder model (``cosched-model/2``): the search is guided by ``SetPolicy``
on set episodes (canonical order, the whole window one chunk), never predicts worse than the set agent alone, and
the CLI, the service's GET /model (tests/service/test_routes.py) and bench/agent_sweep.py take such a model. The
model is a tiny untrained one (``tests/model_support.py``: ``write_tiny_set_model``); every figure is simulated."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from env.sim.backend import SimBackend
from env.planners.baselines import PlanContext
from env.episode.jobinfo import sim_provider
from env.plan.models import Window, WindowJob
from env.sim.nodes import load_node
from env.planners.search import PAIR_MAX_JOBS
from env.sim.catalogue import ALL_JOBS, TRAIN_JOBS
from training.policies import AgentPolicy
from training.search_policy import AgentSearchPolicy

ROOT = Path(__file__).resolve().parents[2]
NODE = load_node("sim:reference")


def _window(names: list[str], cmax: int) -> Window:
    return Window(jobs=[WindowJob(id=f"{n}-{k}", profile=n) for k, n in enumerate(names)], max_concurrency=cmax)


def _throughput(plan) -> float:  # noqa: ANN001
    prov = sim_provider(NODE)
    solo = sum(prov.get(j.profile).solo_s for g in plan.groups for j in g.jobs)
    return solo / sum(SimBackend(NODE).evaluate(plan))


@pytest.mark.parametrize("w, cmax", [(4, 2), (8, 3), (12, 4), (24, 3)])
def test_search_with_a_set_model_is_one_chunk_and_never_worse_than_the_set_agent(tiny_set_model: Path, w: int, cmax: int) -> None:
    ctx = PlanContext(node=NODE, provider=sim_provider(NODE, tuple(TRAIN_JOBS)))
    rng = random.Random(w * 10 + cmax)
    names = [rng.choice(ALL_JOBS) for _ in range(w)]  # repeats allowed: 24 jobs of the 19 programs
    agent = AgentPolicy(tiny_set_model).plan(_window(names, cmax), ctx)
    plan = AgentSearchPolicy(tiny_set_model, budget=6).plan(_window(names, cmax), ctx)
    assert plan.policy == "agent-search" and plan.model is not None and plan.model.id == agent.model.id
    assert plan.search is not None and plan.search.chunks == 1 and plan.search.rollouts >= 1  # any W: one chunk
    # the first rollout is the set agent's own plan: the search's episodes are the set agent's
    assert plan.search.agent_predicted_throughput_vs_timeshare == pytest.approx(_throughput(agent))
    assert _throughput(plan) >= _throughput(agent) - 1e-9
    assert plan.predicted_throughput_vs_timeshare == pytest.approx(_throughput(plan))
    if w <= PAIR_MAX_JOBS:  # rollouts, pair candidates, recombination: strictly better than this untrained agent
        assert _throughput(plan) > _throughput(agent) + 1e-6


def test_search_with_a_set_model_plans_equal_jobs_in_any_order_alike(tiny_set_model: Path) -> None:
    ctx = PlanContext(node=NODE, provider=sim_provider(NODE, tuple(TRAIN_JOBS)))
    names = ["MG", "EP", "CG", "FT", "IS", "SP"]
    shapes = []
    for seed in (0, 1):
        order = random.Random(seed).sample(names, len(names))
        plan = AgentSearchPolicy(tiny_set_model, budget=4).plan(_window(order, 2), ctx)
        shapes.append([sorted((j.profile, tuple(j.cpus)) for j in g.jobs) for g in plan.groups])
    assert shapes[0] == shapes[1]


def test_schedule_cli_plans_with_agent_search_and_a_set_model(tiny_set_model: Path, tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"jobs": [{"id": n} for n in ("MG", "EP", "CG", "FT", "IS")], "max_concurrency": 3}))
    out = subprocess.run([sys.executable, "-m", "service.cli", "schedule", str(path), "--policy", "agent-search",
                          "--model", str(tiny_set_model), "--node", "sim:reference", "--json"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert "agent-search" in (plan["policy"], plan["requested_policy"]) and plan["model"]["trained_for"] == "sim:reference"
    assert sorted(j["id"] for g in plan["groups"] for j in g["jobs"]) == ["CG", "EP", "FT", "IS", "MG"]
    assert plan["predicted_throughput_vs_timeshare"] >= 1.0 - 1e-9  # the guard: never below time sharing


def test_the_sweep_takes_a_set_model(tiny_set_model: Path, tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "agent_sweep.py"), "--model", str(tiny_set_model),
                          "--windows-per-cell", "1", "--ws", "4", "--search-budget", "2", "--png", str(tmp_path / "s.png"),
                          "--json", str(tmp_path / "s.json")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "(simulated) agent / best-found" in out.stdout and "agent-search (budget 2)" in out.stdout
    doc = json.loads((tmp_path / "s.json").read_text())
    assert [(c["W"], c["Cmax"]) for c in doc["cells"]] == [(4, 2), (4, 3), (4, 4)]
    assert all(c["agent_search"] >= c["agent"] - 1e-9 and c["model"] == tiny_set_model.name for c in doc["cells"])
    assert (tmp_path / "s.png").stat().st_size > 0
