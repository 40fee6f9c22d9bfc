"""An allocation decision -> concrete resources on a node: CPUs, memory options, ways and masks, MBA values.

One pure function per resource; ``GroupState`` holds what a group has already taken. The rules of
docs/design/coscheduler.md §2 in detail, decided here once:

* Rounding is half-up (``max(1, floor(x + 1/2))``): Python's round-half-even would give 1/4 of 2 CPUs = 0.
* Compact places a job in the single NUMA domain that fits it most tightly (best fit, ties to the lowest
  id); a job larger than every domain fills domains from the emptiest. Distributed deals CPUs round-robin
  over the domains in id order, the lowest free CPU of each. Both are deterministic.
* Ways and bandwidth: the job's share is of the whole node (ways: fraction x node ways; bandwidth:
  percent x number of memory domains, in domain-percent), split over the domains where the job has CPUs,
  evenly ("balanced", remainder to the lowest ids) or by its CPUs per domain ("proportional", largest
  remainder), then clamped to what one domain has and what the hardware allows.
* Masks are contiguous runs inside ``cbm_mask``, packed upwards in allocation order; once a domain's ways
  are used up, later masks are placed at the top and overlap (overlap is shared cache).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Sequence
from functools import lru_cache

from env.plan.actions import Affinity, JobAction, MemoryPolicy, Split
from env.node.cpulist import format_cpulist
from env.node.spec import NodeSpec


def half_up(x: Fraction | float | int) -> int:
    return math.floor(Fraction(x) + Fraction(1, 2))


def _half_up_ratio(num: int, den: int) -> int:
    """floor(num/den + 1/2) in integers (the planner's hot path: Fraction is ~20x slower)."""
    return (2 * num + den) // (2 * den)


@lru_cache(maxsize=4096)
def _core_count(ncpus: int, num: int, den: int) -> int:
    return max(1, _half_up_ratio(num * ncpus, den))


def core_count(node: NodeSpec, fraction: Fraction) -> int:
    return _core_count(len(node.cpus), fraction.numerator, fraction.denominator)


@dataclass
class GroupState:
    """What the open group has already taken on the node."""

    taken_cpus: set[int] = field(default_factory=set)
    mask_cursor: dict[int, int] = field(default_factory=dict)  # L3 id -> next free bit offset within cbm

    def free_cpus(self, node: NodeSpec) -> list[int]:
        return [c for c in node.cpus if c not in self.taken_cpus]


@dataclass(frozen=True)
class Allocation:
    cpus: tuple[int, ...]
    numa_nodes: tuple[int, ...]
    memory: MemoryPolicy
    l3: dict[int, tuple[int, int]]  # L3 id -> (ways, mask)
    mem_bw_percent: dict[int, int]  # NUMA id -> percent of that domain's bandwidth


def assign_cpus(node: NodeSpec, n: int, affinity: Affinity, taken: set[int]) -> list[int] | None:
    """n CPUs not in ``taken``, or None when they do not fit."""
    free = {d.id: [c for c in d.cpus if c not in taken] for d in node.numa}
    if n > sum(len(v) for v in free.values()):
        return None
    if affinity == "compact":
        fitting = [d for d in free if len(free[d]) >= n]
        if fitting:
            best = min(fitting, key=lambda d: (len(free[d]), d))
            return sorted(free[best][:n])
        chosen: list[int] = []
        for d in sorted(free, key=lambda d: (-len(free[d]), d)):
            chosen.extend(free[d][: n - len(chosen)])
            if len(chosen) == n:
                break
        return sorted(chosen)
    chosen = []
    queues = {d: list(v) for d, v in sorted(free.items())}
    while len(chosen) < n:
        for d, q in queues.items():
            if q and len(chosen) < n:
                chosen.append(q.pop(0))
    return sorted(chosen)


def numactl_memory_options(policy: MemoryPolicy, numa_nodes: list[int] | tuple[int, ...]) -> list[str]:
    """first-touch: the kernel default, no option. interleave / local-alloc: over the job's domains.
    local-alloc is --membind (strictly local): --localalloc would just be the kernel default again."""
    if policy == "first-touch":
        return []
    nodes = format_cpulist(numa_nodes)
    return [f"--interleave={nodes}"] if policy == "interleave" else [f"--membind={nodes}"]


def _split(total: int, weights: dict[int, int], split: Split) -> dict[int, int]:
    """Split an integer total over domains: evenly, or in proportion to weights (largest remainder)."""
    ids = sorted(weights)
    if split == "balanced":
        base, rem = divmod(total, len(ids))
        return {d: base + (1 if i < rem else 0) for i, d in enumerate(ids)}
    wsum = sum(weights.values())
    out = {d: (total * weights[d]) // wsum for d in ids}
    # Largest remainder (the remainder of total*w/wsum, compared in units of 1/wsum), ties to the lowest id.
    for d in sorted(ids, key=lambda d: (-((total * weights[d]) % wsum), d))[: total - sum(out.values())]:
        out[d] += 1
    return out


def dealt(node: NodeSpec, cpus: Sequence[int], n: int) -> list[int]:
    """``n`` of ``cpus`` dealt over their NUMA domains in proportion to how many each holds (the lowest-numbered of each
    domain): what a running job keeps when it gives CPUs back. Its pages, first-touched where its threads ran, lie in
    every domain it had; keeping CPUs in each keeps its threads near them, and the node model, which places a job's
    memory where its CPUs are, can say so."""
    by: dict[int, list[int]] = {}
    for c in sorted(cpus):
        by.setdefault(node.numa_of(c), []).append(c)
    share = _split(n, {d: len(v) for d, v in by.items()}, "proportional")
    return sorted(c for d, v in by.items() for c in v[: share[d]])


def split_ways(node: NodeSpec, cpus: list[int] | tuple[int, ...], fraction: Fraction, split: Split) -> dict[int, int]:
    """L3 id -> whole ways, for the L3 domains where the job has CPUs."""
    per_domain: dict[int, int] = {}
    for c in cpus:
        d = node.l3_of(c)
        per_domain[d] = per_domain.get(d, 0) + 1
    total = max(1, _half_up_ratio(fraction.numerator * node.total_ways, fraction.denominator))
    ways = _split(total, per_domain, split)
    min_bits = node.cat.min_cbm_bits if node.cat else 1
    limit = {d.id: d.ways for d in node.l3}
    return {d: min(limit[d], max(min_bits, w)) for d, w in ways.items()}


def _cbm_bits(node: NodeSpec, l3_id: int) -> tuple[int, int]:
    """(lowest allocatable bit, number of allocatable bits) of an L3 domain."""
    if node.cat is None:
        ways = next(d.ways for d in node.l3 if d.id == l3_id)
        return 0, ways
    mask = node.cat.mask_int
    low = (mask & -mask).bit_length() - 1
    return low, bin(mask).count("1")


def place_mask(node: NodeSpec, l3_id: int, ways: int, state: GroupState) -> int:
    """A contiguous mask of ``ways`` bits inside the domain's cbm_mask, after the group's earlier masks."""
    low, nbits = _cbm_bits(node, l3_id)
    ways = min(ways, nbits)
    cursor = state.mask_cursor.get(l3_id, 0)
    start = cursor if cursor + ways <= nbits else nbits - ways
    state.mask_cursor[l3_id] = min(nbits, max(cursor, start + ways))
    return ((1 << ways) - 1) << (low + start)


def split_bandwidth(node: NodeSpec, cpus: list[int] | tuple[int, ...], percent: int, split: Split) -> dict[int, int]:
    """NUMA id -> percent of that domain's bandwidth, rounded to the MBA step and at least its minimum."""
    per_domain: dict[int, int] = {}
    for c in cpus:
        d = node.numa_of(c)
        per_domain[d] = per_domain.get(d, 0) + 1
    total = percent * len(node.numa)  # the node's share in domain-percent
    shares = _split(total, per_domain, split)
    if node.mba is not None and node.mba.units == "percent":
        gran, floor_ = node.mba.bandwidth_gran, max(node.mba.min_bandwidth, node.mba.bandwidth_gran)
    else:
        gran, floor_ = 1, 1
    return {d: min(100, max(floor_, _half_up_ratio(v, gran) * gran)) for d, v in shares.items()}


def mba_hardware_value(node: NodeSpec, numa_id: int, percent: int) -> int | None:
    """The value resctrl takes: Intel percent as is; AMD absolute 1/8 GB/s units of the domain's bandwidth.
    None when it cannot be expressed (no MBA, or an AMD domain whose bandwidth the spec does not give)."""
    if node.mba is None:
        return None
    if node.mba.units == "percent":
        return percent
    domain = next(d for d in node.numa if d.id == numa_id)
    if domain.memory_bandwidth_gbs is None:
        return None
    units = half_up(Fraction(percent, 100) * Fraction(domain.memory_bandwidth_gbs).limit_denominator(1000) * 8)
    return min(node.mba.max_bandwidth, max(max(1, node.mba.min_bandwidth), units))


def allocate(node: NodeSpec, affinity: Affinity, memory: MemoryPolicy, action: JobAction, state: GroupState) -> Allocation | None:
    """The job's resources in the open group, updating ``state``; None (state untouched) when it does not fit."""
    cpus = assign_cpus(node, core_count(node, action.cores), affinity, state.taken_cpus)
    if cpus is None:
        return None
    state.taken_cpus.update(cpus)
    ways = split_ways(node, cpus, action.ways, action.split)
    l3 = {d: (w, place_mask(node, d, w, state)) for d, w in sorted(ways.items())}
    return Allocation(
        cpus=tuple(cpus),
        numa_nodes=tuple(sorted({node.numa_of(c) for c in cpus})),
        memory=memory,
        l3=l3,
        mem_bw_percent=split_bandwidth(node, cpus, action.bw_percent, action.split),
    )


def plain_allocation(node: NodeSpec, cpus: Sequence[int], memory: MemoryPolicy = "first-touch") -> Allocation:
    """``cpus`` with nothing partitioned: every way of the L3 domains they are in, no bandwidth cap on their memory
    domains (what Slurm's node sharing gives a job, and time sharing the whole node)."""
    cpus = tuple(cpus)
    l3_ids = sorted({node.l3_of(c) for c in cpus})
    numa_ids = tuple(sorted({node.numa_of(c) for c in cpus}))
    ways = {d.id: d.ways for d in node.l3}
    return Allocation(cpus=cpus, numa_nodes=numa_ids, memory=memory,
                      l3={d: (ways[d], (1 << ways[d]) - 1) for d in l3_ids}, mem_bw_percent={m: 100 for m in numa_ids})
