"""Interference curves and node microbenchmarks, measured through any ``MeasuringBackend``.

Only ``env.measure.probing``'s protocol is used (run placements, read times, counters and metrics), so the same code
profiles a real node (engineer B's backend: native programs, real processes) and the simulated node used as
black-box hardware (``env.sim.measuring``).

Where things run (``curve_cpus``): the job on the first half of the first memory domain's CPUs, the generator
or probe on the other half: they share that domain's L3 and memory controller, which is what the curves are
about. A node whose first domain has one CPU uses the next CPU of the node as the partner.
"""

from __future__ import annotations

from typing import Callable, Sequence

from env.node.discover import node_id
from env.errors import InputError
from env.node.spec import NodeSpec
from env.measure.probing import BUBBLE, LATENCY, PROBE, STREAM, Measurement, MeasuringBackend, Placement
from profiler.interference import (
    CurvePoint, DomainBench, InterferenceProfile, NodeBench, PlacementRecord, RunKind, RunRecord,
)

#: Pressure levels of the sensitivity curve (0 is the job alone: the curve's reference).
BUBBLE_LEVELS: tuple[float, ...] = (0.25, 0.5, 0.75, 1.0)
#: MBA caps (percent) of the bandwidth curve, rounded to the node's granularity.
MBA_PERCENTS: tuple[int, ...] = (20, 50)

Progress = Callable[[str], None]


def to_record(kind: RunKind, group: Sequence[Placement], m: Measurement, simulated: bool) -> RunRecord:
    return RunRecord(
        kind=kind, group=[PlacementRecord(job=p.job, cpus=list(p.cpus), memory=p.memory, memory_domain=p.memory_domain,
                                          level=p.level, l3_ways=p.l3_ways, mba_percent=p.mba_percent) for p in group],
        times_s=list(m.times_s), metric=list(m.metric), node_seconds=m.node_seconds, simulated=simulated,
    )


def to_placement(rec: PlacementRecord) -> Placement:
    return Placement(job=rec.job, cpus=tuple(rec.cpus), memory=rec.memory, memory_domain=rec.memory_domain,
                     level=rec.level, l3_ways=rec.l3_ways, mba_percent=rec.mba_percent)


def curve_cpus(node: NodeSpec) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(the job's CPUs, the partner's CPUs) for the curves: two halves of the first memory domain."""
    first = sorted(node.numa[0].cpus)
    if len(first) >= 2:
        half = (len(first) + 1) // 2
        return tuple(first[:half]), tuple(first[half:])
    others = [c for c in node.cpus if c not in first]
    if not others:
        raise InputError(f"node {node.name} has one CPU: interference curves need a second CPU for the generator")
    return tuple(first), (others[0],)


class Runner:
    """Runs measurements and keeps their records and the node time they took."""

    def __init__(self, backend: MeasuringBackend, seed: int | None = None) -> None:
        self.backend = backend
        self.simulated = bool(backend.simulated)
        self.records: list[RunRecord] = []
        self.node_seconds = 0.0
        self._seed = seed
        self._n = 0

    def run(self, kind: RunKind, group: Sequence[Placement]) -> Measurement:
        seed = None if self._seed is None else self._seed * 100_003 + self._n
        self._n += 1
        m = self.backend.measure(list(group), seed=seed)
        self.records.append(to_record(kind, group, m, self.simulated))
        self.node_seconds += m.node_seconds
        return m

    def time(self, kind: RunKind, group: Sequence[Placement], index: int = 0) -> float:
        t = self.run(kind, group).times_s[index]
        if t is None or t <= 0:
            raise InputError(f"{kind} run of {group[index].job} gave no time: the node's backend failed to measure it")
        return t


def measure_interference(backend: MeasuringBackend, job: str, *, levels: Sequence[float] = BUBBLE_LEVELS,
                         seed: int | None = None, progress: Progress | None = None) -> InterferenceProfile:
    """``job``'s solo times, sensitivity curve, pressure and (with CAT / MBA) ways and bandwidth curves."""
    node = backend.shape()
    if job not in backend.jobs():
        raise InputError(f"unknown job {job!r} on {node.name}: the node's jobs are {', '.join(backend.jobs()) or 'none'}")
    say = progress or (lambda _msg: None)
    r = Runner(backend, seed)
    cpus, partner = curve_cpus(node)
    say(f"{job}: solo runs")
    whole = r.run("solo", [Placement(job, tuple(node.cpus))])
    solo = whole.times_s[0]
    if solo is None or solo <= 0:
        raise InputError(f"solo run of {job} gave no time: the node's backend failed to measure it")
    one = r.time("solo", [Placement(job, (node.cpus[0],))])
    alone = r.time("solo", [Placement(job, cpus)])
    say(f"{job}: sensitivity to the pressure generator at {len(levels)} levels")
    sens = [CurvePoint(x=lv, slowdown=r.time("bubble", [Placement(job, cpus), Placement(BUBBLE, partner, level=lv)]) / alone)
            for lv in levels]
    say(f"{job}: pressure on the reference probe")
    probe_alone = r.time("probe", [Placement(PROBE, partner)])
    pressure = r.time("probe", [Placement(job, cpus), Placement(PROBE, partner)], index=1) / probe_alone
    ways = None
    if node.cat is not None and node.capabilities.l3_cat.available:
        total = node.l3[0].ways
        points = sorted({w for w in (1, 2, total // 4, total // 2) if 1 <= w < total})
        say(f"{job}: slowdown by L3 ways {points}")
        ways = [CurvePoint(x=w, slowdown=r.time("ways", [Placement(job, cpus, l3_ways=w)]) / alone) for w in points]
    mba = None
    if node.mba is not None and node.capabilities.mba.available and node.mba.units == "percent":
        gran, lo = node.mba.bandwidth_gran, node.mba.min_bandwidth
        caps = sorted({max(lo, (p // gran) * gran) for p in MBA_PERCENTS})
        say(f"{job}: slowdown by MBA caps {caps} %")
        mba = [CurvePoint(x=p, slowdown=r.time("mba", [Placement(job, cpus, mba_percent=p)]) / alone) for p in caps]
    counters = whole.counters[0] if whole.counters else None
    return InterferenceProfile(
        name=job, node_id=node_id(node), simulated=r.simulated, solo_s=solo, one_core_s=one, cpus=list(cpus),
        partner_cpus=list(partner), alone_s=alone, sensitivity=sens, pressure=pressure, ways=ways, mba=mba,
        counters=counters, node_seconds=r.node_seconds, runs=r.records,
    )


def measure_node(backend: MeasuringBackend, *, seed: int | None = None, progress: Progress | None = None) -> NodeBench:
    """STREAM bandwidth (all CPUs of a domain) and LATENCY (one CPU) for every (CPU domain, memory domain) pair."""
    node = backend.shape()
    say = progress or (lambda _msg: None)
    r = Runner(backend, seed)
    out = []
    for src in node.numa:
        for dst in node.numa:
            say(f"microbenchmarks: CPUs of domain {src.id} -> memory of domain {dst.id}")
            bw = r.run("stream", [Placement(STREAM, tuple(src.cpus), memory="bind", memory_domain=dst.id)])
            lat = r.run("latency", [Placement(LATENCY, (min(src.cpus),), memory="bind", memory_domain=dst.id)])
            gbs = bw.metric[0] if bw.metric else None
            ns = lat.metric[0] if lat.metric else None
            if not gbs or not ns:
                raise InputError(f"the node's backend gave no STREAM / LATENCY figure for domain {src.id} -> {dst.id}")
            out.append(DomainBench(cpu_domain=src.id, memory_domain=dst.id, bandwidth_gbs=gbs, latency_ns=ns))
    _, partner = curve_cpus(node)
    probe_alone = r.time("probe", [Placement(PROBE, partner)])
    return NodeBench(node_id=node_id(node), simulated=r.simulated, domains=out, probe_alone_s=probe_alone,
                     node_seconds=r.node_seconds, runs=r.records)
