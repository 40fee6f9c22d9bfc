"""Demonstrations from the simulated node's search (sim only): SAC from demonstrations.

Why: the sim is fast, so a search (``env.baselines.search``, the machinery of ``best-found``, on a reduced grid)
can plan *training* windows (training jobs only, never the evaluation windows) well in well under a second each.
Its plans, replayed through the same gym env (``ScriptChooser``: the wanted job's action when it is current,
skip otherwise), are transitions with the same rewards the agent gets. They are used twice:

1. **warm start**: ``pretrain_updates`` SAC updates on the demonstrations alone, each with a behaviour-cloning
   term (cross-entropy of the masked policy on the demonstrated action) added to the actor loss;
2. **during training**: every update's batch gets ``demo_batch`` demonstration transitions appended and the
   actor loss keeps the cloning term on them, weighted ``bc_weight`` (SACfD / DDPGfD style), so the critics
   learn the value of the good plans and the actor stays near them while it improves on its own data.

Demonstrations are generated once per (node, W, Cmax list, jobs, grid, count, seed) and cached as ``.npz`` in
``run_dir`` (and reused by ``--resume``); their CPU time counts in the training time.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from agent.sac import Agent, Batch, ReplayBuffer, masked_policy

#: The teacher's grid: the schedule actions that matter on the sim, ways {4, 8, 22}/22, bandwidth {60, 100} %,
#: balanced split. On the standard evaluation windows it plans within 0.1 % of the full grid at ~1/4 the cost.
TEACHER_GRID = dict(schedules=(0, 3), ways=(Fraction(4, 22), Fraction(8, 22), Fraction(22, 22)), bw=(60, 100),
                    splits=("balanced",))


def teacher_grid() -> Any:
    from env.baselines import Grid

    return Grid(**TEACHER_GRID)


def make_demos(setup: Any, cfg: Any, n: int, seed: int, *, on_progress: Callable[[int], None] | None = None) -> ReplayBuffer:
    """``n`` demonstration episodes on training windows, replayed through the training envs."""
    from env.baselines import GroupEvaluator, ScriptChooser, search
    from training.train import group_rewards

    rng = random.Random(seed)
    evaluator = GroupEvaluator(setup.node)
    grid = teacher_grid()
    envs = {c: setup.make_env(c) for c in cfg.cmax}
    obs_dim = next(iter(envs.values())).observation_space.shape[0]
    buf = ReplayBuffer(max(1, n * (4 * cfg.window_size + 4)), obs_dim, 257)
    jobs = list(setup.jobs)
    for i in range(n):
        cmax = cfg.cmax[i % len(cfg.cmax)]
        names = rng.sample(jobs, cfg.window_size) if len(jobs) >= cfg.window_size else [rng.choice(jobs) for _ in range(cfg.window_size)]
        script = search(setup.node, names, cmax, grid, rounds=2, refine_schedules=1, evaluator=evaluator)
        env = envs[cmax]
        obs, info = env.reset(seed=i, options={"jobs": names})
        chooser = ScriptChooser(script)
        trans, closed = [], []
        while True:
            mask = np.asarray(info["action_mask"]).astype(np.bool_)
            a = int(chooser(obs, mask, env.episode))
            nobs, r, term, trunc, info = env.step(a)
            trans.append([obs, mask, a, float(r), nobs, np.asarray(info["action_mask"]).astype(np.bool_), bool(term)])
            closed.append(env.episode.groups_closed)
            obs = nobs
            if term or trunc:
                break
        if not term:
            continue  # cannot happen with a complete script; never store a broken demonstration
        group_rewards(trans, closed, env.episode, info["makespans"], cfg)
        for t in trans:
            buf.add(*t)
        if on_progress:
            on_progress(i + 1)
    return buf


def save_demos(buf: ReplayBuffer, path: Path) -> None:
    np.savez(path, **{f: getattr(buf, f)[: buf.size] for f in ReplayBuffer.FIELDS})


def load_demos(path: Path) -> ReplayBuffer:
    with np.load(path, allow_pickle=False) as z:
        size, obs_dim = z["obs"].shape
        buf = ReplayBuffer(max(size, 1), obs_dim, z["mask"].shape[1])
        for f in ReplayBuffer.FIELDS:
            getattr(buf, f)[:size] = z[f]
        buf.size = size
        buf.pos = size % buf.capacity
    return buf


def _concat(a: Batch, b: Batch) -> Batch:
    return Batch(**{f: np.concatenate([getattr(a, f), getattr(b, f)]) for f in Batch.__dataclass_fields__})


class DemoAgent(Agent):
    """``agent.sac.Agent`` whose updates also learn from demonstrations (see the module doc)."""

    demos: ReplayBuffer | None = None
    bc_weight: float = 0.0
    demo_batch: int = 0
    _bc: Batch | None = None

    def attach_demos(self, demos: ReplayBuffer, *, bc_weight: float, demo_batch: int) -> None:
        self.demos, self.bc_weight, self.demo_batch = demos, bc_weight, demo_batch

    def update(self, batch: Batch) -> dict[str, float]:
        if self.demos is not None and len(self.demos) and self.demo_batch > 0:
            self._bc = self.demos.sample(self.demo_batch, self.rng)
            batch = _concat(batch, self._bc)
        try:
            return super().update(batch)
        finally:
            self._bc = None

    def pretrain_update(self, batch_size: int) -> dict[str, float]:
        """One update on demonstrations alone (the warm start), with the cloning term on all of them."""
        assert self.demos is not None
        self._bc = self.demos.sample(batch_size, self.rng)
        try:
            return super().update(self._bc)
        finally:
            self._bc = None

    def losses(self, batch: Batch) -> dict[str, torch.Tensor]:
        L = super().losses(batch)
        if self._bc is not None and self.bc_weight > 0:
            _, logp = masked_policy(self.actor(torch.as_tensor(self._bc.obs)), torch.as_tensor(self._bc.mask).bool())
            bc = -logp.gather(1, torch.as_tensor(self._bc.action).long()[:, None]).mean()
            L["actor_loss"] = L["actor_loss"] + self.bc_weight * bc
            L["bc_loss"] = bc
        return L


@dataclass
class DemoSettings:
    count: int = 0  # demonstration episodes (0: none, plain SAC)
    pretrain_updates: int = 0
    bc_weight: float = 1.0
    demo_batch: int = 32


__all__ = ["DemoAgent", "DemoSettings", "make_demos", "save_demos", "load_demos", "TEACHER_GRID"]
