"""Learning from the simulated node's search (sim only): demonstrations, behaviour cloning, DAgger labels.

Why: plain masked SAC on this problem (257 actions, a window-level combinatorial choice: which jobs share a group
and how the cores are split) reached about 0.95 vs time sharing; the sim is fast, so a search (``best-found``'s
machinery) can serve as an *expert* on **training windows** (training jobs only, never the evaluation windows).

* **The expert** (``training.expert.Expert``): the search completed from any episode state (closed groups and
  the open group's members fixed), on the ``cores`` grid by default (core options only: 99.5 % of best-found on
  the standard windows, a tenth of its cost, labels that are easier to imitate).
* **Demonstrations** (``make_demos``): the expert plays ``cfg.demos`` seeded training windows through the
  training envs; with ``cfg.demo_noise`` = ε a random valid job-level action replaces the expert's with
  probability ε (DART-style: the data also shows how to recover), every state keeps the expert's label. The
  transitions (actions taken, training rewards) feed the critics; the labels feed the cloning term.
* **Warm start**: ``pretrain_updates`` SAC updates on demonstration transitions, each with the cloning term
  (cross-entropy of the masked policy on the expert's action) on ``bc_batch`` labels, weighted ``bc_weight``.
* **During training**: every update's batch gets ``demo_batch`` demonstration transitions appended and the actor
  loss keeps the cloning term (SACfD / DDPGfD style). With ``cfg.dagger`` every state the agent visits (with a
  choice) is labelled with the expert's action and added to the labels (DAgger: the fix for compounding errors
  of sequential imitation; the agent's own states, not only the expert's, get a correct action).

Demonstrations are generated once per run and cached as ``run_dir/demos.npz`` (reused by ``--resume``; DAgger
labels live in the checkpoint); their CPU time counts in the training time.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from agent.sac import Agent, Batch, ReplayBuffer, RingCheckpoint, masked_policy

#: The teacher's grid: the schedule actions that matter on the sim, ways {4, 8, 22}/22, bandwidth {60, 100} %,
#: balanced split. On the standard evaluation windows it plans within 0.1 % of the full grid at ~1/4 the cost.
from training.expert import TEACHER_GRID, expert_grid, make_expert, teacher_grid  # noqa: E402,F401  (the grids live with the expert)


class LabelBuffer(RingCheckpoint):
    """(observation, mask, expert action) triples: the behaviour-cloning data (demonstrations and DAgger labels)."""

    FIELDS = ("obs", "mask", "action")

    def __init__(self, capacity: int, obs_dim: int, n_actions: int = 257) -> None:
        self.capacity = max(1, capacity)
        self.obs = np.zeros((self.capacity, obs_dim), np.float32)
        self.mask = np.zeros((self.capacity, n_actions), np.bool_)
        self.action = np.zeros(self.capacity, np.int64)
        self.pos = 0
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def add(self, obs: np.ndarray, mask: np.ndarray, action: int) -> None:
        m = np.asarray(mask).astype(np.bool_)
        if not m[int(action)]:
            raise ValueError(f"expert action {action} is masked in this state")
        i = self.pos
        self.obs[i], self.mask[i], self.action[i] = obs, m, int(action)
        self.pos = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        idx = rng.integers(0, self.size, size=n)
        return self.obs[idx], self.mask[idx], self.action[idx]



def make_demos(setup: Any, cfg: Any, n: int, seed: int, *, on_progress: Callable[[int], None] | None = None,
               workers: int = 1) -> tuple[ReplayBuffer, LabelBuffer]:
    """``n`` demonstration episodes on training windows (training jobs only), played by the expert through the
    training envs. With ``cfg.demo_noise`` = ε > 0 a uniformly random valid job-level action replaces the
    expert's with probability ε (DART-style noise injection: the demonstrations then also show how to recover
    from a mistake); every state is still labelled with the expert's action. Returns the transitions (the
    actions taken, with the training rewards: for the critics) and the labels (for the cloning term).

    Episode ``i`` depends only on (``seed``, ``i``), so ``workers`` > 1 processes (the search is the cost of a
    training run) give the same demonstrations in the same order as one."""
    obs_dim = setup.make_env(cfg.cmax[0]).observation_space.shape[0]
    buf = ReplayBuffer(max(1, n * (4 * cfg.window_size + 4)), obs_dim, 257)
    labels = LabelBuffer(n * (4 * cfg.window_size + 4), obs_dim)
    chunks = [list(range(i, min(n, i + _DEMO_CHUNK))) for i in range(0, n, _DEMO_CHUNK)]
    job = _DemoJob(setup, cfg, seed)
    if workers > 1 and len(chunks) > 1:
        import multiprocessing

        global _FORKED_JOB
        _FORKED_JOB = job  # handed to the forked workers by inheritance: the setup's closures do not pickle
        try:
            with multiprocessing.get_context("fork").Pool(min(workers, len(chunks))) as pool:
                results = pool.imap(_play_chunk, chunks)  # in order: the same data whatever the number of workers
                _merge(results, buf, labels, on_progress)
        finally:
            _FORKED_JOB = None
    else:
        _merge(map(job, chunks), buf, labels, on_progress)
    return buf, labels


def sample_window(rng: random.Random, jobs: list[str], size: int) -> list[str]:
    """A training window's job names: distinct while the pool allows, drawn with replacement otherwise."""
    return rng.sample(jobs, size) if len(jobs) >= size else [rng.choice(jobs) for _ in range(size)]


_DEMO_CHUNK = 20  # episodes a worker plays per task (progress granularity)
_FORKED_JOB: "_DemoJob | None" = None


def _play_chunk(indices: list[int]) -> list[tuple[list, list]]:
    assert _FORKED_JOB is not None
    return _FORKED_JOB(indices)


def _merge(results: Any, buf: ReplayBuffer, labels: LabelBuffer, on_progress: Callable[[int], None] | None) -> None:
    done = 0
    for chunk in results:
        for labs, trans in chunk:
            for lab in labs:
                labels.add(*lab)
            for t in trans:
                buf.add(*t)
            done += 1
        if on_progress:
            on_progress(done)


class _DemoJob:
    """Plays demonstration episodes by index (picklable by reference under fork; one expert per process)."""

    def __init__(self, setup: Any, cfg: Any, seed: int) -> None:
        self.setup, self.cfg, self.seed = setup, cfg, seed
        self._expert: Any = None
        self._envs: dict[int, Any] = {}

    def __call__(self, indices: list[int]) -> list[tuple[list, list]]:
        if self._expert is None:
            self._expert = make_expert(self.setup, self.cfg)
            self._envs = {c: self.setup.make_env(c) for c in self.cfg.cmax}
        return [self.episode(i) for i in indices]

    def episode(self, i: int) -> tuple[list, list]:
        """(labels, transitions) of episode ``i``; no transitions for a noisy episode that hit the step limit."""
        from training.train import group_rewards

        cfg, jobs = self.cfg, list(self.setup.jobs)
        rng = random.Random(self.seed * 1_000_003 + i)
        nrng = np.random.default_rng([self.seed, i])
        noise = float(getattr(cfg, "demo_noise", 0.0))
        cmax = cfg.cmax[i % len(cfg.cmax)]
        names = sample_window(rng, jobs, cfg.window_size)
        env = self._envs[cmax]
        obs, info = env.reset(seed=i, options={"jobs": names})
        trans, closed, labs = [], [], []
        while True:
            mask = np.asarray(info["action_mask"]).astype(np.bool_)
            ea = int(self._expert.action(env.episode))
            a = ea
            if mask.sum() > 1:
                labs.append((obs, mask, ea))
                if noise > 0 and env.episode.schedule_index is not None and nrng.random() < noise:
                    valid = np.flatnonzero(mask)
                    a = int(valid[nrng.integers(valid.size)])
            nobs, r, term, trunc, info = env.step(a)
            trans.append([obs, mask, a, float(r), nobs, np.asarray(info["action_mask"]).astype(np.bool_), bool(term)])
            closed.append(env.episode.groups_closed)
            obs = nobs
            if term or trunc:
                break
        if not term:
            return labs, []  # keep its labels, not its transitions
        group_rewards(trans, closed, env.episode, info["makespans"], cfg)
        return labs, trans


def save_demos(buf: ReplayBuffer, labels: LabelBuffer, path: Path) -> None:
    np.savez(path, **{f: getattr(buf, f)[: buf.size] for f in ReplayBuffer.FIELDS},
             **{f"label_{f}": getattr(labels, f)[: labels.size] for f in LabelBuffer.FIELDS})


def load_demos(path: Path, extra_labels: int = 0) -> tuple[ReplayBuffer, LabelBuffer]:
    """The demonstrations and their labels; the label buffer gets room for ``extra_labels`` more (DAgger)."""
    with np.load(path, allow_pickle=False) as z:
        size, obs_dim = z["obs"].shape
        buf = ReplayBuffer(max(size, 1), obs_dim, z["mask"].shape[1])
        for f in ReplayBuffer.FIELDS:
            getattr(buf, f)[:size] = z[f]
        buf.size = size
        buf.pos = size % buf.capacity
        n = z["label_obs"].shape[0]
        labels = LabelBuffer(n + extra_labels, obs_dim, z["mask"].shape[1])
        for f in LabelBuffer.FIELDS:
            getattr(labels, f)[:n] = z[f"label_{f}"]
        labels.size = n
        labels.pos = n % labels.capacity
    return buf, labels


def _concat(a: Batch, b: Batch) -> Batch:
    return Batch(**{f: np.concatenate([getattr(a, f), getattr(b, f)]) for f in Batch.__dataclass_fields__})


class DemoAgent(Agent):
    """``agent.sac.Agent`` whose updates also learn from the expert (see the module doc): demonstration
    transitions appended to the critics' batches, and a behaviour-cloning term on a batch of labels
    (demonstrations' and DAgger's) added to the actor loss."""

    demos: ReplayBuffer | None = None
    labels: LabelBuffer | None = None
    bc_weight: float = 0.0
    demo_batch: int = 0
    bc_batch: int = 0
    _bc: tuple | None = None
    _clone_only: bool = False
    clone_only_warm_start: bool = False

    def attach_demos(self, demos: ReplayBuffer, labels: LabelBuffer, *, bc_weight: float, demo_batch: int,
                     bc_batch: int) -> None:
        self.demos, self.bc_weight, self.demo_batch, self.bc_batch = demos, bc_weight, demo_batch, bc_batch
        if self.labels is not None and len(self.labels):  # resumed: the checkpoint's labels include the demos'
            return
        self.labels = labels

    def add_label(self, obs: np.ndarray, mask: np.ndarray, action: int) -> None:
        assert self.labels is not None
        self.labels.add(obs, mask, action)

    def _sample_bc(self) -> None:
        if self.labels is not None and len(self.labels) and self.bc_weight > 0 and self.bc_batch > 0:
            self._bc = self.labels.sample(self.bc_batch, self.rng)

    def update(self, batch: Batch) -> dict[str, float]:
        if self.demos is not None and len(self.demos) and self.demo_batch > 0:
            batch = _concat(batch, self.demos.sample(self.demo_batch, self.rng))
        self._sample_bc()
        try:
            return super().update(batch)
        finally:
            self._bc = None

    def pretrain_update(self, batch_size: int) -> dict[str, float]:
        """One update on demonstrations alone (the warm start): the critics learn the demonstrations' values
        (TD, as always); the actor gets its SAC loss plus the cloning term, or with ``clone_only_warm_start``
        (``--warm-start-actor bc``) the cloning term only. The critics have seen nothing but the expert's actions
        yet, so their values of the other actions are extrapolations that the policy-improvement term would
        chase (the offline-RL overestimation problem); the full SAC actor loss starts with the agent's own data."""
        assert self.demos is not None
        batch = self.demos.sample(batch_size, self.rng)
        self._sample_bc()
        self._clone_only = self.clone_only_warm_start
        try:
            return super().update(batch)
        finally:
            self._bc = None
            self._clone_only = False

    def losses(self, batch: Batch) -> dict[str, torch.Tensor]:
        L = super().losses(batch)
        if self._bc is not None:
            obs, mask, action = self._bc
            _, logp = masked_policy(self.actor(torch.as_tensor(obs)), torch.as_tensor(mask).bool())
            bc = -logp.gather(1, torch.as_tensor(action).long()[:, None]).mean()
            L["actor_loss"] = (0.0 if self._clone_only else L["actor_loss"]) + self.bc_weight * bc
            L["bc_loss"] = bc
        return L

    def state_dict(self) -> dict[str, Any]:
        d = super().state_dict()
        if self.labels is not None:
            d["labels"] = {"capacity": self.labels.capacity, **self.labels.state_dict()}
        return d

    def load_extra(self, d: dict[str, Any]) -> None:
        if "labels" in d:
            lab = d["labels"]
            self.labels = LabelBuffer(int(lab["capacity"]), self.obs_dim, self.cfg.n_actions)
            self.labels.load_state_dict(lab)


__all__ = ["DemoAgent", "LabelBuffer", "make_demos", "make_expert", "expert_grid", "save_demos", "load_demos",
           "TEACHER_GRID"]
