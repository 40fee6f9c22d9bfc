"""Partitions of a window's jobs into groups: the one dynamic programme over subsets (``least_total``) and the subset
lists it walks (``partition_table``, made once per window shape). Jobs are bits: a group is a bitmask of jobs.

Its users: best-found's partition of a window (``best_partition``), ``env.planners.localsearch.LocalSearch.exact``.
``agent/grouping.py`` keeps its own copy (agent/ imports nothing of env/); a test holds it equal to this one.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence


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


def least_total(value: Sequence[float], cmax: int, prefer_high: bool = False) -> tuple[list[float], list[int]]:
    """The best partition of every subset m of the jobs, ``m < len(value)``, into groups of at most ``cmax`` jobs
    valued by ``value`` (by group bitmask; ``inf`` for a group that may not be used). Returns ``f``, ``f[m]`` the
    least total value of the jobs in m (``inf``: no partition), and ``pick``, ``pick[m]`` the group of m's lowest job
    in that partition (0 when there is none). Ties go to the lower bitmask, or with ``prefer_high`` to the higher.
    Each subset's lowest job must be in some group, so each subset tries only the groups that hold it."""
    size = len(value)
    _, inside = partition_table((size - 1).bit_length(), cmax)
    f = [0.0] * size
    pick = [0] * size
    for m in range(1, size):
        best, chosen = math.inf, 0
        for g in reversed(inside[m]) if prefer_high else inside[m]:
            t = value[g] + f[m ^ g]
            if t < best:
                best, chosen = t, g
        f[m], pick[m] = best, chosen
    return f, pick


def groups_of(pick: Sequence[int], m: int) -> list[int]:
    """The groups of ``least_total``'s partition of the jobs in ``m``, lowest job's first."""
    out = []
    while m:
        out.append(pick[m])
        m ^= pick[m]
    return out


def best_partition(cost: Mapping[int, float], full: int) -> tuple[float, dict[int, int]]:
    """The partition of the jobs in ``full`` into groups of ``cost`` (bitmask -> makespan) with the least total:
    (that total, ``least_total``'s pick by subset of ``full``). Ties: the group of the larger bitmask (best-found's
    choice since its first version). Groups larger than ``cost``'s largest are never visited."""
    value = [math.inf] * (full + 1)
    for g, t in cost.items():
        if g <= full:
            value[g] = t
    f, pick = least_total(value, max((g.bit_count() for g in cost), default=1), prefer_high=True)
    return f[full], dict(enumerate(pick))
