"""Masked discrete Soft Actor-Critic (Christodoulou 2019), the whole algorithm in one file.

Read top to bottom: the hyperparameters (``SACConfig``), the masked softmax that every loss goes through,
the networks, the replay buffer, the agent (acting, the three losses and one update, checkpoints) and a
plain training loop for any gymnasium-like environment that reports ``info["action_mask"]``.

Masking, the one subtle part (spec coscheduler.md §7):
* An invalid action's logit is replaced by a finite value far below the best valid one (not -inf:
  -inf - -inf is NaN when a row is fully masked), the log-softmax is taken, then the probability and the
  log-probability of masked actions are multiplied by the (float) mask, so they are exactly 0. Every
  ``p·Q`` and ``p·log p`` sum therefore gets exactly 0 from a masked action and no NaN can appear, even with
  a single valid action or none (a terminal state whose mask is all zeros: its value is 0, and
  ``1 - terminated`` removes it anyway).
* The replay buffer stores the mask of the next state: the critic target's expectation over ``a'`` must run
  over the actions valid in ``s'``, not in ``s``.

Entropy target, the other documented choice: the usual ``0.98·log|A|`` assumes all 257 actions are
available; in a masked state with n valid actions the maximum entropy is ``log n``, so that target is
unreachable and α grows without bound. Here each state's target is ``target_entropy_ratio · log n(s)``
(0 when one action is valid, so forced steps neither push α up nor down) and the α loss averages
``log α · (H(s) − target(s))`` over the batch.

Checkpoints hold everything (networks, optimizers, α, the filled buffer, counters, RNG states); the loop
below checkpoints between episodes and seeds each reset with ``seed + episodes``, so a resumed run is
bit-identical to an uninterrupted one.

Updates are computed from the networks as they are before the step (critic, actor and α losses all see the
same pre-update critics and α), then the three optimizers step, then the target critics move by τ.

This module imports nothing of ours except ``agent``'s own numpy pieces (the sampling rule is shared with
the torch-free inference in ``agent.policy``, so training and serving sample the same way).
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from agent.policy import sample_valid

N_ACTIONS = 257
BIG = 1.0e9  # larger than any logit gap: used to find the best valid logit
MASK_GAP = 80.0  # masked logits sit this far below the best valid one (e^-80 ≈ 1.8e-35: a normal float32)
CHECKPOINT_FORMAT = "cosched-sac-checkpoint/1"


# --------------------------------------------------------------------------------------------- config
@dataclass
class SACConfig:
    """Every hyperparameter of the agent. Defaults follow the paper's network (3 × 256 ReLU) and common
    discrete-SAC practice; training/ may override any of them and must record them with the model."""

    seed: int = 1
    n_actions: int = N_ACTIONS
    hidden_sizes: tuple[int, ...] = (256, 256, 256)
    lr_actor: float = 3e-4
    lr_critic: float = 3e-4
    lr_alpha: float = 3e-4
    adam_eps: float = 1e-4  # CleanRL's discrete SAC value; steadier early critic steps than 1e-8
    gamma: float = 0.99
    tau: float = 0.005  # soft target update: θ' ← τ θ + (1 − τ) θ' after every update
    batch_size: int = 64
    buffer_size: int = 100_000
    learning_starts: int = 1_000  # env steps of uniformly random valid actions before any update
    update_frequency: int = 1  # one update every this many env steps (after learning_starts)
    updates_per_step: int = 1  # updates each time one is due
    target_entropy_ratio: float = 0.5  # per-state target = ratio · log(n valid actions); see module doc
    initial_alpha: float = 0.2
    autotune_alpha: bool = True
    reward_scale: float = 1.0  # rewards are multiplied by this inside the critic target

    def __post_init__(self) -> None:
        checks = {
            "gamma in [0, 1]": 0.0 <= self.gamma <= 1.0,
            "tau in (0, 1]": 0.0 < self.tau <= 1.0,
            "target_entropy_ratio in [0, 1]": 0.0 <= self.target_entropy_ratio <= 1.0,
            "initial_alpha > 0": self.initial_alpha > 0.0,
            "batch_size >= 1": self.batch_size >= 1,
            "buffer_size >= batch_size": self.buffer_size >= self.batch_size,
            "update_frequency >= 1": self.update_frequency >= 1,
            "updates_per_step >= 1": self.updates_per_step >= 1,
            "hidden_sizes not empty": len(self.hidden_sizes) >= 1,
            "n_actions >= 2": self.n_actions >= 2,
        }
        bad = [k for k, ok in checks.items() if not ok]
        if bad:
            raise ValueError(f"SACConfig: need {', '.join(bad)}")

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["hidden_sizes"] = list(self.hidden_sizes)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SACConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in d.items() if k in known}
        if "hidden_sizes" in kw:
            kw["hidden_sizes"] = tuple(int(h) for h in kw["hidden_sizes"])
        return cls(**kw)


# ------------------------------------------------------------------------------------ masked softmax
def masked_policy(logits: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(probabilities, log-probabilities) over the valid actions; both exactly 0 where ``mask`` is False."""
    m = mask.to(logits.dtype)
    # Masked logits are put MASK_GAP below the best valid logit (a constant: no gradient reaches them). Their
    # softmax weight e^-80 each is invisible next to 1 in float32, yet stays a normal number: exp() of a far more
    # negative value (-1e9, -inf) is correct but takes a ~50x slower path in torch's CPU kernels, and
    # torch.where on a bool mask is slow too, hence the arithmetic with a float mask.
    with torch.no_grad():
        top = (logits + (m - 1.0) * BIG).amax(dim=-1, keepdim=True)
    shifted = logits * m + (1.0 - m) * (top - MASK_GAP)
    log_p = torch.log_softmax(shifted, dim=-1)
    # Multiplying by the mask makes masked p and log p exactly 0 (all values are finite, so 0·x = 0, never NaN).
    return log_p.exp() * m, log_p * m


# ------------------------------------------------------------------------------------------ networks
def mlp(n_in: int, hidden: Sequence[int], n_out: int) -> nn.Sequential:
    layers: list[nn.Module] = []
    for h in hidden:
        layers += [nn.Linear(n_in, h), nn.ReLU()]
        n_in = h
    layers.append(nn.Linear(n_in, n_out))
    return nn.Sequential(*layers)


class Actor(nn.Module):
    """obs → logits over the actions (the softmax and the mask are applied by ``masked_policy``)."""

    def __init__(self, obs_dim: int, hidden: Sequence[int], n_actions: int) -> None:
        super().__init__()
        self.net = mlp(obs_dim, hidden, n_actions)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs)

    def layers_numpy(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """The linear layers as (weight (out, in), bias (out,)) float32 arrays: what the model file stores."""
        return [
            (m.weight.detach().cpu().numpy().astype(np.float32).copy(), m.bias.detach().cpu().numpy().astype(np.float32).copy())
            for m in self.net
            if isinstance(m, nn.Linear)
        ]


class Critic(nn.Module):
    """obs → Q(s, a) for every action (discrete SAC's critic outputs all actions at once)."""

    def __init__(self, obs_dim: int, hidden: Sequence[int], n_actions: int) -> None:
        super().__init__()
        self.net = mlp(obs_dim, hidden, n_actions)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs)


# ------------------------------------------------------------------------------------- replay buffer
@dataclass
class Batch:
    obs: np.ndarray  # (B, obs_dim) float32
    mask: np.ndarray  # (B, n_actions) bool: valid actions in obs
    action: np.ndarray  # (B,) int64
    reward: np.ndarray  # (B,) float32
    next_obs: np.ndarray  # (B, obs_dim) float32
    next_mask: np.ndarray  # (B, n_actions) bool: valid actions in next_obs (all False allowed at termination)
    terminated: np.ndarray  # (B,) float32: 1.0 when next_obs is terminal (no bootstrap); truncation is 0


class RingCheckpoint:
    """Checkpointing for a ring buffer of numpy arrays named in ``FIELDS`` with ``pos`` and ``size``
    (the replay buffer here, the expert-label buffer of training/demos.py)."""

    FIELDS: tuple[str, ...] = ()
    pos: int
    size: int

    def state_dict(self) -> dict[str, Any]:
        # Only the filled part: a checkpoint of a young buffer stays small.
        return {"pos": self.pos, "size": self.size, **{f: torch.from_numpy(getattr(self, f)[: self.size].copy()) for f in self.FIELDS}}

    def load_state_dict(self, d: dict[str, Any]) -> None:
        self.pos, self.size = int(d["pos"]), int(d["size"])
        for f in self.FIELDS:
            getattr(self, f)[: self.size] = d[f].numpy()


class ReplayBuffer(RingCheckpoint):
    """A ring buffer of transitions in preallocated numpy arrays."""

    FIELDS = ("obs", "mask", "action", "reward", "next_obs", "next_mask", "terminated")

    def __init__(self, capacity: int, obs_dim: int, n_actions: int) -> None:
        self.capacity = capacity
        self.obs_dim = obs_dim
        self.n_actions = n_actions
        self.obs = np.zeros((capacity, obs_dim), np.float32)
        self.mask = np.zeros((capacity, n_actions), np.bool_)
        self.action = np.zeros(capacity, np.int64)
        self.reward = np.zeros(capacity, np.float32)
        self.next_obs = np.zeros((capacity, obs_dim), np.float32)
        self.next_mask = np.zeros((capacity, n_actions), np.bool_)
        self.terminated = np.zeros(capacity, np.float32)
        self.pos = 0  # next slot to write
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def add(
        self,
        obs: np.ndarray,
        mask: np.ndarray,
        action: int,
        reward: float,
        next_obs: np.ndarray,
        next_mask: np.ndarray,
        terminated: bool,
    ) -> None:
        m = np.asarray(mask).astype(np.bool_)
        if not m[int(action)]:
            # A masked action in the buffer would train Q on a value the policy can never take.
            raise ValueError(f"action {action} is masked in this state; only valid actions can be stored")
        i = self.pos
        self.obs[i] = obs
        self.mask[i] = m
        self.action[i] = int(action)
        self.reward[i] = float(reward)
        self.next_obs[i] = next_obs
        self.next_mask[i] = np.asarray(next_mask).astype(np.bool_)
        self.terminated[i] = 1.0 if terminated else 0.0
        self.pos = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def sample(self, batch_size: int, rng: np.random.Generator) -> Batch:
        idx = rng.integers(0, self.size, size=batch_size)
        return Batch(**{f: getattr(self, f)[idx] for f in self.FIELDS})



# --------------------------------------------------------------------------------------------- agent
class Agent:
    """Actor, twin critics, target critics, α, their optimizers, the replay buffer and the counters."""

    def __init__(self, obs_dim: int, cfg: SACConfig | None = None) -> None:
        self.cfg = cfg = cfg or SACConfig()
        self.obs_dim = obs_dim
        torch.manual_seed(cfg.seed)  # network initialisation is the only use of torch's RNG
        self.rng = np.random.default_rng(cfg.seed)  # actions and batch sampling
        h, n = cfg.hidden_sizes, cfg.n_actions
        self.actor = Actor(obs_dim, h, n)
        self.q1, self.q2 = Critic(obs_dim, h, n), Critic(obs_dim, h, n)
        self.q1_target, self.q2_target = Critic(obs_dim, h, n), Critic(obs_dim, h, n)
        self.q1_target.load_state_dict(self.q1.state_dict())
        self.q2_target.load_state_dict(self.q2.state_dict())
        for p in (*self.q1_target.parameters(), *self.q2_target.parameters()):
            p.requires_grad_(False)
        self.log_alpha = torch.tensor(math.log(cfg.initial_alpha), dtype=torch.float32, requires_grad=True)
        # foreach: one fused call per step instead of one per tensor (a third less CPU per update here).
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=cfg.lr_actor, eps=cfg.adam_eps, foreach=True)
        self.critic_opt = torch.optim.Adam([*self.q1.parameters(), *self.q2.parameters()], lr=cfg.lr_critic, eps=cfg.adam_eps, foreach=True)
        self.alpha_opt = torch.optim.Adam([self.log_alpha], lr=cfg.lr_alpha, eps=cfg.adam_eps, foreach=True)
        self.buffer = ReplayBuffer(cfg.buffer_size, obs_dim, n)
        self.global_step = 0  # env steps recorded
        self.updates = 0
        self.episodes = 0  # completed episodes (the training loop seeds each reset with seed + episodes)

    @property
    def alpha(self) -> float:
        return float(self.log_alpha.detach().exp())

    # ---------------------------------------------------------------------------------------- acting
    def probs(self, obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The actor's probabilities over all actions (0 where masked), float32, for one obs or a batch."""
        with torch.no_grad():
            logits = self.actor(torch.as_tensor(np.asarray(obs, np.float32)))
            p, _ = masked_policy(logits, torch.as_tensor(np.asarray(mask).astype(np.bool_)))
        return p.numpy()

    def act(self, obs: np.ndarray, mask: np.ndarray, deterministic: bool = False) -> int:
        """A valid action: the most probable one, or one sampled from the masked policy with the agent's RNG."""
        m = np.asarray(mask).astype(np.bool_)
        if not m.any():
            raise ValueError("no valid action in this state (the mask is all zeros)")
        p = self.probs(obs, m)
        if deterministic:
            return int(np.flatnonzero(m)[np.argmax(p[m])])
        return sample_valid(p, m, self.rng)

    def explore(self, obs: np.ndarray, mask: np.ndarray) -> int:
        """Behaviour policy: uniformly random valid actions until ``learning_starts``, then the sampled policy."""
        m = np.asarray(mask).astype(np.bool_)
        if self.global_step < self.cfg.learning_starts:
            valid = np.flatnonzero(m)
            if valid.size == 0:
                raise ValueError("no valid action in this state (the mask is all zeros)")
            return int(valid[self.rng.integers(valid.size)])
        return self.act(obs, m)

    def record(
        self,
        obs: np.ndarray,
        mask: np.ndarray,
        action: int,
        reward: float,
        next_obs: np.ndarray,
        next_mask: np.ndarray,
        terminated: bool,
    ) -> dict[str, float] | None:
        """Store one transition, count the step, and run the updates that are due. Returns the figures of
        the last update run now, or None."""
        self.buffer.add(obs, mask, action, reward, next_obs, next_mask, terminated)
        self.global_step += 1
        cfg = self.cfg
        figures = None
        if self.global_step >= cfg.learning_starts and len(self.buffer) >= cfg.batch_size and self.global_step % cfg.update_frequency == 0:
            for _ in range(cfg.updates_per_step):
                figures = self.update(self.buffer.sample(cfg.batch_size, self.rng))
        return figures

    # ---------------------------------------------------------------------------------------- losses
    def losses(self, batch: Batch) -> dict[str, torch.Tensor]:
        """The critic, actor and α losses of discrete SAC on one batch, from the current networks."""
        cfg = self.cfg
        obs = torch.as_tensor(batch.obs)
        mask = torch.as_tensor(batch.mask).bool()
        action = torch.as_tensor(batch.action).long()
        reward = torch.as_tensor(batch.reward).float()
        next_obs = torch.as_tensor(batch.next_obs)
        next_mask = torch.as_tensor(batch.next_mask).bool()
        terminated = torch.as_tensor(batch.terminated).float()
        alpha = self.log_alpha.exp().detach()

        # Critic target: r + γ (1 − terminated) Σ_a' p(a'|s') [min Q'(s', a') − α log p(a'|s')] over valid a'.
        with torch.no_grad():
            p_next, logp_next = masked_policy(self.actor(next_obs), next_mask)
            q_next = torch.min(self.q1_target(next_obs), self.q2_target(next_obs))
            v_next = (p_next * (q_next - alpha * logp_next)).sum(-1)
            target = cfg.reward_scale * reward + cfg.gamma * (1.0 - terminated) * v_next
        q1_all, q2_all = self.q1(obs), self.q2(obs)
        q1_a = q1_all.gather(1, action[:, None]).squeeze(1)
        q2_a = q2_all.gather(1, action[:, None]).squeeze(1)
        q1_loss = F.mse_loss(q1_a, target)
        q2_loss = F.mse_loss(q2_a, target)

        # Actor: Σ_a p(a|s) [α log p(a|s) − min Q(s, a)], summed over actions, averaged over the batch.
        probs, logp = masked_policy(self.actor(obs), mask)
        q_min = torch.min(q1_all, q2_all).detach()
        actor_loss = (probs * (alpha * logp - q_min)).sum(-1).mean()

        # α: per-state reachable target ratio · log(n valid); raise α when entropy is below it.
        entropy = -(probs * logp).sum(-1).detach()
        n_valid = mask.sum(-1).clamp(min=1).float()
        target_entropy = cfg.target_entropy_ratio * torch.log(n_valid)
        alpha_loss = (self.log_alpha * (entropy - target_entropy)).mean()

        return {
            "q1_loss": q1_loss,
            "q2_loss": q2_loss,
            "critic_loss": q1_loss + q2_loss,
            "actor_loss": actor_loss,
            "alpha_loss": alpha_loss,
            "entropy": entropy.mean(),
            "target_entropy": target_entropy.mean(),
            "q_taken": q1_a.detach().mean(),
            "target": target.mean(),
        }

    def update(self, batch: Batch) -> dict[str, float]:
        """One gradient step on critics, actor and α from one batch; then the soft target update.
        Returns the figures (losses before the step, α after it, mean entropy)."""
        L = self.losses(batch)
        self.critic_opt.zero_grad()
        L["critic_loss"].backward()
        self.actor_opt.zero_grad()
        L["actor_loss"].backward()
        if self.cfg.autotune_alpha:
            self.alpha_opt.zero_grad()
            L["alpha_loss"].backward()
        self.critic_opt.step()
        self.actor_opt.step()
        if self.cfg.autotune_alpha:
            self.alpha_opt.step()
        with torch.no_grad():
            tau = self.cfg.tau
            for net, tgt in ((self.q1, self.q1_target), (self.q2, self.q2_target)):
                for p, pt in zip(net.parameters(), tgt.parameters()):
                    pt.mul_(1.0 - tau).add_(p, alpha=tau)
        self.updates += 1
        figures = {k: float(v.detach()) for k, v in L.items()}
        figures["alpha"] = self.alpha
        return figures

    # ----------------------------------------------------------------------------------- checkpoints
    def state_dict(self) -> dict[str, Any]:
        return {
            "format": CHECKPOINT_FORMAT,
            "config": self.cfg.to_dict(),
            "obs_dim": self.obs_dim,
            "actor": self.actor.state_dict(),
            "q1": self.q1.state_dict(),
            "q2": self.q2.state_dict(),
            "q1_target": self.q1_target.state_dict(),
            "q2_target": self.q2_target.state_dict(),
            "log_alpha": self.log_alpha.detach().clone(),
            "actor_opt": self.actor_opt.state_dict(),
            "critic_opt": self.critic_opt.state_dict(),
            "alpha_opt": self.alpha_opt.state_dict(),
            "buffer": self.buffer.state_dict(),
            "counters": {"global_step": self.global_step, "updates": self.updates, "episodes": self.episodes},
            "np_rng": self.rng.bit_generator.state,
            "torch_rng": torch.get_rng_state(),
        }

    def save_checkpoint(self, path: str | os.PathLike[str]) -> None:
        """Everything needed to continue training exactly: networks, optimizers, α, buffer, counters, RNGs.
        Written to a temporary file first so an interrupted save never leaves a half checkpoint."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        torch.save(self.state_dict(), tmp)
        os.replace(tmp, path)

    @classmethod
    def load_checkpoint(cls, path: str | os.PathLike[str]) -> "Agent":
        # weights_only: a checkpoint is data (tensors, numbers, strings), never code.
        d = torch.load(path, map_location="cpu", weights_only=True)
        if d.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(f"{path}: not a {CHECKPOINT_FORMAT} checkpoint (format {d.get('format')!r})")
        agent = cls(int(d["obs_dim"]), SACConfig.from_dict(d["config"]))
        for name in ("actor", "q1", "q2", "q1_target", "q2_target"):
            getattr(agent, name).load_state_dict(d[name])
        with torch.no_grad():
            agent.log_alpha.copy_(d["log_alpha"])
        agent.actor_opt.load_state_dict(d["actor_opt"])
        agent.critic_opt.load_state_dict(d["critic_opt"])
        agent.alpha_opt.load_state_dict(d["alpha_opt"])
        agent.buffer.load_state_dict(d["buffer"])
        agent.global_step = int(d["counters"]["global_step"])
        agent.updates = int(d["counters"]["updates"])
        agent.episodes = int(d["counters"]["episodes"])
        agent.rng.bit_generator.state = d["np_rng"]
        torch.set_rng_state(d["torch_rng"])
        agent.load_extra(d)
        return agent

    def load_extra(self, d: dict[str, Any]) -> None:
        """A subclass's own checkpointed state (``state_dict`` extended); nothing here."""

    # ------------------------------------------------------------------------------------ model file
    def export_model(self, path: str | os.PathLike[str], **meta: Any) -> Any:
        """Write the actor as a model file (see ``agent.modelfile.write_model`` for the metadata)."""
        from agent.modelfile import write_model

        return write_model(path, self.actor.layers_numpy(), **meta)


# ------------------------------------------------------------------------------------ training loop
class MaskedEnv(Protocol):
    """What the loop needs: gymnasium's reset/step, with the valid actions in ``info["action_mask"]``."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]: ...

    def step(self, action: int) -> tuple[Any, float, bool, bool, dict[str, Any]]: ...


def run_episode(agent: Agent, env: MaskedEnv, *, learn: bool = True) -> dict[str, float]:
    """One episode. ``learn``: behave with ``explore`` and record every transition (updates run when due);
    otherwise act greedily and record nothing. Each reset is seeded with ``cfg.seed + agent.episodes`` so a
    run resumed from a checkpoint (taken between episodes) sees the same episodes as an uninterrupted one."""
    obs, info = env.reset(seed=agent.cfg.seed + agent.episodes)
    mask = np.asarray(info["action_mask"]).astype(np.bool_)
    ret, steps = 0.0, 0
    last: dict[str, float] | None = None
    while True:
        action = agent.explore(obs, mask) if learn else agent.act(obs, mask, deterministic=True)
        next_obs, reward, terminated, truncated, info = env.step(action)
        next_mask = np.asarray(info["action_mask"]).astype(np.bool_)
        if learn:
            last = agent.record(obs, mask, action, float(reward), next_obs, next_mask, bool(terminated)) or last
        ret += float(reward)
        steps += 1
        obs, mask = next_obs, next_mask
        if terminated or truncated:
            break
    if learn:
        agent.episodes += 1
    out = {"episode_return": ret, "episode_length": float(steps)}
    if last is not None:
        out.update(last)
    return out


def train(
    agent: Agent,
    env: MaskedEnv,
    total_steps: int,
    *,
    on_episode: Callable[[Agent, dict[str, float]], None] | None = None,
) -> Agent:
    """Run whole episodes until ``agent.global_step >= total_steps`` (the episode in progress is finished, so
    the agent is always between episodes when this returns: the place to checkpoint)."""
    while agent.global_step < total_steps:
        figures = run_episode(agent, env)
        if on_episode is not None:
            on_episode(agent, figures)
    return agent


__all__ = [
    "SACConfig",
    "Agent",
    "Actor",
    "Critic",
    "ReplayBuffer",
    "Batch",
    "masked_policy",
    "run_episode",
    "train",
    "N_ACTIONS",
]
