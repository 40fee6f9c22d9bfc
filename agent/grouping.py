"""The agent's plan from its group-cost head (numpy only; ``agent.groupnet``): which jobs run together, each one's
core option and the window's schedule, as an episode chooser.

The rule (no search on any node model; every value comes from the head):

* **grouping**: every group of at most Cmax of the window's jobs (above ``PRUNE_ABOVE`` jobs, groups of 3 or more
  only of jobs among each other's best pair partners) gets a predicted time, sum of solo times / exp V. The plan is
  the partition with the least predicted total: exact (a dynamic programme over the subsets, one table a window)
  up to ``EXACT_JOBS`` jobs; beyond, greedy (largest saving first, the saving being the members' predicted times
  alone minus the group's) and then improved two groups at a time, each pair's jobs re-partitioned exactly. In a
  state with an open group, the open group is kept whole.
* **options**: the open group's members' core options maximise Q (with the options already placed fixed and the
  CPUs left), under the schedule taken at the first step, which is the schedule option with the least predicted
  total time of the grouping.
* **as a chooser**: at the first step the schedule; then the current job joins (with its option) when it belongs to
  the open group's planned group, else it is skipped; the plan is made again only where the state leaves it.

Why both partitions: greedy alone missed the optimum of a five-job test window (it takes the best-saving group
first); the exact one is exponential in W, so windows of up to 32 jobs take the greedy one with the pairwise repair
(docs/training.md, 2026-11-25, commit abf802b).
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import Any

import numpy as np

from agent.groupnet import GroupNetShape, encode, group_values, option_values

CHUNK = 8192  # groups per forward pass (bounds memory at W 32)
EXACT_JOBS = 10  # the exact partition up to this many jobs (2^10 states), the greedy one improved beyond
# Windows of more than PRUNE_ABOVE jobs score groups of 3 or more only among each job's PARTNERS best pair partners
# (at W 32, Cmax 4: about 36,000 groups of 4 otherwise, a second of forward passes)
PRUNE_ABOVE, PARTNERS = 16, 6


class GroupPlanner:
    """The head's values on a window's groups and the partitions and options made from them."""

    def __init__(self, head: Any, params: dict[str, np.ndarray]) -> None:
        self.shape = GroupNetShape.from_dict(head.net)
        self.p = params
        self.core_actions = list(head.core_actions)
        self.core_cpus = list(head.core_cpus)
        self.schedule_actions = list(head.schedule_actions)
        self._combo_cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._encoded: dict[tuple[bytes, int], np.ndarray] = {}  # the members. features -> their embeddings

    # -- the network on groups of a window ---------------------------------------------------------------
    def _batch(self, x: np.ndarray, groups: list[tuple[int, ...]]) -> tuple[np.ndarray, np.ndarray]:
        K = self.shape.max_group
        xs = np.zeros((len(groups), K, x.shape[1]), np.float32)
        ms = np.zeros((len(groups), K), np.float32)
        for i, g in enumerate(groups):
            xs[i, :len(g)] = x[list(g)]
            ms[i, :len(g)] = 1.0
        return xs, ms

    def _values_of_size(self, x: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """V of the groups ``idx`` (G, k): member slots, all groups of one size."""
        out = []
        for b in range(0, len(idx), CHUNK):
            part = idx[b:b + CHUNK]
            xs = np.zeros((len(part), self.shape.max_group, x.shape[1]), np.float32)
            ms = np.zeros((len(part), self.shape.max_group), np.float32)
            xs[:, :idx.shape[1]] = x[part]
            ms[:, :idx.shape[1]] = 1.0
            out.append(group_values(self.shape, self.p, encode(self.shape, self.p, xs, ms), ms))
        return np.concatenate(out) if out else np.zeros(0, np.float32)

    def ranked(self, x: np.ndarray, solo: np.ndarray, cmax: int) -> tuple[np.ndarray, dict[int, float]]:
        """(bitmasks of every group of at most ``cmax`` jobs, largest saving first (ties: the group of the lower
        slots first, so equal jobs in canonical order give one plan); each group's predicted time by bitmask)."""
        n = len(solo)
        masks, times, savings = [], [], []
        alone = np.zeros(n)
        near = np.ones((n, n), bool)  # pairs allowed in groups of 3 or more
        for k in range(1, min(cmax, self.shape.max_group, n) + 1):
            idx = np.array(list(itertools.combinations(range(n), k)), np.int64).reshape(-1, k)
            if k >= 3 and n > PRUNE_ABOVE:
                ok = np.ones(len(idx), bool)
                for a, b in itertools.combinations(range(k), 2):
                    ok &= near[idx[:, a], idx[:, b]]
                idx = idx[ok]
            t = solo[idx].sum(1) / np.exp(self._values_of_size(x, idx).astype(np.float64))
            if k == 1:
                alone = t
            if k == 2 and n > PRUNE_ABOVE:  # each job's PARTNERS best partners by pair saving
                pair = np.full((n, n), -np.inf)
                pair[idx[:, 0], idx[:, 1]] = pair[idx[:, 1], idx[:, 0]] = alone[idx].sum(1) - t
                top = np.argsort(-pair, axis=1, kind="stable")[:, :PARTNERS]
                near = np.zeros((n, n), bool)
                near[np.repeat(np.arange(n), PARTNERS), top.ravel()] = True
                near |= near.T
            masks.append((np.int64(1) << idx).sum(1))
            times.append(t)
            savings.append(alone[idx].sum(1) - t)
        m, t, saving = np.concatenate(masks), np.concatenate(times), np.concatenate(savings)
        order = np.lexsort((np.arange(len(m)), -saving))
        return m[order], dict(zip(m.tolist(), t.tolist()))

    @staticmethod
    def partition(masks: np.ndarray, avail: int, forced: int = 0) -> list[int]:
        """The greedy partition of the jobs in ``avail`` (a bitmask) from ``ranked``'s order; a group holds all of
        ``forced`` or none of it."""
        out: list[int] = []
        while avail:
            ok = (masks & ~avail) == 0
            if forced:
                inter = masks & forced
                ok &= (inter == forced) | (inter == 0)
            i = int(np.argmax(ok))
            if not ok[i]:  # cannot happen while every singleton is ranked; stop rather than loop
                break
            out.append(int(masks[i]))
            avail &= ~int(masks[i])
            if masks[i] & forced:
                forced = 0
        return out

    @classmethod
    def exact(cls, jobs: list[int], cost: dict[int, float], cmax: int, forced: int = 0) -> list[int]:
        """The partition of ``jobs`` (slots) with the least predicted total time (``table`` over their subsets;
        2^len(jobs) states: small sets only). ``forced``: jobs that stay in one group."""
        n = len(jobs)
        glob = {}  # local bitmask (bit i: jobs[i]) -> the group's bitmask of slots
        for k in range(1, min(cmax, n) + 1):
            for g in itertools.combinations(range(n), k):
                gm = sum(1 << jobs[i] for i in g)
                if gm in cost:
                    glob[sum(1 << i for i in g)] = gm
        local_cost = {lm: cost[gm] for lm, gm in glob.items()}
        local_forced = sum(1 << i for i, j in enumerate(jobs) if forced >> j & 1)
        parts = cls.from_table(*cls.table(n, local_cost, cmax), local_cost, (1 << n) - 1, local_forced)
        return sorted(glob[g] for g in parts)

    @staticmethod
    def table(n: int, cost: dict[int, float], cmax: int) -> tuple[np.ndarray, np.ndarray]:
        """The exact partitions of every subset of the window's n jobs at once (a dynamic programme over the 2^n
        subsets, each one's lowest job's group chosen): ``f[m]`` the least predicted total of the jobs in m, ``pick[m]``
        the group (bitmask) of m's lowest job in it (ties: the lower bitmask). In Python over lists made once per
        (n, cmax) (``_inside``): 12x faster than the same programme in numpy, whose per-subset calls dominated.
        The planners' ``env.planners.partitions.least_total`` is the same programme (agent/ imports nothing of env/):
        tests/env/test_partitions.py holds the two equal."""
        size = 1 << n
        value = [math.inf] * size  # by group bitmask: its predicted time, inf for a group not in cost
        first = [0] * n  # each job's lowest-bitmask group in cost: the pick where no partition exists
        for g in sorted(cost):
            if g < size and g.bit_count() <= cmax:
                value[g] = cost[g]
                low = (g & -g).bit_length() - 1
                if not first[low]:
                    first[low] = g
        inside = _inside(n, cmax)
        f = [0.0] * size
        pick = [0] * size
        for m in range(1, size):
            best, chosen = math.inf, first[(m & -m).bit_length() - 1]
            for g in inside[m]:
                t = value[g] + f[m ^ g]
                if t < best:
                    best, chosen = t, g
            f[m], pick[m] = best, chosen
        f[0] = 0.0
        return np.array(f), np.array(pick, np.int64)

    @staticmethod
    def from_table(f: np.ndarray, pick: np.ndarray, cost: dict[int, float], avail: int, forced: int = 0) -> list[int]:
        """``table``'s partition of the jobs in ``avail``, ``forced`` in one group (its best group, the rest exact)."""
        out = []
        if forced:
            g = min((g for g in cost if g & forced == forced and g & ~avail == 0), key=lambda g: (cost[g] + f[avail ^ g], g))
            out.append(g)
            avail ^= g
        while avail:
            g = int(pick[avail])
            out.append(g)
            avail ^= g
        return sorted(out)

    @classmethod
    def improve(cls, parts: list[int], cost: dict[int, float], cmax: int, forced: int = 0, max_passes: int = 50,
                memo: dict[tuple[int, int], list[int]] | None = None) -> list[int]:
        """Local search on the predicted times from ``parts``: the jobs of two groups re-partitioned exactly
        (``exact``, at most 2 Cmax jobs), pairs in a fixed order, while that lowers the predicted total. ``memo``:
        the exact partitions of the window already found, by (jobs, forced)."""
        memo = {} if memo is None else memo
        parts = sorted(parts)
        for _ in range(max_passes):
            found = False
            for ia, ib in itertools.combinations(range(len(parts)), 2):
                a, b = parts[ia], parts[ib]
                key = (a | b, forced & (a | b))
                best = memo.get(key)
                if best is None:
                    best = memo[key] = cls.exact(_members(a | b), cost, cmax, key[1])
                if sum(cost[g] for g in best) < cost[a] + cost[b] - 1e-9:
                    parts = sorted([g for i, g in enumerate(parts) if i not in (ia, ib)] + best)
                    found = True
                    break
            if not found:
                break
        return parts

    def _combos(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Every core option per member of k members (C, k) and the CPUs each combination takes (C,)."""
        hit = self._combo_cache.get(k)
        if hit is None:
            c = np.array(list(itertools.product(range(self.shape.n_cores), repeat=k)), np.int64).reshape(-1, k)
            hit = self._combo_cache[k] = (c, np.asarray(self.core_cpus, np.int64)[c].sum(1))
        return hit

    def option_values(self, x: np.ndarray, members: list[int], fixed: dict[int, int], free_cpus: int,
                      schedules: list[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(Q (len(schedules), C), core options (C, len(members))) of every combination of core options of the
        members not in ``fixed`` that fits ``free_cpus`` together (C may be 0), under ``schedules`` (default all)."""
        loose = [i for i, j in enumerate(members) if j not in fixed]
        combos, cpus = self._combos(len(loose))
        combos = combos[cpus <= free_cpus]
        rows = np.zeros((len(combos), len(members)), np.int64)
        for i, j in enumerate(members):
            if j in fixed:
                rows[:, i] = fixed[j]
        rows[:, loose] = combos
        sch = list(range(len(self.schedule_actions))) if schedules is None else schedules
        S, K = len(sch), self.shape.max_group
        if not len(rows):
            return np.zeros((S, 0), np.float32), rows
        cores = np.zeros((1, S * len(rows), K), np.int64)
        cores[0, :, :len(members)] = np.tile(rows, (S, 1))
        sched = np.repeat(np.asarray(sch, np.int64), len(rows))[None]
        xs, ms = self._batch(x, [tuple(members)])
        key = (x[members].tobytes(), len(members))
        h = self._encoded.get(key)
        if h is None:
            if len(self._encoded) > 4096:
                self._encoded.clear()
            h = self._encoded[key] = encode(self.shape, self.p, xs, ms)
        q = option_values(self.shape, self.p, h, ms, cores, sched)[0]
        return q.reshape(S, len(rows)), rows


@functools.lru_cache(maxsize=16)
def _inside(n: int, cmax: int) -> tuple[tuple[int, ...], ...]:
    """For each subset m of n jobs: the groups of at most ``cmax`` jobs that hold m's lowest job and lie inside m,
    in increasing bitmask order."""
    by_low: dict[int, list[int]] = {}
    for g in range(1, 1 << n):
        if g.bit_count() <= cmax:
            by_low.setdefault(g & -g, []).append(g)
    return ((),) + tuple(tuple(g for g in by_low[m & -m] if g & m == g) for m in range(1, 1 << n))


def _members(mask: int) -> list[int]:
    return [i for i in range(mask.bit_length()) if mask >> i & 1]


class GroupChooser:
    """``GroupPlanner`` as an ``env.episode.window`` chooser (it reads the episode: its jobs' features and solo times,
    the open group, the queue). ``fallback``: the chooser asked in a state the plan does not cover (a schedule
    action the head has no option for, or a planned action the mask forbids)."""

    reads_obs = False

    def __init__(self, planner: GroupPlanner, fallback: Any) -> None:
        self.planner = planner
        self.fallback = fallback
        self._episode: Any = None
        self._state: tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, float]] | None = None
        self._key: tuple = ()
        self._groupings: dict[tuple[int, int], list[int]] = {}  # (avail, forced) -> grouping, for the window
        self._exact: dict[tuple[int, int], list[int]] = {}  # improve's exact partitions of two groups, for the window
        self._table: tuple[np.ndarray, np.ndarray] | None = None  # the window's exact partitions (small windows)
        self._options: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}  # option_values, for the window
        self._plan: list[int] = []

    def _window(self, ep: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, float]]:
        """The window's tables (features, solo times, ranked groups, predicted times), made once per window: a
        search's fresh episodes of one window share them; the stored plan is per episode."""
        if ep is not self._episode or self._state is None:
            key = (ep.max_concurrency, tuple((i.name, i.solo_s, i.features.tobytes()) for i in ep.infos))
            if key != self._key or self._state is None:
                x = np.array([i.features for i in ep.infos], np.float32)
                solo = np.array([i.solo_s for i in ep.infos], np.float64)
                masks, cost = self.planner.ranked(x, solo, ep.max_concurrency)
                self._key, self._state, self._groupings, self._exact = key, (x, solo, masks, cost), {}, {}
                self._table, self._options = None, {}
            self._episode, self._plan = ep, []
        return self._state

    def grouping(self, ep: Any, avail: int, forced: int = 0) -> list[int]:
        """The planned groups (bitmasks of slots) of the jobs in ``avail``, ``forced`` in one of them: the exact
        partition of up to EXACT_JOBS jobs, else the greedy one improved two groups at a time."""
        _, _, masks, cost = self._window(ep)
        hit = self._groupings.get((avail, forced))
        if hit is None:
            pl = self.planner
            if len(ep.infos) <= EXACT_JOBS:  # one table answers every state of the window
                if self._table is None:
                    self._table = pl.table(len(ep.infos), cost, ep.max_concurrency)
                hit = pl.from_table(*self._table, cost, avail, forced)
            else:
                hit = pl.improve(pl.partition(masks, avail, forced), cost, ep.max_concurrency, forced, memo=self._exact)
            self._groupings[(avail, forced)] = hit
        return hit

    def _option_of(self, n_cpus: int) -> int:
        """The core option of a placed member (the one taking its number of CPUs, else the nearest): Q knows only
        these, and a state may hold members placed by another chooser (agent-search's branches)."""
        cpus = self.planner.core_cpus
        return min(range(len(cpus)), key=lambda i: (abs(cpus[i] - n_cpus), i))

    def plan_schedule(self, ep: Any) -> int:
        """The schedule option with the least predicted total time of the window's grouping."""
        x, solo, _, _ = self._window(ep)
        self._plan = self.grouping(ep, (1 << len(solo)) - 1)
        pl = self.planner
        totals = np.zeros(len(pl.schedule_actions))
        for g in map(_members, self._plan):
            q, _ = pl.option_values(x, g, {}, len(ep.node.cpus))
            totals += solo[g].sum() / np.exp(q.max(1).astype(np.float64)) if q.size else math.inf
        return int(np.argmin(totals))

    def _target(self, ep: Any, cur: int) -> int:
        """The planned group of the open group (or, when none is open, of the current job): the stored plan's while
        the state follows it, else a new plan of the jobs left with the open group held together."""
        open_mask = sum(1 << s for s in ep.open_slots)
        key = open_mask or 1 << cur
        avail = open_mask | sum(1 << s for s in ep.queue)
        hit = next((g for g in self._plan if g & key == key and g & ~avail == 0), 0)
        if not hit:
            self._plan = self.grouping(ep, avail, open_mask)
            hit = next(g for g in self._plan if g & key == key)
        return hit

    def __call__(self, obs: Any, mask: np.ndarray, ep: Any) -> int:
        pl = self.planner
        self._window(ep)
        if ep.schedule_index is None:
            a = pl.schedule_actions[self.plan_schedule(ep)]
            return a if mask[a] else self.fallback(obs, mask, ep)
        if ep.schedule_index not in pl.schedule_actions:
            return self.fallback(obs, mask, ep)
        x = self._window(ep)[0]
        cur = ep.queue[0]
        target = self._target(ep, cur)
        skip = len(mask) - 1
        if not target >> cur & 1:
            return skip if mask[skip] else self.fallback(obs, mask, ep)
        fixed = {s: self._option_of(len(ep.alloc[s].cpus)) for s in ep.open_slots}
        members = _members(target)
        si = pl.schedule_actions.index(ep.schedule_index)
        okey = (target, tuple(sorted(fixed.items())), ep.free_cpus(), si)
        if okey not in self._options:
            self._options[okey] = pl.option_values(x, members, fixed, ep.free_cpus(), [si])
        q, rows = self._options[okey]
        if not q.size:
            return self.fallback(obs, mask, ep)
        best = rows[int(np.argmax(q[0]))]
        a = pl.core_actions[int(best[members.index(cur)])]
        return a if mask[a] else self.fallback(obs, mask, ep)


__all__ = ["GroupPlanner", "GroupChooser"]
