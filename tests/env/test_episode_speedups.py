"""The planner's speed-ups change nothing: per-episode caches, observations built from parts, precomputed masks,
memoised allocations, one-call plan validation and the actor's masked argmax all give exactly what computing
afresh gives (rewards, observations bit for bit, masks, allocations, plans, actions)."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

from env.plan import actions
from env.plan.actions import SKIP
from env.plan.allocate import GroupState, allocate
from env.episode.window import N_STATUS, NODE_VALUES, OBS_CLIP, Episode, obs_size, rw_intermediate, window_means
from env.plan.models import Plan, WindowJob
from env.sim.nodes import load_node
from env.plan.builder import PlanBuilder
from service.planning import provider_for


def test_cached_means_and_fractions_match_fresh_ones() -> None:
    node = load_node("sim:reference")
    provider = provider_for(node)
    names = ["MG", "EP", "CG", "FT"]
    infos = [provider.get(n) for n in names]
    for layout in ("slots-v1", "queue-v2"):
        ep = Episode(node, [WindowJob(id=n) for n in names], infos, max_concurrency=2, n_features=provider.n_features,
                     obs_layout=layout)
        while not ep.done:
            first = ep.observation()
            assert np.array_equal(first, ep.observation())  # cached rows are not written into
            choices = [int(a) for a in np.flatnonzero(ep.action_mask()) if a != SKIP] or [SKIP]
            action = choices[len(choices) // 2]
            slot = ep.current
            reward = ep.step(action)
            if slot is not None and ep.alloc[slot] is not None:
                fresh = rw_intermediate(infos[slot], infos, ep.alloc[slot], node)
                assert reward == ep.reward.intermediate_weight * fresh
                assert rw_intermediate(infos[slot], infos, ep.alloc[slot], node, window_means(infos)) == fresh


# -- the observation and the mask, computed afresh from the episode's state (the definitions, no caches) -----


def fresh_slots(ep: Episode) -> np.ndarray:
    f, k, W = ep.n_features, N_STATUS, ep.window_size
    node = ep.node
    obs = np.zeros(obs_size(W, f), dtype=np.float32)
    per = obs[: W * (f + k)].reshape(W, f + k)
    per[:, f] = 1.0
    pos = {s: i for i, s in enumerate(ep.queue)}
    for s, info in enumerate(ep.infos):
        per[s, :f] = info.features[:f]
        a, g = ep.alloc[s], ep.group_of[s]
        fracs = (0.0, 0.0, 0.0) if a is None else (
            len(a.cpus) / len(node.cpus), sum(w for w, _ in a.l3.values()) / node.total_ways,
            sum(a.mem_bw_percent.values()) / (100.0 * len(node.numa)))
        per[s, f:] = (0.0, 1.0 if s == ep.current else 0.0, 1.0 if g == ep.open_group_index and g >= 0 else 0.0,
                      1.0 if 0 <= g < ep.open_group_index else 0.0, *fracs, ep.skips[s] / W,
                      (pos[s] + 1) / W if s in pos else 0.0)
    union: dict[int, int] = {}
    for s in ep.open_slots:
        for d, (_, m) in ep.alloc[s].l3.items():
            union[d] = union.get(d, 0) | m
    used_ways = sum(bin(m).count("1") for m in union.values())
    used_bw = sum(sum(ep.alloc[s].mem_bw_percent.values()) for s in ep.open_slots) / (100.0 * len(node.numa))
    sched = [0.0] * 6
    if ep.schedule_index is not None:
        sched[ep.schedule_index] = 1.0
    obs[W * (f + k):] = (ep.free_cpus() / len(node.cpus), 1.0 - used_ways / node.total_ways, 1.0 - used_bw,
                         len(ep.open_slots) / ep.max_concurrency, 1.0 if ep.schedule_index is None else 0.0,
                         *sched, ep.groups_closed / W, len(ep.queue) / W)
    return np.clip(obs, -OBS_CLIP, OBS_CLIP)


def fresh_queue(ep: Episode) -> np.ndarray:
    f, k, W = ep.n_features, N_STATUS, ep.window_size
    base = fresh_slots(ep)
    per = base[: W * (f + k)].reshape(W, f + k)
    order = list(ep.queue) + list(ep.open_slots)
    order += sorted((s for s in range(len(ep.infos)) if s not in order), key=lambda s: (ep.group_of[s], s))
    out = np.zeros(obs_size(W, f, "queue-v2"), dtype=np.float32)
    rows = out[: W * (f + k)].reshape(W, f + k)
    rows[:, f] = 1.0
    rows[: len(order)] = per[order]
    out[W * (f + k): W * (f + k) + len(NODE_VALUES)] = base[W * (f + k):]
    agg = out[W * (f + k) + len(NODE_VALUES):]
    if ep.open_slots:
        agg[:f] = np.clip(per[ep.open_slots, :f].sum(axis=0), -OBS_CLIP, OBS_CLIP)
    if ep.queue:
        agg[f:] = per[ep.queue, :f].mean(axis=0)
    return out


def fresh_mask(ep: Episode) -> np.ndarray:
    mask = np.zeros(actions.N_ACTIONS, dtype=np.int8)
    if ep.done:
        return mask
    if ep.schedule_index is None:
        mask[: actions.N_SCHEDULE] = 1
        return mask
    for a in range(actions.FIRST_JOB, SKIP):
        mask[a] = ep.builder.fits(a)
    mask[SKIP] = ep.skip_allowed()
    return mask


def _infos(node, names: list[str], scale: float = 1.0) -> list:
    provider = provider_for(node)
    return [dataclasses.replace(i, features=(i.features * np.float32(scale)).astype(np.float32))
            for i in (provider.get(n) for n in names)]


@pytest.mark.parametrize("layout", ["slots-v1", "queue-v2"])
@pytest.mark.parametrize("scale", [1.0, 30.0])  # 30: features far outside the clip range
def test_observations_and_masks_match_fresh_ones(layout: str, scale: float) -> None:
    node = load_node("sim:reference")
    names = ["MG", "EP", "CG", "FT", "IS", "BT"]
    rng = random.Random(5)
    fresh = fresh_queue if layout == "queue-v2" else fresh_slots
    for trial in range(40):
        n = rng.randint(1, 6)
        cmax = rng.choice([1, 2, 3, 4, 8, 64])  # 64: bandwidth caps add up far past one node's (free bw < -5)
        ep = Episode(node, [WindowJob(id=f"j{i}") for i in range(n)], _infos(node, names[:n], scale),
                     max_concurrency=cmax, n_features=29, obs_layout=layout, step_limit=80)
        skip_bias = rng.random()  # some episodes skip a lot (skip counts over 5 W: clipped)
        while not ep.done:
            mask = ep.action_mask()
            assert mask.dtype == np.int8 and np.array_equal(mask, fresh_mask(ep))
            obs = ep.observation()
            assert obs.dtype == np.float32 and obs.tobytes() == fresh(ep).tobytes()
            mask[:] = 0  # a caller's copy: writing into it changes no later mask
            valid = [int(a) for a in np.flatnonzero(ep.action_mask())]
            a = SKIP if SKIP in valid and rng.random() < skip_bias else rng.choice(valid)
            kept = obs.tobytes()
            ep.step(a)
            ep.observation()
            assert obs.tobytes() == kept  # an observation handed out shares nothing the episode writes later
        assert np.array_equal(ep.action_mask(), fresh_mask(ep))


def test_masked_actions_are_still_refused_by_step() -> None:
    node = load_node("sim:reference")
    ep = Episode(node, [WindowJob(id="MG")], _infos(node, ["MG"]), n_features=29)
    with pytest.raises(ValueError, match="masked"):
        ep.step(SKIP)  # step 0 takes a schedule action
    ep.step(0)
    with pytest.raises(ValueError, match="masked"):
        ep.step(3)


def test_memoised_allocations_match_fresh_ones() -> None:
    node = load_node("sim:reference")
    rng = random.Random(11)
    for _ in range(300):
        sched = actions.decode(rng.randrange(actions.N_SCHEDULE))
        builder = PlanBuilder(node=node, schedule=sched, max_concurrency=64, window_size=6)
        fresh_state = GroupState()
        for j in range(rng.randint(1, 8)):
            a = rng.randrange(actions.FIRST_JOB, SKIP)
            before = (set(builder.state.taken_cpus), dict(builder.state.mask_cursor))
            got = builder.place(WindowJob(id=f"j{j}"), a)
            want = allocate(node, sched.affinity, sched.memory, actions.decode(a), fresh_state)
            assert got == want
            assert builder.state.taken_cpus == fresh_state.taken_cpus and builder.state.mask_cursor == fresh_state.mask_cursor
            if got is None:  # nothing changes when it does not fit
                assert (builder.state.taken_cpus, builder.state.mask_cursor) == before


def test_plans_validate_as_built() -> None:
    """build() validates the whole plan in one call: the same document as validating it afresh."""
    from service.planning import plan_window

    rng = random.Random(2)
    names = sorted(n for n in ("MG", "EP", "CG", "FT", "IS", "BT", "SP", "fft", "fmm", "barnes"))
    for i in range(30):
        jobs = [{"id": f"j{k}", "profile": rng.choice(names + ["unknown"]), "command": ["./x", str(k)],
                 "env": {"A": "1"}} for k in range(rng.randint(1, 9))]
        from env.plan.models import Window

        window = Window.model_validate({"jobs": jobs, "max_concurrency": rng.choice([1, 2, 3, 4])})
        for policy in ("greedy", "agent", "timeshare"):
            plan = plan_window(window, load_node("sim:reference"), policy=policy)
            again = Plan.model_validate_json(plan.model_dump_json())
            assert again == plan and again.model_dump_json() == plan.model_dump_json()
            assert again.model_fields_set == plan.model_fields_set
            assert [j.model_fields_set for g in again.groups for j in g.jobs] == [j.model_fields_set for g in plan.groups for j in g.jobs]
