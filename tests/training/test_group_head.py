"""The group-cost head's phase (training.group_head) on a tiny problem: seeded and deterministic, it learns the
node model's group costs well enough that the agent's greedy plan is within a few percent of the best plan over the
same options (found exhaustively here); the plan is the same whatever the order of the window's jobs; bad settings
are refused in one line."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from agent.modelfile import NodeShape, TrainedFor, load_set_model, write_set_model
from agent.setnet import ARCHITECTURE, SetNetShape
from agent.setnet_torch import SetNet
from agent.setpolicy import SetPolicy
from env.planners.partitions import best_partition
from env.planners.scoring import GroupEvaluator
from env.episode.window import SET_CONTEXT_NAMES, SET_TOKEN_NAMES
from env.episode.planning import placed_groups, plan_window
from env.episode.jobinfo import sim_provider
from env.plan.models import Window, WindowJob
from env.sim.nodes import load_node
from env.planners.scoring import node_scorer
from env.planners.search import episode_makespans
from training.group_head import SCHEDULES, GroupHeadArgs, cli, core_action, label_groups, options_of, train_head

NODE = load_node("sim:reference")
POOL = ("EP", "MG", "CG", "FT", "SP")


@pytest.fixture(scope="module")
def model(tmp_path_factory):  # noqa: ANN001, ANN201
    provider = sim_provider(NODE)
    params, head = train_head(NODE, POOL, provider, GroupHeadArgs(groups=400, epochs=150, batch_size=64, seed=3,
                                                                    workers=1, d_model=32), cmax=3)
    torch.manual_seed(0)  # an untrained actor: it only answers where the head's plan does not apply
    shape = SetNetShape(d_token=provider.n_features + len(SET_TOKEN_NAMES), d_context=len(SET_CONTEXT_NAMES),
                        d_model=16, heads=2, layers=1, d_ff=16, d_head_hidden=16)
    path = tmp_path_factory.mktemp("head") / "m.npz"
    write_set_model(path, SetNet(shape).export(), group=params, group_head=head, action_encoding="cosched-actions-v1",
                    architecture=ARCHITECTURE, net=shape.to_dict(), observation="set-v1", max_window=32,
                    max_concurrency=3, trained_for=TrainedFor(name=NODE.name, node_id="t", shape=NodeShape(
                        cpus=len(NODE.cpus), numa_domains=len(NODE.numa), l3_domains=2)), feature_set="f")
    return load_set_model(path)


def _plan(model, names: list[str], cmax: int) -> tuple[float, list[list[str]]]:  # noqa: ANN001
    w = Window(jobs=[WindowJob(id=f"j{i}-{n}", profile=n) for i, n in enumerate(names)], max_concurrency=cmax)
    ep = plan_window(w, NODE, sim_provider(NODE), SetPolicy(model), policy="agent", window_size=len(names),
                     canonical=True).episodes[0]
    groups = sorted(sorted(ep.infos[s].name for s, _ in g) for g in placed_groups(ep))
    return ep.solo_total_s() / sum(episode_makespans(ep, node_scorer(NODE))), groups


def _optimum(names: list[str], cmax: int) -> float:
    """The best partition over the head's options (every core split of the grid, both schedules), exhaustively."""
    ev, prov = GroupEvaluator(NODE), sim_provider(NODE)
    full = (1 << len(names)) - 1
    best = math.inf
    for s in range(len(SCHEDULES)):
        cost = {}
        for mask in range(1, full + 1):
            g = [names[i] for i in range(len(names)) if mask >> i & 1]
            if len(g) <= cmax:
                cost[mask] = (min(ev.makespan(SCHEDULES[s], [(j, core_action(c)) for j, c in zip(g, cores)])
                                  for si, cores in options_of(NODE, len(g)) if si == s))
        best = min(best, best_partition(cost, full)[0])
    return sum(prov.get(n).solo_s for n in names) / best


def test_labels_are_deterministic_for_a_seed_whatever_the_workers() -> None:
    a = label_groups(NODE, POOL, 40, seed=5, workers=1, cmax=3)
    b = label_groups(NODE, POOL, 40, seed=5, workers=2, cmax=3)
    assert [g for g, _ in a] == [g for g, _ in b]
    assert all(np.allclose(va, vb, equal_nan=True) for (_, va), (_, vb) in zip(a, b))
    assert all(1 <= len(g) <= 3 and len(v) == len(options_of(NODE, len(g))) for g, v in a)


@pytest.mark.parametrize("names,cmax", [(list(POOL), 2), (list(POOL), 3), (["EP", "MG", "CG", "FT"], 2), (["SP", "FT", "CG"], 3)])
def test_the_agent_plans_near_the_optimum_on_a_tiny_problem(model, names: list[str], cmax: int) -> None:  # noqa: ANN001
    got, _ = _plan(model, names, cmax)
    best = _optimum(names, cmax)
    assert got >= 0.97 * best, (got, best)
    assert got > 1.0  # above time sharing


def test_the_plan_does_not_depend_on_the_order_of_the_jobs(model) -> None:  # noqa: ANN001
    plans = {tuple(map(tuple, _plan(model, list(p), 2)[1])) for p in itertools.permutations(POOL)}
    assert len(plans) == 1


def test_bad_settings_are_refused_in_one_line(capsys, tmp_path) -> None:  # noqa: ANN001
    assert cli(["--model", str(tmp_path / "none.npz"), "--out", str(tmp_path / "o.npz")]) == 2
    assert "not found" in capsys.readouterr().err
    assert cli(["--model", "x", "--out", "y", "--groups", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--groups must be at least 1" in err


def test_groups_without_a_finite_option_value_are_left_out_not_a_multinomial_error() -> None:
    """A labelled group none of whose options has a finite value (NaN or inf: an option that could not run) gives the
    option sampler a row of zero weights; such groups are dropped before fitting, and a fit left with none says so."""
    from training.group_head import fit

    provider = sim_provider(NODE)
    n_opts = len(options_of(NODE, 2))
    good = [(("EP", "MG"), [1.0 + 0.01 * r for r in range(n_opts)]), (("CG", "FT"), [2.0] * n_opts)]
    bad = [(("EP", "SP"), [float("nan")] * n_opts), (("MG", "FT"), [float("inf")] * n_opts)]
    args = GroupHeadArgs(groups=4, epochs=2, batch_size=64, seed=1, workers=1, d_model=8)
    params, head = fit(NODE, good + bad, provider, args)
    assert head["figures"]["groups"] == 4 and all(np.isfinite(v).all() for v in params.values())
    with pytest.raises(ValueError, match="no group with a finite option value"):
        fit(NODE, bad, provider, args)
