"""``cosched train --lookahead-rounds R`` (sim): the actor improved by one-step lookahead (rollout policy iteration).

Why: after fine-tuning (``training.finetune``) the actor's greedy plans sit near 93 % of best-found on held-out
windows (simulated), and more policy gradient does not move them. Yet its mistakes are near misses: choosing at
every step the best of the actor's four highest-ranked actions, each completed by the actor itself and scored by
the simulated node, plans at 97 % on the same windows (measured on 60 of them). That is the rollout algorithm
(Bertsekas, "Rollout algorithms for combinatorial optimization"), which improves on its base policy; this phase
teaches the actor what the rollouts find.

Each round, on ``windows`` fresh training windows (the training jobs only, never the evaluation file's):

* at every step with a choice, the actor's ``k`` highest-ranked valid actions are each taken and the episode
  completed greedily by the actor; ``Q(c)`` is that plan's throughput vs time sharing on the simulated node
  (deterministic: the ``GroupEvaluator`` of ``best-found``). The episode goes on with the best candidate;
* the actor is then trained for ``updates`` Adam steps on those states with the exact expected gain over the
  candidates, ``loss = −Σ_c π(c|s) · (Q(c) − Q(greedy))``: mass moves towards the candidates that beat the greedy
  action, by how much they beat it, and nothing is pushed where the candidates tie. Hard labels (cross-entropy to
  the best candidate) were measured worse than no phase at all: they overwrite the actor on every near-tie.

The rounds are policy iteration with a small step (the learning rate decays linearly to zero over the phase);
the final actor is kept, validated each round. Episodes are
played by forked workers in contiguous chunks and are deterministic (greedy), so the data and the actor are the
same for any number of workers. ``RUN_DIR/lookahead.jsonl`` and ``lookahead.png`` hold the curve;
``lookahead-actor.npz`` and ``lookahead.json`` let a resumed run skip a finished phase.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np


@dataclass(frozen=True)
class LookaheadConfig:
    """Hyperparameters of the lookahead phase (``TrainConfig.lookahead_*``)."""

    rounds: int = 0  # 0: no phase
    windows: int = 2_000  # fresh training windows a round
    k: int = 4  # candidates per state: the actor's k highest-ranked valid actions
    updates: int = 1_000  # Adam steps a round
    batch: int = 256
    lr: float = 5e-5  # Adam; decays linearly to 0 over the phase (a constant rate measured oscillating by ±0.2 points late)
    gain_scale: float = 10.0  # Q differences are throughputs (0.1 = 10 % of time sharing's): × this

    def __post_init__(self) -> None:
        if self.rounds < 0 or self.windows < 1 or self.k < 2 or self.updates < 1 or self.batch < 1 or not self.lr > 0:
            raise ValueError("lookahead: rounds >= 0, windows >= 1, k >= 2, updates >= 1, batch >= 1 and lr > 0")


def _finish_greedy(ep: Any, forward: Callable[[np.ndarray], np.ndarray], ev: Any) -> float:
    from training.finetune import episode_throughput

    while not ep.done:
        valid = np.flatnonzero(ep.action_mask())
        ep.step(int(valid[np.argmax(forward(ep.observation())[valid])]) if valid.size > 1 else int(valid[0]))
    return episode_throughput(ep, ev)


def lookahead_states(setup: Any, weights: list, items: Sequence[tuple[Sequence[str], int]], k: int,
                     window_size: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Every window of ``items`` ((names, cmax) each) played with one-step lookahead by the actor ``weights``:
    for each state with a choice, (observation, mask, gains), gains a 257-vector holding Q(c) − Q(greedy) at the
    ``k`` candidates (the greedy one first, ties to the higher-ranked) and 0 elsewhere."""
    from agent.policy import MeanLogits
    from training.finetune import _evaluator, new_episode

    forward, ev = MeanLogits([weights]), _evaluator(setup.node)
    out = []
    for names, cmax in items:
        ep = new_episode(setup, names, cmax, window_size)
        while not ep.done:
            mask = ep.action_mask()
            valid = np.flatnonzero(mask)
            if valid.size == 1:
                ep.step(int(valid[0]))
                continue
            obs = ep.observation()
            cands = valid[np.argsort(-forward(obs)[valid], kind="stable")[:k]]
            q = []
            for c in cands:
                trial = new_episode(setup, names, cmax, window_size)
                for a in ep.history:
                    trial.step(a)
                trial.step(int(c))
                q.append(_finish_greedy(trial, forward, ev))
            gains = np.zeros(mask.size, np.float32)
            gains[cands] = np.asarray(q, np.float32) - np.float32(q[0])
            out.append((obs, mask.astype(np.bool_), gains))
            ep.step(int(cands[int(np.argmax(q))]))
    return out


_FORKED: Any = None  # (setup, weights, k, window_size) for forked workers, set before the pool forks


def _forked_states(items: list[tuple[Sequence[str], int]]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    setup, weights, k, window_size = _FORKED
    return lookahead_states(setup, weights, items, k, window_size)


def lookahead_loss(net: Any, obs: Any, masks: Any, gains: Any, scale: float) -> Any:
    """−mean over states of Σ_c π(c|s) · gain(c) · scale, π the masked softmax."""
    import torch

    pi = torch.softmax(net(obs).masked_fill(~masks, -1e9), dim=1)
    return -(pi * gains * scale).sum(dim=1).mean()


def improve(layers: list[tuple[np.ndarray, np.ndarray]], setup: Any, cfg: LookaheadConfig, *, window_size: int,
            cmaxes: Sequence[int], seed: int, validate: Callable[[list], dict[str, Any]], workers: int = 1,
            on_progress: Callable[[int, str], None] | None = None, say: Callable[[str], None] = lambda s: None,
            log: Callable[[dict[str, Any]], None] | None = None) -> tuple[list[tuple[np.ndarray, np.ndarray]], dict[str, Any]]:
    """``cfg.rounds`` rounds of lookahead improvement of ``layers`` (the model file's (weight, bias) list) on the
    sim backend. Returns the final actor and the phase's figures."""
    import multiprocessing

    import torch

    from training.demos import sample_window
    from training.finetune import torch_actor

    global _FORKED
    if setup.backend.name != "sim":
        raise ValueError("the lookahead phase scores every candidate on the simulated node: it is for --backend sim")
    t0 = time.monotonic()
    torch.manual_seed(seed)
    wrng = random.Random(seed + 104_729)
    net, current = torch_actor(layers)
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    total = max(1, cfg.rounds * cfg.updates)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda u: max(0.0, 1.0 - u / total))
    start_val = validate(layers)
    evals = [{"round": 0, **start_val}]
    weights = current()
    jobs = list(setup.jobs)
    for r in range(1, cfg.rounds + 1):
        items = [(sample_window(wrng, jobs, window_size), cmaxes[i % len(cmaxes)]) for i in range(cfg.windows)]
        if workers > 1:
            size = -(-len(items) // workers)
            _FORKED = (setup, weights, cfg.k, window_size)
            try:
                with multiprocessing.get_context("fork").Pool(workers) as pool:
                    states = [s for part in pool.map(_forked_states, [items[i: i + size] for i in range(0, len(items), size)])
                              for s in part]
            finally:
                _FORKED = None
        else:
            states = lookahead_states(setup, weights, items, cfg.k, window_size)
        obs = torch.as_tensor(np.asarray([s[0] for s in states], np.float32))
        masks = torch.as_tensor(np.asarray([s[1] for s in states], np.bool_))
        gains = torch.as_tensor(np.asarray([s[2] for s in states], np.float32))
        improvable = float((gains.max(dim=1).values > 0).float().mean())
        gen = torch.Generator().manual_seed(seed * 1_000 + r)
        for _ in range(cfg.updates):
            idx = torch.randint(len(obs), (cfg.batch,), generator=gen)
            loss = lookahead_loss(net, obs[idx], masks[idx], gains[idx], cfg.gain_scale)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
        weights = current()
        val = validate(weights)
        evals.append({"round": r, **val})
        rec = {"kind": "lookahead", "round": r, "states": len(states), "improvable": improvable, **val,
               "wall_s": round(time.monotonic() - t0, 1)}
        if log is not None:
            log(rec)
        say(f"lookahead round {r}/{cfg.rounds}: {len(states)} states, {improvable * 100:.1f} % improvable by a "
            f"candidate, validation {val['agent']:.3f} (start {start_val['agent']:.3f}) (simulated)")
        if on_progress is not None:
            on_progress(r, f"validation {val['agent']:.3f} (simulated)")
    figures = {"rounds": cfg.rounds, "windows": cfg.windows, "k": cfg.k, "updates": cfg.updates, "lr": cfg.lr,
               "evals": evals, "start_validation": start_val["agent"], "kept_validation": evals[-1]["agent"],
               "workers": workers, "wall_s": round(time.monotonic() - t0, 1)}
    return weights, figures


def lookahead_phase(layers: list[tuple[np.ndarray, np.ndarray]], cfg: Any, setup: Any, run_dir: Path, *, progress: bool,
                    say: Callable[[str], None]) -> tuple[list[tuple[np.ndarray, np.ndarray]], dict[str, Any]]:
    """The phase as ``cosched train`` runs it (``cfg``: a TrainConfig; ``training.finetune.resumable_phase``:
    ``RUN_DIR/lookahead.jsonl``, ``lookahead-actor.npz``... reused on resume) with its curve ``lookahead.png``."""
    from training.finetune import plot_validation, resumable_phase
    from training.train import validate

    lcfg = LookaheadConfig(rounds=cfg.lookahead_rounds, windows=cfg.lookahead_windows, k=cfg.lookahead_k,
                           updates=cfg.lookahead_updates, lr=cfg.lookahead_lr)

    def run(**hooks: Any) -> tuple[list, dict[str, Any]]:
        hooks["say"](f"lookahead: {lcfg.rounds} rounds of {lcfg.windows} training windows, the actor's {lcfg.k} best "
                     f"actions at every step completed by the actor and scored on the simulated node, then "
                     f"{lcfg.updates} updates")
        return improve(layers, setup, lcfg, window_size=cfg.window_size, cmaxes=cfg.cmax, seed=cfg.seed,
                       validate=lambda ls: validate(ls, setup, cfg.window_size), workers=cfg.demo_workers, **hooks)

    def finish(figs: dict[str, Any], log_path: Path) -> None:
        say(f"lookahead (simulated): validation {figs['start_validation']:.3f} -> {figs['kept_validation']:.3f}, "
            f"{figs['wall_s']:.0f} s")
        plot_validation(figs["evals"], "round", "lookahead round",
                        f"lookahead: {figs['windows']} windows a round, {figs['k']} candidates (simulated)",
                        run_dir / "lookahead.png")

    return resumable_phase(run_dir, "lookahead", "lookahead-actor.npz", "lookahead", lcfg.rounds, progress=progress,
                           say=say, run=run, finish=finish)


__all__ = ["LookaheadConfig", "improve", "lookahead_loss", "lookahead_phase", "lookahead_states"]
