"""``cosched node --bench``: the node's microbenchmarks repeated, as medians with their spread, plus what one CAT
way and one MBA step do to the reference probe where resctrl exists, and the L3 from discovery.

Each repeat is ``env.measure.interference.measure_node`` (per-NUMA-domain STREAM bandwidth and pointer-chase latency,
local and, with two or more domains, remote; the calibrator's own microbenchmarks) through a
``MeasuringBackend`` (the real node's or a simulated one). The report (``NodeBenchReport``, with every
repeat's ``profiler.interference.NodeBench``) is stored under ``$COSCHED_HOME/node-bench/NODE_ID.json``.
"""

from __future__ import annotations

import statistics
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Literal

from pydantic import BaseModel, ConfigDict, Field

from env.measure.interference import measure_node
from env.node.spec import NodeSpec
from env.measure.probing import PROBE, MeasuringBackend, Placement
from profiler.interference import NodeBench

BENCH_SCHEMA_VERSION = 1


class Figure(BaseModel):
    """A repeated measurement: its median and spread."""

    model_config = ConfigDict(extra="forbid")
    median: float
    min: float
    max: float
    n: int = Field(ge=1)
    unit: str
    values: list[float]

    @classmethod
    def of(cls, values: list[float], unit: str) -> "Figure":
        return cls(median=statistics.median(values), min=min(values), max=max(values), n=len(values), unit=unit, values=values)

    @property
    def spread_pct(self) -> float:
        """(max - min) / median, in percent."""
        return 100.0 * (self.max - self.min) / self.median if self.median else 0.0


class DomainFigures(BaseModel):
    """Bandwidth and latency from the CPUs of one domain to the memory of one domain, over the repeats."""

    model_config = ConfigDict(extra="forbid")
    cpu_domain: int
    memory_domain: int
    kind: Literal["local", "remote"]
    stream_gbs: Figure
    latency_ns: Figure


class PartitionEffect(BaseModel):
    """What one step of a partitioning facility does to the reference probe (where the node has it)."""

    model_config = ConfigDict(extra="forbid")
    available: bool
    reason: str | None = Field(None, description="why it was not measured")
    step: str | None = Field(None, description="the step compared, e.g. '11 -> 10 ways' or '100 -> 90 %'")
    probe_full_s: Figure | None = None
    probe_step_s: Figure | None = None
    slowdown_pct: float | None = Field(None, description="median probe time one step down vs full, in percent")


class L3Info(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: int
    cpus: list[int]
    size_bytes: int | None
    ways: int


class NodeBenchReport(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: int = BENCH_SCHEMA_VERSION
    node_id: str
    node: str
    simulated: bool = Field(description="False: measured on the node; True: produced by a simulated node")
    measured_at: datetime
    repeats: int
    domains: list[DomainFigures]
    probe_alone_s: Figure = Field(description="the reference probe alone on the curves' partner CPUs")
    remote: str = Field(description="what was measured across domains, or why nothing was")
    l3: list[L3Info] = Field(description="from discovery")
    cat: PartitionEffect
    mba: PartitionEffect
    node_seconds: float = Field(description="node time the benchmarks took")
    runs: list[NodeBench] = Field(description="every repeat of the microbenchmarks, as the calibrator reads them")


Progress = Callable[[str], None]


def _repeat(backend: MeasuringBackend, group: list[Placement], repeats: int, pick: Callable[[object], float], clock: list[float]) -> list[float]:
    values = []
    for _ in range(repeats):
        m = backend.measure(group)
        clock[0] += m.node_seconds
        values.append(pick(m))
    return values


def _partition(backend: MeasuringBackend, node: NodeSpec, which: Literal["cat", "mba"], repeats: int, clock: list[float]) -> PartitionEffect:
    cap = node.capabilities.l3_cat if which == "cat" else node.capabilities.mba
    if not cap.available:
        return PartitionEffect(available=False, reason=cap.reason or "not available on this node")
    cpu = node.cpus[0]
    if which == "cat":
        ways = next(d.ways for d in node.l3 if cpu in d.cpus)
        if ways < 2:
            return PartitionEffect(available=False, reason=f"the L3 of CPU {cpu} has {ways} way: no step to take")
        full, step, label = Placement(PROBE, (cpu,), l3_ways=ways), Placement(PROBE, (cpu,), l3_ways=ways - 1), f"{ways} -> {ways - 1} ways"
    else:
        gran = node.mba.bandwidth_gran if node.mba and node.mba.units == "percent" else 10
        full, step, label = Placement(PROBE, (cpu,), mba_percent=100), Placement(PROBE, (cpu,), mba_percent=100 - gran), f"100 -> {100 - gran} %"
    t = lambda m: m.times_s[0]  # noqa: E731
    a = Figure.of(_repeat(backend, [full], repeats, t, clock), "s")
    b = Figure.of(_repeat(backend, [step], repeats, t, clock), "s")
    return PartitionEffect(available=True, step=label, probe_full_s=a, probe_step_s=b, slowdown_pct=100.0 * (b.median / a.median - 1.0))


def run_bench(backend: MeasuringBackend, node_id: str, *, repeats: int = 3, progress: Progress | None = None) -> NodeBenchReport:
    """Measure the node's microbenchmarks through ``backend`` (``repeats`` runs of each)."""
    say = progress or (lambda _msg: None)
    node = backend.shape()
    runs: list[NodeBench] = []
    for k in range(repeats):
        runs.append(measure_node(backend, progress=lambda msg, k=k: say(f"[{k + 1}/{repeats}] {msg}")))
    clock = [sum(r.node_seconds for r in runs)]
    domains: list[DomainFigures] = []
    for i, first in enumerate(runs[0].domains):
        same = [r.domains[i] for r in runs]
        domains.append(DomainFigures(cpu_domain=first.cpu_domain, memory_domain=first.memory_domain,
                                     kind="local" if first.local else "remote",
                                     stream_gbs=Figure.of([d.bandwidth_gbs for d in same], "GB/s"),
                                     latency_ns=Figure.of([d.latency_ns for d in same], "ns/load")))
    remote = (f"measured between all {len(node.numa)} domains" if len(node.numa) > 1
              else "one NUMA domain: there is no remote memory on this node, only local figures")
    say("L3 CAT: one way less for the probe")
    cat = _partition(backend, node, "cat", repeats, clock)
    say("MBA: one step less for the probe")
    mba = _partition(backend, node, "mba", repeats, clock)
    return NodeBenchReport(
        node_id=node_id,
        node=node.name,
        simulated=backend.simulated,
        measured_at=datetime.now(timezone.utc),
        repeats=repeats,
        domains=domains,
        probe_alone_s=Figure.of([r.probe_alone_s for r in runs], "s"),
        remote=remote,
        l3=[L3Info(id=d.id, cpus=d.cpus, size_bytes=d.size_bytes, ways=d.ways) for d in node.l3],
        cat=cat,
        mba=mba,
        node_seconds=clock[0],
        runs=runs,
    )


def bench_path(home: Path, node_id: str) -> Path:
    return home / "node-bench" / f"{node_id}.json"


def save_bench(bench: NodeBenchReport, home: Path) -> Path:
    path = bench_path(home, bench.node_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(bench.model_dump_json(indent=1))
    tmp.replace(path)
    return path


def load_bench(home: Path, node_id: str) -> NodeBenchReport | None:
    """The stored benchmarks of a node, or None when there are none (an unreadable file is InputError)."""
    from env.errors import InputError

    path = bench_path(home, node_id)
    if not path.exists():
        return None
    try:
        return NodeBenchReport.model_validate_json(path.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"{path} is not a node benchmark document ({str(exc).splitlines()[0]}): run 'cosched node --bench' again") from None
