"""The gymnasium environment: registration, check_env, reproducible resets, masked actions, truncation."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from env.plan import actions
from env.episode.gym_env import ENV_ID, CoScheduleEnv
from env.sim.catalogue import HELD_OUT_JOBS, TRAIN_JOBS


@pytest.fixture(scope="module")
def env():
    return CoScheduleEnv()


def rollout(e, seed, policy_seed=0):
    rng = np.random.default_rng(policy_seed)
    obs, info = e.reset(seed=seed)
    trace = [obs.copy()]
    done = False
    while not done:
        a = int(rng.choice(np.flatnonzero(info["action_mask"])))
        obs, r, term, trunc, info = e.step(a)
        trace += [obs.copy(), r]
        done = term or trunc
    return trace, info


def test_check_env_passes(env):
    check_env(env, skip_render_check=True)


def test_registered_and_spaces():
    e = gym.make(ENV_ID)
    assert e.action_space == gym.spaces.Discrete(257)
    assert isinstance(e.observation_space, gym.spaces.Box) and np.isfinite(e.observation_space.high).all()
    obs, info = e.reset(seed=0)
    assert info["action_mask"].dtype == np.int8 and info["action_mask"].shape == (257,)
    assert (e.unwrapped.action_masks() == info["action_mask"]).all()
    assert e.observation_space.contains(obs)


def test_reset_seed_is_reproducible(env):
    a, ia = rollout(env, seed=7)
    b, ib = rollout(env, seed=7)
    assert len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))
    assert ia["throughput_vs_timeshare"] == ib["throughput_vs_timeshare"]
    _, other = env.reset(seed=8)
    _, again = env.reset(seed=7)
    assert again["jobs"] == env.reset(seed=7)[1]["jobs"]


def test_windows_come_from_the_training_jobs_by_default(env):
    for s in range(20):
        _, info = env.reset(seed=s)
        assert set(info["jobs"]) <= set(TRAIN_JOBS) and len(info["jobs"]) == 6
    held = CoScheduleEnv(jobs=HELD_OUT_JOBS)
    assert set(held.reset(seed=0)[1]["jobs"]) <= set(HELD_OUT_JOBS)


def test_final_reward_is_throughput_gain(env):
    _, info = rollout(env, seed=3)
    assert "throughput_vs_timeshare" in info and info["simulated"] is True
    assert info["throughput_vs_timeshare"] == pytest.approx(info["timeshare_s"] / info["total_s"])


def test_masked_action_is_skip_with_penalty_and_does_not_crash(env):
    env.reset(seed=0)
    obs, r, term, trunc, info = env.step(100)  # a job action at the schedule step
    assert info["invalid_action"] == 100 and r == pytest.approx(-1.0) and not term and not trunc
    env.step(0)
    obs, r, term, trunc, info = env.step(2)  # a schedule action later: treated as skip
    assert info["invalid_action"] == 2 and r <= -1.0


def test_truncated_only_at_the_step_limit(env):
    env.reset(seed=0)
    steps = 0
    while True:
        _, _, term, trunc, info = env.step(3 if steps else 300)  # always invalid after step 0 -> skip / no-op
        steps += 1
        if term or trunc:
            break
    assert trunc and not term and steps == 4 * 6 + 4
    assert env.action_masks().any()
