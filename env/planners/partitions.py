"""Partitions of a window's jobs into groups: the subset lists the dynamic programmes over subsets walk (made once
per window shape; ``env.planners.baselines._best_partition``, ``env.planners.localsearch.LocalSearch.exact``)."""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=32)
def partition_table(n: int, cmax: int) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]:
    """For partitions of ``n`` jobs into groups of at most ``cmax``: every group (by its lowest job, then its
    bitmask), and for each subset m of the jobs (index m) the groups that hold m's lowest job and lie inside m, in
    increasing bitmask order."""
    by_low: dict[int, list[int]] = {}
    for m in range(1, 1 << n):
        if m.bit_count() <= cmax:
            by_low.setdefault(m & -m, []).append(m)
    groups = tuple(g for gs in by_low.values() for g in gs)
    inside = ((),) + tuple(tuple(g for g in by_low[m & -m] if g & m == g) for m in range(1, 1 << n))
    return groups, inside
