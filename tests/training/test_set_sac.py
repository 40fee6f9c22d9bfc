"""The set-encoder driver (training/set_sac.py): a short seeded run on a tiny problem finds its optimum and exports a
model the planner loads; the same seed gives the same actor."""

from __future__ import annotations

import json

import numpy as np

from env.evaluate import evaluate
from env.jobinfo import sim_provider
from env.models import Window, WindowJob
from env.nodes import load_node
from training.set_sac import Args, main

JOBS = ("EP", "MG")  # a compute-bound and a bandwidth-bound program: co-running them well gains about 1.47x


def _args(steps: int) -> Args:
    return Args(seed=3, total_steps=steps, windows=(2, 2), cmaxes=(2,), synthetic_jobs=0, jobs=JOBS,
                learning_starts=300, update_every=1, batch_size=64, buffer_size=5_000, eval_every=250, eval_per_cell=1,
                checkpoint_every=1_000, eval_cells=((2, 2),), target_entropy_ratio=0.5, initial_alpha=0.2,
                d_model=16, heads=2, layers=1, d_ff=32, d_head_hidden=32, factored=True)


def test_a_short_seeded_run_finds_the_optimum_of_a_tiny_problem(tmp_path) -> None:
    node = load_node("sim:reference")
    window = Window(jobs=[WindowJob(id=n, profile=n) for n in JOBS], max_concurrency=2)
    best = evaluate([window], node, ["best-found", "greedy"], provider=sim_provider(node))["mean"]
    figs = main(_args(2_500), tmp_path / "run", out=tmp_path / "model.npz", progress=False)
    agent = figs["selected"]["agent"]
    # from 0.37 (random actions) to within 3 % of the search's optimum (1.47), far above greedy (0.73) and time sharing
    assert agent >= 0.97 * best["best-found"], (agent, best)
    assert agent > max(best["greedy"], 1.0) + 0.3
    # the exported model plans the window through the planner's agent policy as the validation did
    from env.baselines import PlanContext
    from training.policies import AgentPolicy

    plan = AgentPolicy(tmp_path / "model.npz").plan(window, PlanContext(node=node, provider=sim_provider(node)))
    assert plan.policy == "agent" and sum(len(g.jobs) for g in plan.groups) == 2
    assert json.loads((tmp_path / "run" / "figures.json").read_text())["selected"]["agent"] == agent


def test_the_same_seed_gives_the_same_actor(tmp_path) -> None:
    for run in ("a", "b"):
        main(_args(500), tmp_path / run, progress=False)
    with np.load(tmp_path / "a" / "best-actor.npz") as a, np.load(tmp_path / "b" / "best-actor.npz") as b:
        assert sorted(a.files) == sorted(b.files) and all(np.array_equal(a[k], b[k]) for k in a.files)


def test_a_resumed_run_ends_as_an_uninterrupted_one(tmp_path) -> None:
    import torch

    main(_args(500), tmp_path / "whole", progress=False)
    main(_args(380), tmp_path / "cut", progress=False)  # stops (and checkpoints) after step 380
    main(_args(500), tmp_path / "cut", resume=True, progress=False)
    x = torch.load(tmp_path / "whole" / "checkpoint.pt", weights_only=False)
    y = torch.load(tmp_path / "cut" / "checkpoint.pt", weights_only=False)
    assert x["state"]["step"] == y["state"]["step"] and x["state"]["updates"] == y["state"]["updates"]
    for net in ("actor", "q1", "q2"):
        assert all(torch.equal(x[net][k], y[net][k]) for k in x[net])
    steps = [json.loads(ln)["step"] for ln in (tmp_path / "cut" / "log.jsonl").read_text().splitlines()]
    assert steps == sorted(steps)
