"""The streams the stream learner trains and is judged on (all on the node model: simulated).

* ``saturated(node, n, seed, programs)``: n jobs drawn (seeded, with repeats) from ``programs`` (default: every
  program of the node's catalogue, as ``bench/stream_baselines.py`` draws them), all submitted at 0.
* ``with_arrivals(node, jobs, cmax, load, seed)``: the same jobs arriving as a Poisson process at ``load`` x packing's
  capacity (measured on them as a saturated stream), as ``bench/stream_arrivals.py`` makes them.
* ``training_pool(node, synthetic, seed)``: the programs training streams are drawn from: the node's training
  programs and ``synthetic`` generated ones (``env.sim.synthetic``); the held-out programs never.
* ``TrainingStreams``: the env's stream source: episode k gets its own generator (the run's seed and k), a stream of
  ``jobs`` jobs from the pool, Cmax from ``cmaxes``, arrivals with probability ``arrival_share`` at a load uniform
  in ``loads``.

Seeds: 101-108 are the held-out streams of the ablation (never used to choose anything); 1-3 and 200-210 choose
settings; training streams come from the run's own generator (seeded by ``seed`` x 1,000,003 + episode + 1,000).
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Sequence

import numpy as np

from env.episode.stream import StreamJob, run_stream
from env.node.spec import NodeSpec
from env.planners.streams import Packing


def saturated(node: NodeSpec, n: int, seed: int, programs: Sequence[str] | None = None) -> list[StreamJob]:
    from env.sim.catalogue import catalogue
    from env.sim.world import world_for

    world, cat = world_for(node), catalogue(node)
    rng = random.Random(seed)
    pool = list(programs) if programs is not None else list(world.all_jobs)
    names = [rng.choice(pool) for _ in range(n)]
    return [StreamJob(f"{k}-{x}", x, world.entries[x].params, cat[x].solo_s) for k, x in enumerate(names)]


def with_arrivals(node: NodeSpec, jobs: Sequence[StreamJob], cmax: int, load: float, seed: int) -> list[StreamJob]:
    capacity = len(jobs) / run_stream(node, jobs, cmax, Packing()).makespan_s
    rng, t, out = random.Random(seed * 1000 + cmax), 0.0, []
    for j in jobs:
        out.append(replace(j, submit_s=t))
        t += rng.expovariate(load * capacity)
    return out


def training_pool(node: NodeSpec, synthetic: int, seed: int) -> list[str]:
    from env.sim.synthetic import synthetic_names
    from env.sim.world import world_for

    train = list(world_for(node).train_jobs)
    if not synthetic:
        return train
    return train * max(1, round(synthetic / len(train))) + list(synthetic_names(synthetic, seed))


class TrainingStreams:
    """The env's stream source for training (``CoScheduleStreamEnv(streams=...)``)."""

    def __init__(self, node: NodeSpec, pool: Sequence[str], seed: int, jobs: tuple[int, int], cmaxes: Sequence[int],
                 arrival_share: float, loads: tuple[float, float]) -> None:
        self.node, self.pool, self.seed = node, list(pool), seed
        self.jobs, self.cmaxes, self.arrival_share, self.loads = jobs, tuple(cmaxes), arrival_share, loads

    def draw(self, episode: int) -> tuple[list[StreamJob], int]:
        rng = np.random.default_rng([self.seed, episode])
        n = int(rng.integers(self.jobs[0], self.jobs[1] + 1))
        cmax = int(rng.choice(self.cmaxes))
        stream_seed = self.seed * 1_000_003 + episode + 1_000
        jobs = saturated(self.node, n, stream_seed, self.pool)
        if rng.random() < self.arrival_share:
            jobs = with_arrivals(self.node, jobs, cmax, float(rng.uniform(*self.loads)), stream_seed)
        return jobs, cmax


def eval_streams(node: NodeSpec, seeds: Sequence[int], cmaxes: Sequence[int], loads: Sequence[float] = (),
                 n: int = 48) -> list[tuple[str, list[StreamJob], int]]:
    """(label, jobs, Cmax) of each evaluation stream: saturated at each Cmax, and with arrivals at each load."""
    out = []
    for cmax in cmaxes:
        for seed in seeds:
            jobs = saturated(node, n, seed)
            out.append((f"sat C{cmax} s{seed}", jobs, cmax))
            for load in loads:
                out.append((f"arr{int(load * 100)} C{cmax} s{seed}", with_arrivals(node, jobs, cmax, load, seed), cmax))
    return out


__all__ = ["saturated", "with_arrivals", "training_pool", "TrainingStreams", "eval_streams"]
