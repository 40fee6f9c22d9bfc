"""``best-found``'s search: the reference upper bound, a budgeted search on the node model (see
``env.planners.baselines`` for the policy). Total time is a sum of group makespans, so for each schedule-level action it
finds a good allocation for every subset of at most Cmax jobs, then the best partition by dynamic programming over
subsets."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence

from env.node.spec import NodeSpec
from env.plan import actions
from env.plan.actions import JobAction, encode
from env.plan.allocate import core_count
from env.planners.scoring import GroupEvaluator
from env.planners.script import Script


@dataclass(frozen=True)
class Grid:
    """The options a search considers (defaults: the whole action encoding)."""

    schedules: tuple[int, ...] = tuple(range(actions.N_SCHEDULE))
    cores: tuple[Fraction, ...] = actions.CORE_FRACTIONS
    ways: tuple[Fraction, ...] = actions.WAY_FRACTIONS
    bw: tuple[int, ...] = actions.BW_PERCENTS
    splits: tuple[str, ...] = actions.SPLITS

    def action(self, c: Fraction, w: Fraction, b: int, s: str) -> int:
        key = (c, w, b, s)
        a = _ENCODED.get(key)
        if a is None:
            a = _ENCODED[key] = encode(JobAction(c, w, b, s))  # type: ignore[arg-type]
        return a


_ENCODED: dict[tuple, int] = {}

NO_PARTITIONING = Grid(ways=(Fraction(22, 22),), bw=(100,), splits=("balanced",))


_COMBOS: dict[tuple, list[tuple[Fraction, ...]]] = {}


def _core_combos(node: NodeSpec, grid: Grid, k: int) -> list[tuple[Fraction, ...]]:
    n = len(node.cpus)
    key = (n, grid.cores, k)
    if key not in _COMBOS:
        count = {c: core_count(node, c) for c in grid.cores}
        _COMBOS[key] = [c for c in itertools.product(grid.cores, repeat=k) if sum(count[x] for x in c) <= n]
    return _COMBOS[key]


def _optimise_subset(ev: GroupEvaluator, schedule: int, names: list[str], grid: Grid, rounds: int,
                     starts: int = 2, *, fixed: Sequence[tuple[str, int]] = (), free: int | None = None
                     ) -> tuple[float, list[int]]:
    """Actions for ``names`` in one group: the best core split (all ways, no cap) from ``starts`` starting points,
    then ``rounds`` of coordinate descent over the grid. ``fixed``: members already in the group, with their
    actions (they come first); ``free``: the CPUs ``names`` may take together (default: no limit beyond the node).
    (inf, []) when no core split fits."""
    k = len(names)
    w_full, b_full, s0 = max(grid.ways), max(grid.bw), grid.splits[0]
    fixed = list(fixed)
    count = {c: core_count(ev.node, c) for c in grid.cores} if free is not None else {}
    scored = []
    for combo in _core_combos(ev.node, grid, k):
        if free is not None and sum(count[c] for c in combo) > free:
            continue
        acts = [grid.action(c, w_full, b_full, s0) for c in combo]
        scored.append((ev.makespan(schedule, fixed + list(zip(names, acts))), combo))
    scored.sort(key=lambda x: x[0])
    best_t, best_acts = float("inf"), []
    for t0, combo in scored[:starts]:
        cur = [[c, w_full, b_full, s0] for c in combo]
        cur_t = t0
        for _ in range(rounds):
            improved = False
            for i in range(k):
                for dim, options in ((1, grid.ways), (2, grid.bw), (3, grid.splits), (0, grid.cores)):
                    for opt in options:
                        if opt == cur[i][dim]:
                            continue
                        trial = [list(x) for x in cur]
                        trial[i][dim] = opt
                        if free is not None and dim == 0 and sum(count[x[0]] for x in trial) > free:
                            continue
                        t = ev.makespan(schedule, fixed + list(zip(names, [grid.action(*x) for x in trial])))
                        if t < cur_t - 1e-9:
                            cur, cur_t, improved = trial, t, True
            if not improved:
                break
        if cur_t < best_t:
            best_t, best_acts = cur_t, [grid.action(*x) for x in cur]
    return best_t, best_acts


def _exhaustive_subset(ev: GroupEvaluator, schedule: int, names: list[str], grid: Grid) -> tuple[float, list[int]]:
    per_job = [grid.action(c, w, b, s) for c in grid.cores for w in grid.ways for b in grid.bw for s in grid.splits]
    n = len(ev.node.cpus)
    best_t, best_acts = float("inf"), []
    for acts in itertools.product(per_job, repeat=len(names)):
        if sum(core_count(ev.node, actions.decode(a).cores) for a in acts) > n:  # type: ignore[union-attr]
            continue
        t = ev.makespan(schedule, list(zip(names, acts)))
        if t < best_t:
            best_t, best_acts = t, list(acts)
    return best_t, best_acts


def _best_partition(sub: dict[int, tuple[float, list[int]]], full: int) -> tuple[float, dict[int, int]]:
    """The partition of ``full`` into groups in ``sub`` with the least total makespan, and the group chosen by
    subset (``env.planners.partitions.best_partition``: ties to the group of the larger bitmask)."""
    from env.planners.partitions import best_partition

    return best_partition({g: t for g, (t, _) in sub.items()}, full)


def _refine_order(ranked: Sequence[int], k: int) -> list[int]:
    """The ``k`` schedules to refine: the best of each affinity first, then the next best. Why: the screening
    uses no partitioning, where isolating jobs on separate sockets (compact) often wins, while spreading them
    (distributed) wins only once ways and bandwidth are partitioned; and local-alloc ties with first-touch in
    the model, so the plain top k could be one affinity twice and never try the other."""
    seen: set[str] = set()
    first = []
    for s in ranked:
        aff = actions.decode(s).affinity  # type: ignore[union-attr]
        if aff not in seen:
            seen.add(aff)
            first.append(s)
    out = first[:k]
    out += [s for s in ranked if s not in out][: k - len(out)]
    return out


def search(node: NodeSpec, names: Sequence[str], max_concurrency: int, grid: Grid = Grid(), *,
           exhaustive: bool = False, rounds: int = 3, refine_schedules: int = 2, max_evals: int = 60_000,
           evaluator: GroupEvaluator | None = None) -> Script:
    """The best script found for one chunk.

    Phase 1, every schedule action: each subset of at most Cmax jobs gets its best core combination (all ways,
    no cap), then the best partition (DP). Phase 2, the ``refine_schedules`` best schedules (the best of each
    affinity first: ``_refine_order``): coordinate descent
    per subset from its two best core combinations, then the DP again. ``exhaustive`` enumerates every
    combination of the grid per subset instead (small windows and grids only).
    """
    ev = evaluator if evaluator is not None else GroupEvaluator(node)
    w = len(names)
    full = (1 << w) - 1
    subsets = [m for m in range(1, full + 1) if bin(m).count("1") <= max_concurrency]
    start_evals = ev.evals

    def members(m: int) -> list[str]:
        return [names[i] for i in range(w) if m >> i & 1]

    results = []  # (total, schedule, sub, choice)
    if exhaustive:
        for schedule in grid.schedules:
            sub = {m: _exhaustive_subset(ev, schedule, members(m), grid) for m in subsets}
            results.append((*_best_partition(sub, full), schedule, sub))
    else:
        screened = []
        for schedule in grid.schedules:
            sub = {m: _optimise_subset(ev, schedule, members(m), grid, rounds=0, starts=1) for m in subsets}
            total, choice = _best_partition(sub, full)
            screened.append((total, choice, schedule, sub))
        screened.sort(key=lambda r: r[0])
        results.extend(screened)
        for schedule in _refine_order([r[2] for r in screened], refine_schedules):
            if ev.evals - start_evals > max_evals:
                break
            sub = {}
            for m in subsets:
                over = ev.evals - start_evals > max_evals
                sub[m] = _optimise_subset(ev, schedule, members(m), grid, rounds=0 if over else rounds,
                                          starts=1 if over else 2)
            results.append((*_best_partition(sub, full), schedule, sub))
    total, choice, schedule, sub = min(results, key=lambda r: r[0])
    groups = []
    m = full
    while m:
        grp = choice[m]
        slots = [i for i in range(w) if grp >> i & 1]
        groups.append(list(zip(slots, sub[grp][1])))
        m ^= grp
    script = Script(schedule, groups, predicted_total_s=total).canonical()
    script.predicted_makespans = [sub[sum(1 << s for s, _ in g)][0] for g in script.groups]
    return script
