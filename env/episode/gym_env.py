"""The gymnasium environments over ``env.episode.window``: ``cosched/CoSchedule-v0`` (docs/design/coscheduler.md §2-5: a
fixed window size, a flat observation) and ``cosched/CoScheduleSet-v0`` (``SetCoScheduleEnv``: the set-encoder's
view, windows of any size; what training plays). ``CoScheduleEnv``:

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

from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from env.episode.jobinfo import JobInfoProvider, sim_provider
from env.episode.planning import group_members, set_episode
from env.episode.window import (DEFAULT_OBS_LAYOUT, DEFAULT_WINDOW, OBS_CLIP, SET_CONTEXT_NAMES, SET_MAX_CMAX,
                                SET_MAX_WINDOW, SET_TOKEN_NAMES, Episode, RewardConfig, obs_size, rw_final)
from env.errors import InputError
from env.node.spec import NodeSpec
from env.plan import actions
from env.plan.models import WindowJob
from env.sim.backend import Backend, SimBackend
from env.sim.nodes import DEFAULT_SIM_NODE, load_node

ENV_ID = "cosched/CoSchedule-v0"
SET_ENV_ID = "cosched/CoScheduleSet-v0"


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
        info: dict[str, Any] = {}
        reward = _step(ep, int(action), self.reward_config.invalid_action_penalty, info)
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


GroupCost = Callable[[int, Sequence[tuple[str, int]]], float]  # (schedule action, [(job, action)...]) -> makespan (s)


class SetCoScheduleEnv(gym.Env):
    """``cosched/CoScheduleSet-v0``: the window MDP as the set-encoder policy sees it (``Episode.set_observation``),
    on ``set_episode`` (the one episode factory the planner uses too): windows of 1 to ``SET_MAX_WINDOW`` jobs.

    * ``action_space = Discrete(257)`` (``env.plan.actions``).
    * ``observation_space``: a ``Dict`` of ``tokens`` (``SET_MAX_WINDOW`` x (f + len(SET_TOKEN_NAMES)), float32 in
      ±OBS_CLIP: one row per job still in play, then zero rows), ``n_tokens`` (how many rows are jobs), ``context``
      (len(SET_CONTEXT_NAMES), float32 in ±OBS_CLIP) and ``current`` (the current job's row; -1 at the schedule
      step). ``set_state(obs)`` is what the set encoder reads: (the jobs' tokens, context, current).
    * ``info["action_mask"]`` (int8, 257) on reset and every step; all zero once terminated (nothing is chosen).
    * Reward: 0, except on the step that closes a group g: ``reward_scale · (solo_g − makespan_g) / solo_total``,
      solo times from the job information, the group's makespan from ``group_cost`` (the node model) or, without
      one, from ``backend`` (the group run as a one-group plan: a real node runs it then). The return is
      ``reward_scale · (1 − CoRunTime / SoloRunTime)``: the paper's final reward, shared among the groups.
    * ``terminated`` when every job is placed (``info``: ``throughput_vs_timeshare``, ``makespans``); ``truncated``
      when the step limit (``set_episode``'s) comes first. A masked action is treated as in ``CoScheduleEnv``.
    * ``reset(options={"jobs": names, "max_concurrency": c})`` plays that window; without options, W uniform in
      ``windows``, Cmax uniform in ``cmaxes`` and the jobs (from ``jobs``, without replacement when there are
      enough) are drawn with ``np_random``, in that order (``info``: ``jobs``, ``max_concurrency``).
    """

    metadata = {"render_modes": []}

    def __init__(self, node: NodeSpec | str = DEFAULT_SIM_NODE, jobs: Sequence[str] | None = None, *,
                 windows: tuple[int, int] = (2, 12), cmaxes: Sequence[int] = (1, 2, 3, 4),
                 provider: JobInfoProvider | None = None, group_cost: GroupCost | None = None,
                 backend: Backend | None = None, commands: dict[str, WindowJob] | None = None,
                 reward_scale: float = 10.0, invalid_action_penalty: float = RewardConfig().invalid_action_penalty) -> None:
        """``commands``: profile name -> a window job whose command (and env) the episode's jobs of that profile
        take, for a backend that runs them."""
        from env.sim.world import world_for

        self.node = load_node(node) if isinstance(node, str) else node
        self.provider = provider if provider is not None else sim_provider(self.node)
        self.jobs = list(jobs) if jobs is not None else list(world_for(self.node).train_jobs)
        if not 1 <= windows[0] <= windows[1] <= SET_MAX_WINDOW or not all(1 <= c <= SET_MAX_CMAX for c in cmaxes):
            raise InputError(f"windows {windows} / cmaxes {tuple(cmaxes)}: need 1 <= lo <= hi <= {SET_MAX_WINDOW} "
                             f"and each Cmax in 1..{SET_MAX_CMAX}")
        self.windows, self.cmaxes = windows, tuple(cmaxes)
        self.backend: Backend = backend if backend is not None else SimBackend(self.node)
        self.group_cost = group_cost
        self.commands = commands
        self.reward_scale, self.invalid_action_penalty = reward_scale, invalid_action_penalty
        self.d_token = self.provider.n_features + len(SET_TOKEN_NAMES)
        self.action_space = spaces.Discrete(actions.N_ACTIONS)
        self.observation_space = spaces.Dict({
            # features are clipped to OBS_CLIP, the other values are fractions, flags and counts scaled below it
            "tokens": spaces.Box(-OBS_CLIP, OBS_CLIP, shape=(SET_MAX_WINDOW, self.d_token), dtype=np.float32),
            "n_tokens": spaces.Discrete(SET_MAX_WINDOW + 1),
            "context": spaces.Box(-OBS_CLIP, OBS_CLIP, shape=(len(SET_CONTEXT_NAMES),), dtype=np.float32),
            "current": spaces.Discrete(SET_MAX_WINDOW + 1, start=-1),
        })
        self.episode: Episode | None = None
        self._makespans: list[float] = []

    def make_episode(self, names: Sequence[str], cmax: int) -> Episode:
        """A fresh episode of this window (what ``reset`` plays; searches build their own from it)."""
        jobs = _window_jobs(names)
        if self.commands is not None:
            jobs = [j.model_copy(update={"command": self.commands[j.profile_name].command,
                                         "env": self.commands[j.profile_name].env}) for j in jobs]
        infos = [self.provider.get(n) for n in names]
        if any(i is None for i in infos):
            raise InputError(self.provider.missing_reason(names[[i is None for i in infos].index(True)]))
        return set_episode(self.node, jobs, infos, cmax, n_features=self.provider.n_features)  # type: ignore[arg-type]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        names, cmax = (options or {}).get("jobs"), (options or {}).get("max_concurrency")
        if names is None:  # W, then Cmax, then the jobs
            w = int(self.np_random.integers(self.windows[0], self.windows[1] + 1))
            cmax = int(self.np_random.choice(self.cmaxes)) if cmax is None else cmax
            idx = self.np_random.choice(len(self.jobs), size=w, replace=len(self.jobs) < w)
            names = [self.jobs[i] for i in idx]
        elif cmax is None:
            cmax = int(self.np_random.choice(self.cmaxes))
        self.episode = self.make_episode(names, cmax)
        self._makespans = []
        return self._observation(), {"action_mask": self.episode.action_mask(), "jobs": list(names),
                                     "max_concurrency": cmax}

    def step(self, action):
        ep = self.episode
        if ep is None or ep.done or ep.steps >= ep.step_limit:
            raise RuntimeError("call reset() before step(): no episode is under way")
        info: dict[str, Any] = {}
        closed = ep.groups_closed
        _step(ep, int(action), 0.0, info)  # the intermediate reward is no part of this reward
        reward = self.invalid_action_penalty if "invalid_action" in info else 0.0
        solo = ep.solo_total_s()
        for g in range(closed, ep.groups_closed):  # the group this step closed: its share of the final reward
            makespan = self._group_makespan(ep, g)
            self._makespans.append(makespan)
            reward += self.reward_scale * (sum(i.solo_s for i, gi in zip(ep.infos, ep.group_of) if gi == g)
                                           - makespan) / solo
        terminated = ep.done
        truncated = not terminated and ep.steps >= ep.step_limit
        if terminated:
            info.update(throughput_vs_timeshare=solo / sum(self._makespans), makespans=list(self._makespans),
                        timeshare_s=solo, simulated=self.backend.simulated if self.group_cost is None else True)
        info["action_mask"] = ep.action_mask()
        return self._observation(), float(reward), terminated, truncated, info

    def _group_makespan(self, ep: Episode, g: int) -> float:
        if self.group_cost is not None:
            return self.group_cost(ep.schedule_index, group_members(ep)[g])  # type: ignore[arg-type]
        plan = ep.builder.build("training")
        return self.backend.evaluate(plan.model_copy(update={"groups": plan.groups[g: g + 1]}))[0]

    def _observation(self) -> dict[str, Any]:
        s = self.episode.set_observation()  # type: ignore[union-attr]
        tokens = np.zeros((SET_MAX_WINDOW, self.d_token), dtype=np.float32)
        tokens[: len(s.tokens)] = s.tokens
        return {"tokens": tokens, "n_tokens": np.int64(len(s.tokens)), "context": s.context,
                "current": np.int64(s.current)}

    def action_masks(self) -> np.ndarray:
        if self.episode is None:
            raise RuntimeError("call reset() before action_masks()")
        return self.episode.action_mask()


def set_state(obs: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, int]:
    """A ``SetCoScheduleEnv`` observation as the set encoder reads it: (the jobs' tokens, context, current)."""
    return obs["tokens"][: int(obs["n_tokens"])], obs["context"], int(obs["current"])


def _step(ep: Episode, action: int, penalty: float, info: dict[str, Any]) -> float:
    """Apply ``action``; its (intermediate) reward. A masked action is skip when skip is open, else a no-op that still
    uses a step (so the step limit ends a stuck episode), plus ``penalty`` and ``info["invalid_action"]``."""
    mask = ep.action_mask()
    if 0 <= action < actions.N_ACTIONS and mask[action]:
        return ep.step(action)
    info["invalid_action"] = action
    if mask[actions.SKIP]:
        return penalty + ep.step(actions.SKIP)
    ep.steps += 1
    return penalty


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
if SET_ENV_ID not in gym.registry:
    gym.register(id=SET_ENV_ID, entry_point="env.episode.gym_env:SetCoScheduleEnv")
