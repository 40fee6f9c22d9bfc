"""The search as an expert from any state (training.expert) and DAgger labels in training (simulated)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from env.baselines import search
from env.episode import plan_window
from env.jobinfo import sim_provider
from env.models import Window, WindowJob
from env.nodes import load_node
from training.demos import expert_grid
from training.expert import Expert
from training.train import TrainConfig, train

NODE = load_node("sim:reference")


def _window(names, cmax=4) -> Window:
    return Window(jobs=[WindowJob(id=f"{n}-{i}", profile=n) for i, n in enumerate(names)], max_concurrency=cmax)


def test_expert_plays_as_well_as_the_search_on_its_grid() -> None:
    prov = sim_provider(NODE)
    names = ["EP", "MG", "fft", "lu_cb"]
    grid = expert_grid("cores")
    best = search(NODE, names, 4, grid)
    ex = Expert(NODE, grid)
    res = plan_window(_window(names), NODE, prov, lambda o, m, ep: ex.action(ep), policy="expert", window_size=4)
    from env.backend import SimBackend

    total = sum(SimBackend(NODE).evaluate(res.plan, seed=0))
    assert total <= best.predicted_total_s * 1.01


def test_expert_recovers_from_a_wrong_step() -> None:
    """After a deliberately poor first placement the expert still returns valid actions to the end."""
    prov = sim_provider(NODE)
    ex = Expert(NODE, expert_grid("cores"))
    first = []

    def chooser(obs, mask, ep):
        if ep.schedule_index is not None and not first:
            first.append(1)
            return int(np.flatnonzero(mask[:256])[0])  # a valid but arbitrary job-level action
        a = ex.action(ep)
        assert mask[a]
        return a

    res = plan_window(_window(["EP", "MG", "fft", "CG", "SP"]), NODE, prov, chooser, policy="expert", window_size=6)
    assert sum(len(g.jobs) for g in res.plan.groups) == 5


def test_dagger_labels_the_agents_states(tmp_path: Path) -> None:
    cfg = TrainConfig(steps=60, seed=3, window_size=2, cmax=(2,), jobs=("EP", "MG"), eval_every=60, n_validation=2,
                      checkpoint_every=60, demos=3, pretrain_updates=20, dagger=True, demo_noise=0.2,
                      sac=dict(hidden_sizes=[32, 32], learning_starts=20, batch_size=16))
    res = train(cfg, tmp_path / "run", tmp_path / "m.npz", progress=False, final_eval=False)
    import torch

    ck = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=True)
    with np.load(tmp_path / "run" / "demos.npz") as z:
        n_demo_labels = z["label_obs"].shape[0]
    assert ck["labels"]["size"] > n_demo_labels  # the agent's own states were labelled
    assert res.model_path.exists()


def test_demonstrations_are_the_same_for_any_number_of_workers() -> None:
    """Episode i depends only on (seed, i): two processes give exactly the data one gives, in the same order,
    generated jobs included (they resolve by name in the worker processes too)."""
    from env.episode import RewardConfig
    from training.demos import make_demos
    from training.setup import sim_setup

    cfg = TrainConfig(demos=45, demo_noise=0.2, synthetic_jobs=12, seed=4, window_size=4, cmax=(3,))
    setup = sim_setup(NODE, window_size=4, cmaxes=(3,), jobs=None, n_validation=2, reward=RewardConfig(),
                      obs_layout="queue-v2", synthetic=(12, 4))
    seen: list[int] = []
    one = make_demos(setup, cfg, 45, seed=8)
    two = make_demos(setup, cfg, 45, seed=8, workers=2, on_progress=seen.append)
    assert seen == [20, 40, 45]
    assert one[0].size == two[0].size > 0 and one[1].size == two[1].size > 0
    assert np.array_equal(one[1].obs[: one[1].size], two[1].obs[: two[1].size])
    assert np.array_equal(one[1].action[: one[1].size], two[1].action[: two[1].size])
    assert np.array_equal(one[0].reward[: one[0].size], two[0].reward[: two[0].size])


def test_agent_gap_benchmark_runs_and_prints_its_figures() -> None:
    import re
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, str(root / "bench" / "agent_gap.py"), "--windows", "1"], capture_output=True,
                         text=True, timeout=300, check=True).stdout
    assert "simulated" in out
    for label in ("training programs only", "with held-out programs"):
        m = re.search(label + r"\s+mean\s+([\d.]+) %\s+worst\s+([\d.]+) %", out)
        assert m and 0 < float(m.group(2)) <= float(m.group(1))


def test_agent_heldout_benchmark_runs_and_prints_its_figure() -> None:
    import re
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, str(root / "bench" / "agent_heldout.py"), "--windows", "3", "--no-cache"],
                         capture_output=True, text=True, timeout=300, check=True).stdout
    assert "3 held-out windows" in out and "simulated" in out
    m = re.search(r"agent / best-found = ([\d.]+) % \(median window ([\d.]+) %, worst ([\d.]+) %", out)
    assert m and 0 < float(m.group(3)) <= float(m.group(2)) <= 110
