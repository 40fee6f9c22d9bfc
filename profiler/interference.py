"""Interference profiles and node microbenchmarks as documents (pydantic: the one schema).

A job's interference profile (Bubble-Up, Mars et al. MICRO 2011) holds what needs no hardware counter:

* ``sensitivity``: its slowdown next to the memory-pressure generator at several pressure levels (0..1);
* ``pressure``: the slowdown it causes to the reference probe next to it;
* where the node has CAT / MBA: its slowdown against its own L3 ways and against a bandwidth cap.

Every measurement behind the curves is kept as a ``RunRecord`` (the placements and the times read), so a
calibration can refit from the raw runs later. The profiler imports nothing of ``env``: a placement is
stored here as plain data (``PlacementRecord``), which ``env.measure.interference`` converts to and from
``env.measure.probing.Placement``.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

INTERFERENCE_SCHEMA_VERSION = 1

RunKind = Literal["solo", "bubble", "probe", "ways", "mba", "stream", "latency", "corun"]


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


class PlacementRecord(BaseModel):
    """One program of a measured group and where it ran (``env.measure.probing.Placement`` as data)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    job: str = Field(min_length=1, max_length=128)
    cpus: list[int] = Field(min_length=1)
    memory: Literal["local", "interleave", "bind"] = "local"
    memory_domain: int | None = None
    level: float | None = Field(None, ge=0, le=1)
    l3_ways: int | None = Field(None, ge=1)
    mba_percent: int | None = Field(None, ge=1, le=100)


class RunRecord(BaseModel):
    """One measurement: a group of placements started together and what each took; or, with ``start_s``, a
    continuous run's jobs that overlapped in time, each started when it was (its start and its time measured)."""

    model_config = ConfigDict(extra="forbid")
    kind: RunKind
    group: list[PlacementRecord] = Field(min_length=1)
    times_s: list[float | None] = Field(description="per placement: wall seconds; None for the pressure generator")
    metric: list[float | None] = Field(default_factory=list, description="STREAM: GB/s; LATENCY: ns per load")
    node_seconds: float = Field(ge=0, description="node time the measurement occupied")
    predicted_s: list[float | None] | None = Field(None, description="the model's prediction of times_s, where made")
    start_s: list[float] | None = Field(None, description="per placement: its start, seconds after the first one's "
                                        "(a continuous run's overlapping jobs); None: all started together")
    simulated: bool = False
    at: datetime = Field(default_factory=_utcnow)

    @property
    def makespan_s(self) -> float:
        if self.start_s is not None:
            return max(s + t for s, t in zip(self.start_s, self.times_s) if t is not None)
        return max(t for t in self.times_s if t is not None)

    @model_serializer(mode="wrap")
    def _without_starts_unless_given(self, handler):  # noqa: ANN001,ANN202 - records of groups keep their format
        out = handler(self)
        if isinstance(out, dict) and out.get("start_s") is None:
            out.pop("start_s", None)
        return out

    @model_validator(mode="after")
    def _starts_per_placement(self) -> "RunRecord":
        if self.start_s is not None and (len(self.start_s) != len(self.group) or min(self.start_s) < 0):
            raise ValueError("start_s needs one start (>= 0 s) per placement")
        return self


class CurvePoint(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    x: float = Field(description="bubble level (0..1), L3 ways, or MBA percent")
    slowdown: float = Field(gt=0, description="time / time alone on the same CPUs")


class InterferenceProfile(BaseModel):
    """One job's interference curves on one node."""

    model_config = ConfigDict(extra="forbid")
    schema_version: int = INTERFERENCE_SCHEMA_VERSION
    name: str = Field(min_length=1, max_length=128)
    node_id: str = Field(min_length=1)
    simulated: bool
    solo_s: float = Field(gt=0, description="alone on the whole node")
    one_core_s: float = Field(gt=0, description="alone on one CPU")
    cpus: list[int] = Field(description="the CPUs the curves ran it on (half of the first memory domain)")
    partner_cpus: list[int] = Field(description="the CPUs of the generator / probe next to it")
    alone_s: float = Field(gt=0, description="alone on ``cpus``: the curves' reference")
    sensitivity: list[CurvePoint] = Field(description="slowdown next to the pressure generator, by level")
    pressure: float = Field(gt=0, description="the reference probe's slowdown next to this job")
    ways: list[CurvePoint] | None = Field(None, description="slowdown by its own L3 ways (nodes with CAT)")
    mba: list[CurvePoint] | None = Field(None, description="slowdown by MBA cap in percent (nodes with MBA)")
    counters: dict[str, float | None] | None = Field(None, description="the whole-node solo run's counters, where counted")
    node_seconds: float = Field(ge=0)
    runs: list[RunRecord]
    created_at: datetime = Field(default_factory=_utcnow)


class DomainBench(BaseModel):
    """STREAM and LATENCY from the CPUs of one memory domain to the memory of another (or the same)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    cpu_domain: int
    memory_domain: int
    bandwidth_gbs: float = Field(gt=0)
    latency_ns: float = Field(gt=0)

    @property
    def local(self) -> bool:
        return self.cpu_domain == self.memory_domain


class NodeBench(BaseModel):
    """The node's microbenchmarks: per-domain bandwidth and latency, local and (with >= 2 domains) remote."""

    model_config = ConfigDict(extra="forbid")
    node_id: str
    simulated: bool
    domains: list[DomainBench]
    probe_alone_s: float = Field(gt=0, description="the reference probe alone on the curves' partner CPUs")
    node_seconds: float = Field(ge=0)
    runs: list[RunRecord]
    created_at: datetime = Field(default_factory=_utcnow)
