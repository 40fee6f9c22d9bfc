"""The gymnasium environment ``cosched/CoSchedule-v0`` (coscheduler.md §2-5) over ``env.episode.window``.

* ``action_space = Discrete(257)``; ``observation_space`` a finite Box of W x (f + k) + node values (float32).
* ``info["action_mask"]`` (int8, 257) on reset and every step, and ``action_masks()`` (for maskable agents).
* A masked action does not crash: it is treated as skip when skip is open (else as a no-op) and adds
  ``RewardConfig.invalid_action_penalty``.
* ``terminated`` when every job is placed (the plan is then run on the backend and rw_f added);
  ``truncated`` only when the step limit 4W + 4 is reached first.
* Windows: W jobs drawn with ``np_random`` from ``jobs`` (default: the paper's 12 training programs),
  without replacement when there are enough, or taken in turn from a fixed ``windows`` list.
"""

from __future__ import annotations

from typing import Any, Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from env.plan import actions
from env.sim.backend import Backend, SimBackend
from env.episode.window import DEFAULT_OBS_LAYOUT, DEFAULT_WINDOW, OBS_CLIP, Episode, RewardConfig, obs_size, rw_final
from env.errors import InputError
from env.episode.jobinfo import JobInfoProvider, sim_provider
from env.plan.models import WindowJob
from env.sim.nodes import DEFAULT_SIM_NODE, load_node
from env.node.spec import NodeSpec

ENV_ID = "cosched/CoSchedule-v0"


class CoScheduleEnv(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self, node: NodeSpec | str = DEFAULT_SIM_NODE, jobs: Sequence[str] | None = None, *,
                 window_size: int = DEFAULT_WINDOW, max_concurrency: int = 4,
                 backend: Backend | None = None, provider: JobInfoProvider | None = None,
                 train_jobs: Sequence[str] | None = None, windows: Sequence[Sequence[str]] | None = None,
                 replace: bool | None = None, reward: RewardConfig = RewardConfig(),
                 obs_layout: str = DEFAULT_OBS_LAYOUT) -> None:
        from env.sim.world import world_for

        self.node = load_node(node) if isinstance(node, str) else node
        TRAIN_JOBS = world_for(self.node).train_jobs
        self.window_size = window_size
        self.max_concurrency = max_concurrency
        self.backend: Backend = backend if backend is not None else SimBackend(self.node)
        self.provider = provider if provider is not None else sim_provider(self.node, train_jobs)
        self.jobs = list(jobs) if jobs is not None else list(train_jobs or TRAIN_JOBS)
        self.windows = [list(w) for w in windows] if windows is not None else None
        for name in self.jobs + [n for w in (self.windows or []) for n in w]:
            if self.provider.get(name) is None:
                raise InputError(self.provider.missing_reason(name))
        self.replace = replace if replace is not None else len(self.jobs) < window_size
        self.reward_config = reward
        self.obs_layout = obs_layout
        self.step_limit = 4 * window_size + 4
        f = self.provider.n_features
        self.action_space = spaces.Discrete(actions.N_ACTIONS)
        self.observation_space = spaces.Box(-OBS_CLIP, OBS_CLIP, shape=(obs_size(window_size, f, obs_layout),), dtype=np.float32)
        self.episode: Episode | None = None
        self._window_counter = 0

    # -- gymnasium API --

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        names = (options or {}).get("jobs")
        if names is None and self.windows is not None:
            names = self.windows[self._window_counter % len(self.windows)]
            self._window_counter += 1
        if names is None:
            idx = self.np_random.choice(len(self.jobs), size=self.window_size, replace=self.replace)
            names = [self.jobs[i] for i in idx]
        jobs = _window_jobs(names)
        infos = [self.provider.get(n) for n in names]
        if any(i is None for i in infos):
            raise InputError(self.provider.missing_reason(names[[i is None for i in infos].index(True)]))
        self.episode = Episode(self.node, jobs, infos, max_concurrency=self.max_concurrency,  # type: ignore[arg-type]
                               window_size=self.window_size, n_features=self.provider.n_features,
                               reward=self.reward_config, step_limit=self.step_limit, obs_layout=self.obs_layout)
        return self.episode.observation(), {"action_mask": self.episode.action_mask(), "jobs": list(names)}

    def step(self, action):
        ep = self.episode
        if ep is None:
            raise RuntimeError("call reset() before step()")
        if ep.done or ep.steps >= self.step_limit:
            raise RuntimeError("the episode has ended: call reset() before step()")
        action = int(action)
        mask = ep.action_mask()
        reward = 0.0
        info: dict[str, Any] = {}
        if not (0 <= action < actions.N_ACTIONS) or not mask[action]:
            reward += self.reward_config.invalid_action_penalty
            info["invalid_action"] = action
            if mask[actions.SKIP]:
                reward += ep.step(actions.SKIP)
            else:
                ep.steps += 1  # a no-op still uses a step, so the step limit ends a stuck episode
        else:
            reward += ep.step(action)
        terminated = ep.done
        truncated = (not terminated) and ep.steps >= self.step_limit
        if terminated:
            plan = ep.builder.build("training")
            makespans = self.backend.evaluate(plan, seed=int(self.np_random.integers(2**31)))
            total = sum(makespans)
            solo = ep.solo_total_s()
            reward += self.reward_config.final_weight * rw_final(solo, total)
            info.update(throughput_vs_timeshare=solo / total, total_s=total, timeshare_s=solo,
                        makespans=makespans, groups=len(makespans), simulated=self.backend.simulated)
        info["action_mask"] = ep.action_mask() if not (terminated or truncated) else _terminal_mask(ep)
        return ep.observation(), float(reward), terminated, truncated, info

    def action_masks(self) -> np.ndarray:
        ep = self.episode
        if ep is None:
            raise RuntimeError("call reset() before action_masks()")
        return ep.action_mask() if not ep.done else _terminal_mask(ep)


def _terminal_mask(ep: Episode) -> np.ndarray:
    """After the end nothing is chosen; an all-zero mask would break maskable agents, so skip stays open."""
    m = np.zeros(actions.N_ACTIONS, dtype=np.int8)
    m[actions.SKIP] = 1
    return m


def _window_jobs(names: Sequence[str]) -> list[WindowJob]:
    seen: dict[str, int] = {}
    out = []
    for n in names:
        k = seen.get(n, 0)
        seen[n] = k + 1
        out.append(WindowJob(id=n if k == 0 else f"{n}:{k}", profile=n))
    return out


if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point="env.episode.gym_env:CoScheduleEnv")
