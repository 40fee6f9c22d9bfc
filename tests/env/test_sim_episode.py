"""The episode: masks against the allocation code over random rollouts, closing rules, plans, rewards."""

from __future__ import annotations

import random

import numpy as np
import pytest

from env.plan import actions
from env.plan.actions import SKIP
from env.plan.allocate import GroupState, allocate, core_count
from env.episode.window import Episode, RewardConfig, obs_size, rw_final, rw_intermediate
from env.episode.planning import plan_window, run_episode
from env.episode.jobinfo import sim_provider
from env.plan.models import Plan, Window, WindowJob
from env.sim.catalogue import ALL_JOBS
from env_helpers import job_action, sched_action


def make_episode(node, names, cmax=4, W=6, **kw):
    prov = sim_provider(node)
    jobs = [WindowJob(id=f"{n}-{i}", profile=n) for i, n in enumerate(names)]
    return Episode(node, jobs, [prov.get(n) for n in names], max_concurrency=cmax, window_size=W,
                   n_features=prov.n_features, **kw)


def independent_validity(ep: Episode, a: int) -> bool:
    """Is action a valid now? Decided from the rules and the allocation code, not from the mask code."""
    if ep.schedule_index is None:
        return actions.is_schedule(a)
    if actions.is_schedule(a):
        return False
    if a == SKIP:
        if ep.steps >= ep.step_limit:
            return False
        return bool(ep.open_slots) or not (ep.skipped | {ep.queue[0]}) >= set(ep.queue)
    if len(ep.open_slots) >= ep.max_concurrency:
        return False
    st = ep.builder.state
    sched = ep.builder.schedule
    return allocate(ep.node, sched.affinity, sched.memory, actions.decode(a), GroupState(set(st.taken_cpus), dict(st.mask_cursor))) is not None


def check_plan(plan: Plan, names: list[str], cmax: int) -> None:
    Plan.model_validate(plan.model_dump())  # every job once, groups <= Cmax, cpus disjoint (the model's checks)
    placed = sorted(j.id for g in plan.groups for j in g.jobs) + sorted(e.id for e in plan.excluded)
    assert sorted(placed) == sorted(f"{n}-{i}" for i, n in enumerate(names))
    for g in plan.groups:
        assert 1 <= len(g.jobs) <= cmax
        cpus = [c for j in g.jobs for c in j.cpus]
        assert len(cpus) == len(set(cpus))


@pytest.mark.parametrize("seed", range(12))
def test_masks_match_the_rules_over_random_rollouts(ref_node, seed):
    rng = random.Random(seed)
    W = rng.choice([4, 6, 8])
    cmax = rng.choice([1, 2, 3, 4])
    names = [rng.choice(ALL_JOBS) for _ in range(rng.randint(1, W))]
    ep = make_episode(ref_node, names, cmax=cmax, W=W)
    while not ep.done:
        mask = ep.action_mask()
        assert mask.dtype == np.int8 and mask.shape == (257,)
        assert mask.any()
        for a in range(257):
            assert bool(mask[a]) == independent_validity(ep, a), (a, actions.describe(a))
        obs = ep.observation()
        assert obs.shape == (obs_size(W, ep.n_features),) and np.isfinite(obs).all() and np.abs(obs).max() <= 5
        # bias the rollout towards skips sometimes, so the closing rules get exercised
        open_ = np.flatnonzero(mask)
        a = SKIP if (mask[SKIP] and rng.random() < 0.4) else int(rng.choice(list(open_)))
        ep.step(a)
    check_plan(ep.builder.build("test"), names, cmax)


def test_masked_action_raises_in_the_episode(ref_node):
    ep = make_episode(ref_node, ["EP", "MG"])
    with pytest.raises(ValueError):
        ep.step(job_action("1/2"))  # a job action at the schedule step
    ep.step(sched_action())
    with pytest.raises(ValueError):
        ep.step(3)  # a schedule action later


def test_group_closes_at_cmax_and_when_all_remaining_skipped(ref_node):
    ep = make_episode(ref_node, ["EP", "MG", "CG", "FT"], cmax=2)
    ep.step(sched_action())
    ep.step(job_action("1/4"))
    ep.step(job_action("1/4"))
    assert ep.groups_closed == 1 and not ep.open_slots  # Cmax reached
    ep.step(job_action("1/4"))  # CG opens group 2
    ep.step(SKIP)  # FT skipped: every remaining job skipped since the last allocation -> close
    assert ep.groups_closed == 2 and ep.queue == [3]
    mask = ep.action_mask()
    assert not mask[SKIP]  # an empty group cannot be skipped away
    ep.step(job_action("7/8"))
    assert ep.done
    assert [len(g.jobs) for g in ep.builder.build("t").groups] == [2, 1, 1]


def test_group_closes_when_nothing_fits(ref_node):
    ep = make_episode(ref_node, ["EP", "MG", "CG"])
    ep.step(sched_action())
    ep.step(job_action("7/8"))  # 21 of 24 cores
    ep.step(job_action("1/8"))  # 3 more: none left
    assert ep.groups_closed == 1


def test_plan_window_excludes_unknown_and_chunks_by_W(ref_node):
    names = ["EP", "MG", "CG", "FT", "IS", "SP", "fmm", "lu_cb"]
    jobs = [WindowJob(id=f"{n}-{i}", profile=n) for i, n in enumerate(names)] + [WindowJob(id="new-job")]
    rng = random.Random(0)
    res = plan_window(Window(jobs=jobs, max_concurrency=3), ref_node, sim_provider(ref_node),
                      lambda o, m, e: rng.choice(list(np.flatnonzero(m))), policy="random", window_size=6)
    assert len(res.episodes) == 2 and [len(e.jobs) for e in res.episodes] == [6, 2]
    assert [e.id for e in res.plan.excluded] == ["new-job"]
    assert "no job in the simulated catalogue" in res.plan.excluded[0].reason
    ids = [j.id for g in res.plan.groups for j in g.jobs]
    assert sorted(ids) == sorted(f"{n}-{i}" for i, n in enumerate(names))
    # the first chunk's groups all come before the second chunk's
    first = {f"{n}-{i}" for i, n in enumerate(names[:6])}
    pos = [any(j.id in first for j in g.jobs) for g in res.plan.groups]
    assert pos == sorted(pos, reverse=True)


def test_rewards(ref_node):
    assert rw_final(150.0, 100.0) == pytest.approx(50.0)
    ep = make_episode(ref_node, ["EP", "EP"])
    ep.step(sched_action())
    a = ep.builder
    r = ep.step(job_action("1/2", 12, 60))
    info = ep.infos[0]
    alloc = ep.alloc[0]
    # identical jobs: every ratio is 1, so rw_i = cores share * 2 + (ways share + bw share) * 1
    expect = 12 / 24 * 2 + (sum(w for w, _ in alloc.l3.values()) / 22 + sum(alloc.mem_bw_percent.values()) / 200)
    assert rw_intermediate(info, ep.infos, alloc, ref_node) == pytest.approx(expect)
    assert r == pytest.approx(RewardConfig().intermediate_weight * expect)
    assert a is ep.builder
