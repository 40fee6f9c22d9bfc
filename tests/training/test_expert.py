"""The search as an expert from any state (training.expert; the driver's DAgger labels: tests/training/test_set_sac.py)
and the agent benches (simulated)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from env.planners.baselines import search
from env.episode.planning import plan_window
from env.episode.jobinfo import sim_provider
from env.plan.models import Window, WindowJob
from env.sim.nodes import load_node
from training.expert import Expert, expert_grid

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
    from env.sim.backend import SimBackend

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
    out = subprocess.run([sys.executable, str(root / "bench" / "agent_heldout.py"), "--windows", "3", "--no-cache",
                          "--diagnose"], capture_output=True, text=True, timeout=300, check=True).stdout
    assert "3 held-out windows" in out and "simulated" in out
    m = re.search(r"agent / best-found = ([\d.]+) % \(median window ([\d.]+) %, worst ([\d.]+) %", out)
    assert m and 0 < float(m.group(3)) <= float(m.group(2)) <= 110
    # the diagnosis: the best grouping by the same group costs is never worse than the agent's groups with them
    d = re.search(r"the agent's plan ([\d.]+) %, its groups with their best core splits ([\d.]+) %, the best grouping "
                  r"\(the agent's schedule action\) ([\d.]+) %", out)
    assert d and float(d.group(3)) >= float(d.group(2)) > 0 and abs(float(d.group(1)) - float(m.group(1))) < 0.2


def test_agent_decoding_benchmark_runs_and_prints_its_figures() -> None:
    import re
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, str(root / "bench" / "agent_decoding.py"), "--windows", "2", "--no-cache",
                          "--marginal", "0.5", "--pointer", "0.2"], capture_output=True, text=True, timeout=300,
                         check=True).stdout
    assert "2 held-out windows" in out and "simulated" in out
    figures = {name: float(v) for name, v in re.findall(r"^\s+(argmax \(the agent\)|marginal 0.5|pointer 0.2)\s+([\d.]+) %$",
                                                         out, re.M)}
    assert set(figures) == {"argmax (the agent)", "marginal 0.5", "pointer 0.2"}, out
    assert all(0 < v <= 110 for v in figures.values())


def test_the_experts_values_agree_with_its_action_and_give_the_soft_label_of_skip() -> None:
    """In every join-or-skip state of a window, the expert's predicted remaining times after joining and after
    skipping (``Expert.last_values``) order its choices as its action does; ``skip_target`` turns them into the
    label of skip: above one half exactly when the expert skips, nearer one half the nearer the two are."""
    from env.plan.actions import SKIP
    from training.expert import skip_target

    prov = sim_provider(NODE)
    ex = Expert(NODE, expert_grid("cores"))
    seen: list[tuple[int, tuple[float, float]]] = []

    def chooser(obs, mask, ep):
        a = ex.action(ep)
        if ex.last_values is not None:
            seen.append((a, ex.last_values))
        else:
            assert skip_target(ex.last_values, 0.01) == -1.0  # the schedule step, or a group still to open
        return a

    plan_window(_window(["EP", "MG", "fft", "CG", "SP", "lu_cb"]), NODE, prov, chooser, policy="expert", window_size=6)
    assert len(seen) >= 3 and {a == SKIP for a, _ in seen} == {True, False}  # both choices occur in this window
    for a, (t_join, t_skip) in seen:
        q = skip_target((t_join, t_skip), 0.01)
        assert (a == SKIP) == (t_skip < t_join) == (q > 0.5), (a, t_join, t_skip, q)
        assert skip_target((t_join, t_skip), 0.0) == -1.0  # tau 0: the hard label
        # a softer temperature moves the label towards one half
        assert abs(skip_target((t_join, t_skip), 0.1) - 0.5) <= abs(q - 0.5) + 1e-12
    assert skip_target((100.0, 100.0), 0.01) == 0.5
    assert skip_target((100.0, 110.0), 0.01) < 1e-4 and skip_target((110.0, 100.0), 0.01) > 1 - 1e-4
    assert skip_target((100.0, float("inf")), 0.01) == -1.0


def test_group_cost_probe_runs_and_prints_its_figure() -> None:
    import re
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, str(root / "bench" / "group_cost_probe.py"), "--groups", "160", "--epochs", "2",
                          "--windows", "2", "--seeds", "4242"], capture_output=True, text=True, timeout=300,
                         check=True).stdout
    m = re.search(r"seed 4242: learned group costs \+ exact partition = ([\d.]+) % of best-found \(median ([\d.]+) %, "
                  r"worst ([\d.]+) %; 2 windows.*simulated", out)
    assert m and 0 < float(m.group(3)) <= float(m.group(1)) <= 101.0, out
