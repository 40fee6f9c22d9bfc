"""The one partition DP (env.planners.partitions), and the agent's own copy of it held equal on random cost sets."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from agent.grouping import GroupPlanner, _inside
from env.planners.partitions import best_partition, groups_of, least_total, partition_table


def _random_costs(rng: random.Random, n: int, cmax: int) -> dict[int, float]:
    """Some of the groups of at most cmax of n jobs, with costs from a few values (ties on purpose); every single
    job present half the time, so some subsets have no partition."""
    singles = rng.random() < 0.5
    cost = {}
    for g in range(1, 1 << n):
        if g.bit_count() <= cmax and ((singles and g.bit_count() == 1) or rng.random() < 0.6):
            cost[g] = float(rng.choice((1, 2, 3, 4))) * g.bit_count() ** rng.choice((0.5, 1.0))
    return cost


def _partitions(m: int):
    """Every partition of the jobs in m (brute force)."""
    if not m:
        yield []
        return
    low = m & -m
    rest = m ^ low
    sub = rest
    while True:
        for tail in _partitions(rest ^ sub):
            yield [low | sub, *tail]
        if not sub:
            break
        sub = (sub - 1) & rest


def _value(cost: dict[int, float], n: int) -> list[float]:
    value = [math.inf] * (1 << n)
    for g, t in cost.items():
        value[g] = t
    return value


@pytest.mark.parametrize("seed", range(40))
def test_least_total_is_the_best_partition(seed):
    rng = random.Random(seed)
    n, cmax = rng.randint(1, 6), rng.randint(1, 4)
    cost = _random_costs(rng, n, cmax)
    f, pick = least_total(_value(cost, n), cmax)
    for m in range(1, 1 << n):
        best = min((sum(cost.get(g, math.inf) if g.bit_count() <= cmax else math.inf for g in p)
                    for p in _partitions(m)), default=math.inf)
        assert f[m] == pytest.approx(best)
        if math.isfinite(f[m]):
            parts = groups_of(pick, m)
            assert sum(parts) == m and sum(cost[g] for g in parts) == pytest.approx(f[m])
        else:
            assert pick[m] == 0


def test_ties_go_to_the_lower_or_the_higher_bitmask():
    cost = {0b001: 1.0, 0b010: 1.0, 0b100: 1.0, 0b011: 2.0, 0b111: 3.0}
    assert groups_of(least_total(_value(cost, 3), 3)[1], 0b111) == [0b001, 0b010, 0b100]
    assert groups_of(least_total(_value(cost, 3), 3, prefer_high=True)[1], 0b111) == [0b111]
    total, choice = best_partition(cost, 0b111)
    assert total == 3.0 and choice[0b111] == 0b111 and set(choice) == set(range(8))
    assert best_partition({}, 0) == (0.0, {0: 0})
    assert best_partition({0b01: 1.0}, 0b11)[0] == math.inf  # job 1 in no group


@pytest.mark.parametrize("seed", range(60))
def test_the_agents_copy_equals_it(seed):
    """agent/grouping.py cannot import env/: its table (f, pick) must stay the same programme, ties included."""
    rng = random.Random(1000 + seed)
    n, cmax = rng.randint(1, 7), rng.randint(1, 4)
    cost = _random_costs(rng, n, cmax)
    assert _inside(n, cmax) == partition_table(n, cmax)[1]
    f, pick = least_total(_value(cost, n), cmax)
    af, apick = GroupPlanner.table(n, cost, cmax)
    assert list(af) == f
    for m in range(1, 1 << n):
        if math.isfinite(f[m]):
            assert apick[m] == pick[m]
        else:  # no partition: the agent's table names the first group of m's lowest job, if any
            low = m & -m
            assert apick[m] == min((g for g in cost if g & -g == low and g.bit_count() <= cmax), default=0)
    for jobs in itertools.combinations(range(n), min(n, 3)):  # exact(): the same partition on a subset of slots
        full = sum(1 << j for j in jobs)
        if math.isfinite(f[full]):
            assert GroupPlanner.exact(list(jobs), cost, cmax) == sorted(groups_of(pick, full))
