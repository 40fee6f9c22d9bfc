"""What the calibration runs: each job's solo placements beyond its curves, and random co-run groups.

Solo placements (``solo_design``) make each parameter of a job show: one core vs many (parallel fraction,
bandwidth per core), one domain vs spread over two (communication), interleaved and remote memory (irregular
accesses, the master-initialised share). Random groups (``random_group``) look like what a scheduler does:
the node's CPUs split between 2-4 jobs, compact or spread over the domains, some memory interleaved, some L3
partitions and MBA caps where the node has them. Probe candidates are pairs; held-out groups 2-4 jobs.
"""

from __future__ import annotations

import random
from typing import Sequence

from env.measure.interference import curve_cpus
from env.node.spec import NodeSpec
from env.measure.probing import BUBBLE, Placement


def solo_design(node: NodeSpec, job: str, *, with_curves: bool = False) -> list[list[Placement]]:
    """Placements of ``job`` alone (and, with ``with_curves``, next to the generator: for the reference probe,
    whose curves ``env.measure.interference`` does not take)."""
    cpus, partner = curve_cpus(node)
    d0 = tuple(sorted(node.numa[0].cpus))
    out: list[list[Placement]] = [[Placement(job, d0)]] if d0 not in (cpus, tuple(node.cpus)) else []  # not a repeat
    if len(node.numa) >= 2:
        d1 = tuple(sorted(node.numa[1].cpus))
        half = max(1, len(d0) // 2)
        spread = d0[:half] + d1[:half]
        out += [
            [Placement(job, spread)],
            [Placement(job, spread, memory="interleave")],
            [Placement(job, cpus, memory="bind", memory_domain=node.numa[1].id)],
            [Placement(job, d0 + d1, memory="interleave")],
        ]
    if with_curves:
        out += [[Placement(job, tuple(node.cpus))], [Placement(job, (node.cpus[0],))], [Placement(job, cpus)]]
        out += [[Placement(job, cpus), Placement(BUBBLE, partner, level=lv)] for lv in (0.5, 1.0)]
    return out


def _split(n: int, k: int, rng: random.Random) -> list[int]:
    cuts = sorted(rng.sample(range(1, n), k - 1))
    return [b - a for a, b in zip([0] + cuts, cuts + [n])]


def random_group(node: NodeSpec, jobs: Sequence[str], rng: random.Random, k: int) -> list[Placement]:
    """``k`` distinct jobs sharing the node's CPUs as a scheduler might place them (see the module docstring)."""
    k = min(k, len(jobs), len(node.cpus))
    names = rng.sample(list(jobs), k)
    counts = _split(len(node.cpus), k, rng)
    domains = [sorted(d.cpus) for d in node.numa]
    free = [list(d) for d in domains]
    spread = len(domains) > 1 and rng.random() < 0.5
    cpus_of: list[tuple[int, ...]] = []
    order = [c for d in domains for c in d]
    used: set[int] = set()
    for n in counts:
        if spread:
            got: list[int] = []
            i = 0
            while len(got) < n:
                d = free[i % len(free)]
                if d:
                    got.append(d.pop(0))
                i += 1
        else:
            got = [c for c in order if c not in used][:n]
        used |= set(got)
        for d in free:
            d[:] = [c for c in d if c not in used]
        cpus_of.append(tuple(sorted(got)))
    ways = None
    if node.cat is not None and node.capabilities.l3_cat.available and rng.random() < 0.3:
        total = min(d.ways for d in node.l3)
        if total >= k:
            ways = _split(total, k, rng) if rng.random() < 0.5 else None
    mba_job = -1
    caps: list[int] = []
    if node.mba is not None and node.capabilities.mba.available and node.mba.units == "percent" and rng.random() < 0.2:
        mba_job = rng.randrange(k)
        caps = list(range(max(node.mba.min_bandwidth, node.mba.bandwidth_gran), 100, node.mba.bandwidth_gran))
    out = []
    for i, (name, cpus) in enumerate(zip(names, cpus_of)):
        spans = len({node.numa_of(c) for c in cpus}) > 1
        memory = "interleave" if spans and rng.random() < 0.25 else "local"
        out.append(Placement(name, cpus, memory=memory, l3_ways=ways[i] if ways else None,
                             mba_percent=rng.choice(caps) if i == mba_job and caps else None))
    return out
