"""Baseline policies and the policy registry (named in docs/design/interfaces.md).

Every policy but time sharing plans through ``env.episode.window`` (the one planning path); search policies find a
*script* (a schedule-level action and ordered groups of (job, job-level action)) and replay it through the
episode with ``ScriptChooser``, so their plans are built exactly like the agent's.

* ``timeshare``: each job alone on the whole node, in queue order (the baseline: throughput 1.0 by definition).
  The whole node is not an action of the encoding (cores top out at 7/8), so it is placed with
  ``PlanBuilder.place_whole_node``.
* ``greedy`` (profiles only, no search): compact affinity, first-touch. Jobs are ranked by memory intensity
  (LLC misses per second of their solo run; scale factor when the counter is missing) and the most
  memory-bound job is paired with the most compute-bound one, the next with the next, ... (groups of two;
  with Cmax 1, alone). A pair shares the node's cores in proportion to the two jobs' scale factors (the
  nearest pair of core options that fits), all ways shared, no bandwidth cap; a job left alone gets 7/8.
* ``random``: a uniformly random valid action at every step (seeded): a random valid plan.
* ``pairs`` (like the paper's OCRP-ML): best pairing with Cmax = 2 searched on the simulated node, cores and
  affinity/memory policy only (all ways shared, no bandwidth cap: no partitioning).
* ``best-found``: the reference upper bound, a budgeted search on the simulated node. Total time is a sum of
  group makespans, so for each schedule-level action it finds a good allocation for every subset of at most
  Cmax jobs, then the best partition by dynamic programming over subsets. Phase 1, all six schedule actions:
  per subset, every combination of core options (all ways, no cap). Phase 2, the two best schedule actions:
  per subset, coordinate descent from its two best core combinations (per job: ways, bandwidth, split, cores;
  until no change, at most ``rounds`` = 3 passes). Budget: at most ``max_evals`` = 60,000 new group
  simulations per chunk (after it, refinement stops); a W = 6, Cmax = 4 window takes about 6,000 simulations
  (allocations the model cannot tell apart share one), 2-3 s on the development machine. ``search(..., exhaustive=True)`` enumerates a grid completely (small
  windows, reduced grids): on W = 4 windows best-found matched it exactly (``bench/sim_bench.py``).
* ``agent``, ``fifo`` and ``agent-search`` (a trained model's plans) live in ``training.policies``; the registry of
  names is ``env.planners.registry``.
"""

from __future__ import annotations

import random as _random
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Protocol, Sequence

import numpy as np

from env.episode.jobinfo import JobInfo, JobInfoProvider
from env.episode.window import DEFAULT_WINDOW, Episode
from env.episode.planning import plan_window
from env.errors import InputError
from env.node.spec import NodeSpec
from env.plan import actions
from env.plan.actions import JobAction, ScheduleAction, encode
from env.plan.allocate import core_count
from env.plan.builder import PlanBuilder
from env.plan.models import Plan, Window
from env.planners.bestfound import NO_PARTITIONING, Grid, search
from env.planners.scoring import GroupEvaluator
from env.planners.script import Script, ScriptChooser


@dataclass
class PlanContext:
    node: NodeSpec
    provider: JobInfoProvider
    window_size: int = DEFAULT_WINDOW
    seed: int | None = None
    simulated: bool = True  # searches need the simulated node
    pin_runtime: Path | None = None  # the C pinning runtime's library, when the plan should load it
    baseline_provider: JobInfoProvider | None = None  # the guard's baselines' job information, when not ``provider``


class Policy(Protocol):
    name: str

    def plan(self, window: Window, ctx: PlanContext) -> Plan: ...


class TimeSharing:
    name = "timeshare"

    def plan(self, window: Window, ctx: PlanContext) -> Plan:
        b = PlanBuilder(node=ctx.node, schedule=ScheduleAction("compact", "first-touch"),
                        max_concurrency=window.max_concurrency, window_size=ctx.window_size, pin_runtime=ctx.pin_runtime)
        for job in window.jobs:
            info = ctx.provider.get(job.profile_name)
            if info is None:
                b.exclude(job, ctx.provider.missing_reason(job.profile_name))
            else:
                b.place_whole_node(job)
        solo = [info.solo_s for j in window.jobs if (info := ctx.provider.get(j.profile_name)) is not None]
        return b.build(self.name, predicted_makespans=solo, predicted_throughput=1.0,
                       predictions_source="profiles: each job's solo time")


class _ScriptPolicy:
    """A policy that decides a script per chunk and replays it through the episode."""

    name = "script"
    predicts = False

    def script(self, ep: Episode, ctx: PlanContext) -> Script:
        raise NotImplementedError

    def plan(self, window: Window, ctx: PlanContext) -> Plan:
        policy = self
        scripts: list[Script] = []

        class _Lazy:
            chooser: ScriptChooser | None = None

            def __call__(self, obs, mask, ep):
                if self.chooser is None:
                    s = policy.script(ep, ctx)
                    scripts.append(s)
                    self.chooser = ScriptChooser(s)
                return self.chooser(obs, mask, ep)

        def predictions(episodes: list[Episode]) -> dict:
            if not (self.predicts and scripts and all(s.predicted_makespans is not None for s in scripts)):
                return {}
            makespans = [t for s in scripts for t in s.predicted_makespans]  # type: ignore[union-attr]
            solo = sum(ep.solo_total_s() for ep in episodes)
            return {"predicted_makespans": makespans, "predicted_throughput": solo / sum(makespans),
                    "predictions_source": f"simulated: {ctx.node.name}"}

        return plan_window(window, ctx.node, ctx.provider, lambda ep: _Lazy(), policy=self.name,
                           window_size=ctx.window_size, chooser_per_chunk=True, pin_runtime=ctx.pin_runtime,
                           finish=predictions).plan


def _nearest_fit(node: NodeSpec, share: float, options: Sequence[Fraction]) -> tuple[Fraction, Fraction]:
    """The pair of core options closest to (share, 1 - share) whose core counts fit the node."""
    n = len(node.cpus)
    pairs = [(a, b) for a in options for b in options if core_count(node, a) + core_count(node, b) <= n]
    return min(pairs, key=lambda p: (abs(float(p[0]) - share) + abs(float(p[1]) - (1 - share)), -(p[0] + p[1])))


class Greedy(_ScriptPolicy):
    name = "greedy"

    def script(self, ep: Episode, ctx: PlanContext) -> Script:
        infos = ep.infos
        have_l3 = all(i.l3_misses_per_s is not None for i in infos)

        def intensity(i: JobInfo) -> float:
            if have_l3:
                return float(i.l3_misses_per_s)  # type: ignore[arg-type]
            return -(i.scale_factor or 1.0)  # no counter: the worse it scales, the more memory-bound we assume

        order = sorted(range(len(infos)), key=lambda s: (-intensity(infos[s]), s))
        full_w, full_bw = max(actions.WAY_FRACTIONS), max(actions.BW_PERCENTS)
        alone = encode(JobAction(max(actions.CORE_FRACTIONS), full_w, full_bw, "balanced"))
        groups: list[list[tuple[int, int]]] = []
        if ep.max_concurrency < 2:
            groups = [[(s, alone)] for s in order]
        else:
            lo, hi = 0, len(order) - 1
            while lo <= hi:
                if lo == hi:
                    groups.append([(order[lo], alone)])
                    break
                a, b = order[lo], order[hi]  # memory-bound, compute-bound
                sa, sb = infos[a].scale_factor or 1.0, infos[b].scale_factor or 1.0
                ca, cb = _nearest_fit(ctx.node, sa / (sa + sb), actions.CORE_FRACTIONS)
                groups.append([(a, encode(JobAction(ca, full_w, full_bw, "balanced"))),
                               (b, encode(JobAction(cb, full_w, full_bw, "balanced")))])
                lo, hi = lo + 1, hi - 1
        return Script(encode(ScheduleAction("compact", "first-touch")), groups).canonical()


class RandomPolicy:
    name = "random"

    def plan(self, window: Window, ctx: PlanContext) -> Plan:
        rng = _random.Random(ctx.seed if ctx.seed is not None else 0)

        def chooser(obs, mask, ep):
            return rng.choice(np.flatnonzero(mask).tolist())

        return plan_window(window, ctx.node, ctx.provider, chooser, policy=self.name, window_size=ctx.window_size,
                           pin_runtime=ctx.pin_runtime).plan


class _SearchPolicy(_ScriptPolicy):
    predicts = True
    grid = Grid()
    cmax: int | None = None

    def __init__(self, max_evals: int = 60_000, rounds: int = 3) -> None:
        self.max_evals = max_evals
        self.rounds = rounds
        self._evaluator: GroupEvaluator | None = None

    def script(self, ep: Episode, ctx: PlanContext) -> Script:
        if not ctx.simulated or not ctx.node.simulated:
            raise InputError(f"policy {self.name!r} searches on the simulated node: use a sim node (e.g. --node sim:reference)")
        if self._evaluator is None or self._evaluator.node is not ctx.node:
            self._evaluator = GroupEvaluator(ctx.node)
        names = [i.name for i in ep.infos]
        cmax = min(ep.max_concurrency, self.cmax or ep.max_concurrency)
        return search(ctx.node, names, cmax, self.grid, rounds=self.rounds, max_evals=self.max_evals,
                      evaluator=self._evaluator)


class BestFound(_SearchPolicy):
    name = "best-found"


class Pairs(_SearchPolicy):
    name = "pairs"
    grid = NO_PARTITIONING
    cmax = 2
