"""The gymnasium environment training plays (env.episode.gym_env.SetCoScheduleEnv): its spaces pass gymnasium's
checker, resets are drawn from np_random, the rewards of an episode add up to the paper's final reward, groups
scored one at a time through a backend cost what the whole plan does, and the learner's episodes go through it."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from env.episode.gym_env import SET_ENV_ID, SetCoScheduleEnv, set_state
from env.plan import actions
from env.sim.nodes import load_node

NODE = load_node("sim:reference")


def _rollout(env: SetCoScheduleEnv, rng: np.random.Generator, **reset) -> tuple[list[float], dict]:
    obs, info = env.reset(**reset)
    rewards, done = [], False
    while not done:
        assert env.observation_space.contains(obs) and info["action_mask"].dtype == np.int8
        obs, r, term, trunc, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
        rewards.append(r)
        done = term or trunc
    assert term and not info["action_mask"].any()  # nothing is chosen once the plan is complete
    return rewards, info


def test_check_env_passes_and_it_is_registered() -> None:
    check_env(SetCoScheduleEnv(NODE, windows=(2, 6)), skip_render_check=True)
    e = gym.make(SET_ENV_ID)
    assert e.action_space == gym.spaces.Discrete(actions.N_ACTIONS)
    assert isinstance(e.observation_space, gym.spaces.Dict)


def test_reset_draws_the_window_from_np_random_and_options_override_it() -> None:
    env = SetCoScheduleEnv(NODE, ["EP", "MG", "CG", "FT"], windows=(2, 3), cmaxes=(2, 3))
    draws = {tuple(env.reset(seed=s)[1]["jobs"]) for s in range(12)}
    assert len(draws) > 1 and all(2 <= len(d) <= 3 and set(d) <= {"EP", "MG", "CG", "FT"} for d in draws)
    assert env.reset(seed=5)[1].keys() >= {"jobs", "max_concurrency", "action_mask"}
    assert env.reset(seed=5)[1]["jobs"] == env.reset(seed=5)[1]["jobs"]
    obs, info = env.reset(options={"jobs": ["FT", "FT", "EP"], "max_concurrency": 2})
    assert info["jobs"] == ["FT", "FT", "EP"] and info["max_concurrency"] == 2 and int(obs["n_tokens"]) == 3
    tokens, context, current = set_state(obs)
    assert tokens.shape == (3, env.d_token) and current == -1  # the schedule step comes first


def test_the_rewards_add_up_to_the_final_reward_shared_among_the_groups() -> None:
    env = SetCoScheduleEnv(NODE, windows=(5, 6), cmaxes=(2, 3), reward_scale=10.0)
    rewards, info = _rollout(env, np.random.default_rng(1), seed=2)
    assert sum(rewards) == pytest.approx(10.0 * (1.0 - 1.0 / info["throughput_vs_timeshare"]))
    assert sum(r != 0.0 for r in rewards) <= len(info["makespans"])  # only the steps that close a group pay


def test_groups_scored_one_at_a_time_cost_what_the_whole_plan_costs() -> None:
    """Without a group cost the env runs each closed group on its backend as a one-group plan (a real node runs it
    then); the makespans are those of the whole plan run at once."""
    env = SetCoScheduleEnv(NODE, windows=(6, 6), cmaxes=(3,))
    _, info = _rollout(env, np.random.default_rng(3), seed=4)
    whole = env.backend.evaluate(env.episode.builder.build("training"))
    assert info["makespans"] == pytest.approx(whole, rel=1e-12)


def test_the_learner_plays_its_episodes_through_the_env() -> None:
    from training.set_sac import Args
    from training.setup import Problem, play

    args = Args(seed=1, windows=(2, 4), cmaxes=(2,), synthetic_jobs=0, jobs=("EP", "MG", "CG"))
    problem = Problem(args)
    calls = {"reset": 0, "step": 0}
    reset, step = problem.env.reset, problem.env.step

    def counted(name, f):
        def g(*a, **k):
            calls[name] += 1
            return f(*a, **k)
        return g

    problem.env.reset, problem.env.step = counted("reset", reset), counted("step", step)
    ep = play(problem, args.shape(problem.d_token), None, None, np.random.default_rng([1, 0]))
    assert calls == {"reset": 1, "step": len(ep.transitions)} and 2 <= len(ep.jobs) <= 4
    # the same generator draws the same window and the same actions
    again = play(problem, args.shape(problem.d_token), None, None, np.random.default_rng([1, 0]))
    assert again.jobs == ep.jobs and [t[2] for t in again.transitions] == [t[2] for t in ep.transitions]
