"""The set-encoder policy planning real windows (simulated node): every W from 1 to 32 and Cmax from 1 to 4 in one
episode, the same plan whatever the queue order, through the ``agent`` policy of the planner; no import circle in
training/."""

from __future__ import annotations

import ast
import random
from pathlib import Path

import pytest

from env.plan.models import Window, WindowJob
from env.sim.nodes import load_node
from env.sim.catalogue import ALL_JOBS
from training.policies import AgentPolicy

NODE = load_node("sim:reference")


@pytest.fixture(scope="module")
def model(tiny_set_model: Path) -> Path:
    return tiny_set_model


def _ctx():
    from env.planners.baselines import PlanContext
    from env.episode.jobinfo import sim_provider
    from env.sim.catalogue import TRAIN_JOBS

    return PlanContext(node=NODE, provider=sim_provider(NODE, tuple(TRAIN_JOBS)))


def _window(names: list[str], cmax: int, tag: str = "j") -> Window:
    return Window(jobs=[WindowJob(id=f"{tag}{k}", profile=n) for k, n in enumerate(names)], max_concurrency=cmax)


def _shape_of_plan(plan) -> list[list[tuple]]:
    """The plan without job ids: each group's (profile, CPUs, memory, ways, bandwidth), in order."""
    return [[(j.profile, tuple(j.cpus), j.memory, json_of(j.l3), json_of(j.mem_bw_percent)) for j in g.jobs] for g in plan.groups]


def json_of(x) -> str:
    import json

    return json.dumps(x if isinstance(x, dict) else x.model_dump() if hasattr(x, "model_dump") else x, sort_keys=True, default=str)


def test_every_window_size_and_cmax_is_planned_in_one_episode(model) -> None:
    pol, ctx = AgentPolicy(model), _ctx()
    rng = random.Random(1)
    for w in range(1, 33):
        for cmax in (1, 2, 3, 4):
            names = [rng.choice(ALL_JOBS) for _ in range(w)]
            plan = pol.plan(_window(names, cmax), ctx)
            placed = [j.id for g in plan.groups for j in g.jobs]
            assert sorted(placed) == sorted(f"j{k}" for k in range(w))
            assert all(len(g.jobs) <= cmax for g in plan.groups)
            for g in plan.groups:
                cpus = [c for j in g.jobs for c in j.cpus]
                assert len(cpus) == len(set(cpus))


def test_the_same_jobs_in_another_queue_order_give_the_same_plan(model) -> None:
    pol, ctx = AgentPolicy(model), _ctx()
    rng = random.Random(2)
    for w, cmax in ((6, 4), (8, 2), (12, 3), (5, 1)):
        names = [rng.choice(ALL_JOBS) for _ in range(w)]
        first = _shape_of_plan(pol.plan(_window(names, cmax), ctx))
        for _ in range(3):
            shuffled = names[:]
            rng.shuffle(shuffled)
            assert _shape_of_plan(pol.plan(_window(shuffled, cmax, tag="x"), ctx)) == first




def _training_imports() -> dict[str, set[str]]:
    """training module -> the training modules it imports, at the top or inside functions."""
    root = Path(__file__).resolve().parents[2] / "training"
    graph: dict[str, set[str]] = {}
    for p in root.glob("*.py"):
        deps: set[str] = set()
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("training."):
                deps.add(node.module.split(".")[1])
            elif isinstance(node, ast.Import):
                deps |= {a.name.split(".")[1] for a in node.names if a.name.startswith("training.")}
        graph[p.stem] = deps
    return graph


def test_no_import_circle_in_training() -> None:
    graph = _training_imports()
    reach = {}
    for m in graph:  # modules reachable from m
        seen, todo = set(), list(graph[m])
        while todo:
            d = todo.pop()
            if d not in seen:
                seen.add(d)
                todo += graph.get(d, ())
        reach[m] = seen
    in_circle = {m for m in graph if m in reach[m]}
    assert not in_circle, f"modules in an import circle: {sorted(in_circle)}"
