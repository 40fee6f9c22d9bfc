"""Local search over groupings, the last step of ``agent-search`` (``env.planners.search``): the rollouts find good plans
near the agent's; this moves jobs between their groups, and tunes the chosen groups' options, on the node model.

* A group's cost is its makespan on the node model with the best of a few core splits: the *maximal* splits of
  its members (no member could take a larger core fraction and still fit; full ways, no bandwidth cap, balanced:
  1 split for a job alone, 5 for a pair, 6 for three jobs and 13 for four on a node whose CPUs divide by 8), or a
  better version a rollout already scored (``seen``). Costs are memoised by the group's jobs.
* Hill climbing from the best plan so far: move one job to another group or alone, swap two jobs of two groups,
  merge two groups; the first move that lowers the total is taken, until a whole pass finds none.
* Then coordinate descent on the final groups' options (each member's cores, ways, bandwidth cap and split), as
  ``best-found`` refines its groups.

Work is counted in node-model calls (``Budget``), memoised or not, so the same window and budget give the same plan
on every machine and in every process; when the count is spent the best plan so far stands. Every group found
joins ``seen``, so ``env.planners.search.recombine`` can still combine it with the rollouts' groups.
"""

from __future__ import annotations

import functools
import itertools
import math
from fractions import Fraction
from typing import Callable, Iterator, Sequence

from env.plan import actions
from env.plan.allocate import _core_count
from env.plan.models import CALLS_PER_ROLLOUT  # the budget's unit, defined with the plan's SearchInfo
from env.planners.partitions import groups_of, least_total, partition_table
from env.node.spec import NodeSpec

Scorer = Callable[[int, Sequence[tuple[str, int]]], float]
Members = list[tuple[int, int]]  # (slot, job action) in placement order
Seen = dict[int, tuple[float, Members]]  # slot bitmask -> (makespan, members), one schedule action



class BudgetSpent(Exception):
    pass


class Budget:
    """Counts node-model calls; raises BudgetSpent past ``limit``."""

    def __init__(self, scorer: Scorer, limit: int) -> None:
        self.scorer = scorer
        self.limit = limit
        self.calls = 0

    def __call__(self, schedule: int, members: Sequence[tuple[str, int]]) -> float:
        if self.calls >= self.limit:
            raise BudgetSpent
        self.calls += 1
        return self.scorer(schedule, members)


def _encode(cores: Fraction, ways: Fraction, bw: int, split: str) -> int:
    return actions.encode(actions.JobAction(cores, ways, bw, split))  # type: ignore[arg-type]


#: Chunks of up to this many jobs also get the exact partition by these costs (``LocalSearch.exact``; a dynamic
#: program over 2^W subsets per round, in Python: cheap up to 8 jobs).
EXACT_MAX_JOBS = 8

#: The member orders a group of four is scored in: the three ways to pair them. Placement follows the order (compact:
#: the first jobs fill the first socket), so the order decides which jobs share a socket and its cache: measured on
#: sim:reference over 25 random groups, the best of these three orders was the best of all 24 every time, while the
#: queue order alone was 1.8 % slower on average (18 % at worst). For three jobs, the splits' own permutations
#: already covered every order (the same measurement).
MEMBER_ORDERS = {4: [(0, 1, 2, 3), (0, 2, 1, 3), (0, 3, 1, 2)]}


def maximal_core_splits(node: NodeSpec, k: int) -> list[tuple[Fraction, ...]]:
    """Every assignment of core fractions to ``k`` jobs that fits the node and cannot give any job a larger fraction
    and still fit (a job with more cores is rarely slower, so these hold the best split)."""
    return _maximal(len(node.cpus), k)


@functools.lru_cache(maxsize=64)
def _maximal(n: int, k: int) -> list[tuple[Fraction, ...]]:
    count = {c: _core_count(n, c.numerator, c.denominator) for c in actions.CORE_FRACTIONS}
    fits = [c for c in itertools.product(actions.CORE_FRACTIONS, repeat=k) if sum(count[x] for x in c) <= n]
    ok = set(fits)
    bigger = {c: [d for d in actions.CORE_FRACTIONS if d > c] for c in actions.CORE_FRACTIONS}
    return [c for c in fits if not any(c[:i] + (d,) + c[i + 1:] in ok for i in range(k) for d in bigger[c[i]])]


@functools.lru_cache(maxsize=64)
def _split_actions(n: int, k: int) -> list[list[int]]:
    """The maximal splits as job actions (all ways, no bandwidth cap, balanced)."""
    w_full, b_full = max(actions.WAY_FRACTIONS), max(actions.BW_PERCENTS)
    return [[_encode(c, w_full, b_full, actions.SPLITS[0]) for c in combo] for combo in _maximal(n, k)]


class LocalSearch:
    """One chunk's local search under one schedule action (see the module's docstring)."""

    def __init__(self, node: NodeSpec, names: Sequence[str], cmax: int, schedule: int, scorer: Scorer, seen: Seen,
                 calls: int) -> None:
        self.node = node
        self.names = list(names)
        self.cmax = cmax
        self.schedule = schedule
        self.budget = Budget(scorer, calls)
        self.seen = seen
        self.cost_memo: dict[int, tuple[float, Members]] = {}
        self.alone_rows: list[dict[int, float]] = [{} for _ in self.names]  # slot -> action -> makespan alone
        self.bound_memo: dict[int, float] = {}
        self.splits = {k: _split_actions(len(node.cpus), k) for k in range(1, cmax + 1)}

    def _score(self, members: Members) -> float:
        return self.budget(self.schedule, [(self.names[s], a) for s, a in members])

    def alone(self, slot: int, action: int) -> float:
        """Job ``slot``'s makespan alone with the job action ``action`` (memoised)."""
        row = self.alone_rows[slot]
        t = row.get(action)
        if t is None:
            t = row[action] = self._score([(slot, action)])
        return t

    def bound(self, slots: list[int], acts: list[int]) -> float:
        """A lower estimate of a group's makespan: its slowest member alone on the same cores (running beside
        others only slows a job down, except where placement differs)."""
        rows = self.alone_rows  # the hottest loop of the local search: the memo read inline
        worst = -math.inf
        for s, a in zip(slots, acts):
            t = rows[s].get(a)
            if t is None:
                t = self.alone(s, a)
            if t > worst:
                worst = t
        return worst

    def group_bound(self, mask: int) -> float:
        hit = self.bound_memo.get(mask)
        if hit is None:
            slots = _bits(mask)
            bound = self.bound
            hit = self.bound_memo[mask] = min([bound(slots, acts) for acts in self.splits[len(slots)]])
        return hit

    def cost(self, mask: int) -> tuple[float, Members]:
        """The group's best makespan found and its members (see the module's docstring)."""
        hit = self.cost_memo.get(mask)
        if hit is not None:
            return hit
        slots = _bits(mask)
        best: tuple[float, Members] = self.seen.get(mask, (math.inf, []))
        orders = [[slots[i] for i in order] for order in MEMBER_ORDERS.get(len(slots), [tuple(range(len(slots)))])]
        rows, alone = self.alone_rows, self.alone
        ranked = []
        for i, o in enumerate(orders):  # bound() inlined: this ranking is the local search's hottest loop
            ro = [rows[s] for s in o]
            for acts in self.splits[len(slots)]:
                worst = -math.inf
                for row, s, a in zip(ro, o, acts):
                    t = row.get(a)
                    if t is None:
                        t = alone(s, a)
                    if t > worst:
                        worst = t
                ranked.append((worst, i, o, acts))
        ranked.sort(key=_bound_then_order)
        for b, _, order, acts in ranked:
            if len(slots) > 1 and b >= best[0] - 1e-12:
                break
            members = list(zip(order, acts))
            t = self._score(members)
            if t < best[0] - 1e-12:
                best = (t, members)
        self.cost_memo[mask] = best
        if math.isfinite(best[0]) and (mask not in self.seen or best[0] < self.seen[mask][0] - 1e-12):
            self.seen[mask] = best
        return best

    def _moves(self, groups: list[int]) -> "itertools.chain[tuple[list[int], list[int]]]":
        """(groups removed, groups added) for every move from ``groups`` (bitmasks), in a fixed order."""
        def move() -> "Iterator[tuple[list[int], list[int]]]":
            for gi, g in enumerate(groups):
                for x in _bits(g):
                    rest = g & ~(1 << x)
                    for hi, h in enumerate(groups):
                        if hi != gi and bin(h).count("1") < self.cmax:
                            yield [g, h], [m for m in (rest, h | 1 << x) if m]
                    if rest:
                        yield [g], [rest, 1 << x]

        def swap() -> "Iterator[tuple[list[int], list[int]]]":
            for (gi, g), (hi, h) in itertools.combinations(enumerate(groups), 2):
                for x in _bits(g):
                    for y in _bits(h):
                        yield [g, h], [g & ~(1 << x) | 1 << y, h & ~(1 << y) | 1 << x]

        def merge() -> "Iterator[tuple[list[int], list[int]]]":
            for g, h in itertools.combinations(groups, 2):
                if bin(g | h).count("1") <= self.cmax:
                    yield [g, h], [g | h]

        def repartition() -> "Iterator[tuple[list[int], list[int]]]":
            # every split of two groups' jobs into two groups (two-for-two exchanges, uneven splits): what single
            # moves and swaps cannot reach in one step; the bounds skip most without a call
            for g, h in itertools.combinations(groups, 2):
                union = g | h
                low, rest = union & -union, union & ~(union & -union)
                sub = rest
                while True:
                    a = sub | low
                    b = union & ~a
                    if a not in (g, h) and bin(a).count("1") <= self.cmax and bin(b).count("1") <= self.cmax:
                        yield [g, h], [m for m in (a, b) if m]
                    if sub == 0:
                        break
                    sub = (sub - 1) & rest

        return itertools.chain(merge(), move(), swap(), repartition())

    def climb(self, groups: list[int]) -> list[int]:
        """Hill climbing from ``groups`` (a partition, bitmasks) until no move helps or the budget is spent."""
        groups = list(groups)
        try:
            improved = True
            while improved:
                improved = False
                for removed, added in self._moves(groups):
                    before = sum(self.cost(m)[0] for m in removed)
                    if sum(self.group_bound(m) for m in added) >= before - 1e-9:  # cannot help: no call
                        continue
                    after = 0.0
                    for m in added:
                        after += self.cost(m)[0]
                        if after >= before - 1e-9:
                            break
                    if after < before - 1e-9:
                        groups = [m for m in groups if m not in removed] + added
                        improved = True
                        break
        except BudgetSpent:
            pass
        return groups

    def exact(self) -> list[int] | None:
        """The best partition of the chunk by these costs, or None when the budget runs out first. Lazy: a dynamic
        program over subsets values each group by its cost when known and by its bound otherwise, then scores the
        unknown groups of its best partition, until that partition holds known groups only (then no partition is
        better: every bound is at most its group's cost)."""
        n = len(self.names)
        full = (1 << n) - 1
        groups, _ = partition_table(n, self.cmax)
        try:
            value = [0.0] * (full + 1)  # by group mask: its cost when known, else its bound
            for g in groups:
                hit = self.cost_memo.get(g)
                value[g] = hit[0] if hit is not None else self.group_bound(g)
            while True:
                parts = groups_of(least_total(value, self.cmax)[1], full)
                unknown = [g for g in parts if g not in self.cost_memo]
                if not unknown:
                    return parts
                for g in unknown:
                    value[g] = self.cost(g)[0]
        except BudgetSpent:
            return None

    def tune(self, t0: float, members: Members) -> tuple[float, Members]:
        """Coordinate descent over each member's options (ways, bandwidth cap, split, cores), from ``members``
        (makespan ``t0``); the best found, as far as the budget goes."""
        cur = [[s, *actions.job_options(a)] for s, a in members]  # [slot, cores, ways, bw, split] option indices
        cur_t = t0
        try:
            improved = True
            while improved:
                improved = False
                for i in range(len(cur)):
                    for dim in _TUNE_DIMS:
                        for opt in range(_N_OPTIONS[dim]):
                            if opt == cur[i][dim]:
                                continue
                            trial = [list(x) for x in cur]
                            trial[i][dim] = opt
                            t = self._score([(x[0], actions.job_index(*x[1:])) for x in trial])
                            if t < cur_t - 1e-9:
                                cur, cur_t, improved = trial, t, True
        except BudgetSpent:
            pass
        return cur_t, [(x[0], actions.job_index(*x[1:])) for x in cur]


#: The options ``tune`` steps through, in its order (index into [slot, cores, ways, bw, split]): ways, bandwidth cap,
#: split, then cores.
_TUNE_DIMS = (2, 3, 4, 1)
_N_OPTIONS = {1: len(actions.CORE_FRACTIONS), 2: len(actions.WAY_FRACTIONS), 3: len(actions.BW_PERCENTS),
              4: len(actions.SPLITS)}


def _bound_then_order(x: tuple) -> tuple[float, int]:  # type: ignore[type-arg]
    return x[0], x[1]


@functools.lru_cache(maxsize=1 << 14)
def _bits(mask: int) -> tuple[int, ...]:
    """The slots in a bitmask, lowest first."""
    return tuple(i for i in range(mask.bit_length()) if mask >> i & 1)


def regroup(node: NodeSpec, names: Sequence[str], cmax: int, schedule: int, starts: Sequence[Sequence[Members]],
            scorer: Scorer, seen: Seen, calls: int) -> int:
    """Hill climbing under ``schedule`` from each plan of ``starts`` in turn (their groups; best first) while
    ``calls`` last; every group scored joins ``seen``. Returns the node-model calls made."""
    ls = LocalSearch(node, names, cmax, schedule, scorer, seen, calls)
    tried: set[frozenset[int]] = set()
    for start in starts:
        masks = [sum(1 << s for s, _ in g) for g in start]
        if frozenset(masks) in tried:
            continue
        tried.add(frozenset(masks))
        try:
            for g, m in zip(start, masks):  # a start's own groups, with their actions, are known costs
                if m not in seen:
                    seen[m] = (ls._score(list(g)), list(g))
        except BudgetSpent:
            break
        tried.add(frozenset(ls.climb(masks)))
        if ls.budget.calls >= ls.budget.limit:
            break
    if len(names) <= EXACT_MAX_JOBS:
        ls.exact()
    return ls.budget.calls


def tune(node: NodeSpec, names: Sequence[str], schedule: int, groups: Sequence[Members], scorer: Scorer, seen: Seen,
         calls: int) -> int:
    """Coordinate descent on the options of ``groups`` (one plan under ``schedule``; the longest group first) while
    ``calls`` last; a better version of a group replaces it in ``seen``. Returns the node-model calls made."""
    ls = LocalSearch(node, names, max(len(g) for g in groups), schedule, scorer, seen, calls)
    for members in sorted(groups, key=lambda g: -seen.get(_mask(g), (0.0, []))[0]):
        mask = _mask(members)
        t0, members = seen.get(mask, (math.inf, list(members)))  # the group's best version known
        if not math.isfinite(t0):
            continue
        t, tuned = ls.tune(t0, list(members))
        if t < t0 - 1e-12:
            seen[mask] = (t, tuned)
        if ls.budget.calls >= ls.budget.limit:
            break
    return ls.budget.calls


def _mask(members: Sequence[tuple[int, int]]) -> int:
    return sum(1 << s for s, _ in members)


__all__ = ["CALLS_PER_ROLLOUT", "LocalSearch", "regroup", "tune", "maximal_core_splits"]
