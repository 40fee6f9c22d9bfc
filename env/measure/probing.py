"""What calibration may do to a node: run programs with a placement and read their times. Nothing else.

``cosched calibrate`` talks to a node only through ``MeasuringBackend``. The real node implements it with
real processes (through ``env.plan.launch`` and the executor); the simulated node implements it as black-box
hardware whose contention parameters are never readable through this interface (the twin test). So the
same calibrator, fit and probe choice run on both.

Built-in programs every node runs alike (the project's own C programs in ``native/`` on a real node; the
same programs modelled on a simulated one):

* ``BUBBLE``: the memory-pressure generator (Bubble-Up, Mars et al. MICRO 2011). It streams over a working
  set at a rate set by ``Placement.level`` (0 = idle, 1 = the most pressure it can make) and runs until the
  foreground programs of its measurement have finished: its time is ``None``.
* ``PROBE``: the reference probe, a fixed amount of memory-sensitive work; its slowdown next to a job is that
  job's *pressure*.
* ``STREAM`` and ``LATENCY``: the microbenchmarks (memory bandwidth and dependent-load latency of the memory
  domain named by ``Placement.memory_domain``, from the CPUs of ``Placement.cpus``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol, Sequence

from env.node.spec import NodeSpec

BUBBLE = "cosched:bubble"
PROBE = "cosched:probe"
STREAM = "cosched:stream"
LATENCY = "cosched:latency"
BUILTINS = (BUBBLE, PROBE, STREAM, LATENCY)

MemoryPolicy = Literal["local", "interleave", "bind"]


@dataclass(frozen=True)
class Placement:
    """One program of a measurement and where it runs."""

    job: str  # a name from MeasuringBackend.jobs(), or one of BUILTINS
    cpus: tuple[int, ...]
    memory: MemoryPolicy = "local"
    memory_domain: int | None = None  # with memory="bind" (and for STREAM / LATENCY): the NUMA domain
    level: float | None = None  # BUBBLE only: pressure in [0, 1]
    l3_ways: int | None = None  # nodes with L3 CAT only: ways of its own partition (None: shares all)
    mba_percent: int | None = None  # nodes with MBA only: bandwidth cap (None: uncapped)


@dataclass(frozen=True)
class Measurement:
    """What one run of a group of placements gave."""

    times_s: tuple[float | None, ...]  # per placement, in order: wall seconds; None for BUBBLE
    node_seconds: float  # node time the measurement occupied (what calibration "costs")
    counters: tuple[dict[str, float | None] | None, ...] = field(default=())  # per placement, where counted
    # STREAM: GB/s; LATENCY: ns per load. Per placement, None for the others.
    metric: tuple[float | None, ...] = field(default=())


class MeasuringBackend(Protocol):
    simulated: bool

    def shape(self) -> NodeSpec:
        """The node's discoverable shape (CPUs, domains, ways, capabilities): what ``cosched node`` shows."""
        ...

    def jobs(self) -> list[str]:
        """The node's own jobs that can be run (profiled programs on a real node)."""
        ...

    def measure(self, group: Sequence[Placement], *, seed: int | None = None) -> Measurement:
        """Run the placements together from one start; a bad placement is ``InputError`` (one message)."""
        ...
