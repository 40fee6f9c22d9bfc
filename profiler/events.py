"""The paper's twelve perf events (Table III of the co-scheduler paper), in a fixed order.

The order is part of the profile document and of the feature set: never reorder, only append.
"""

from __future__ import annotations

from typing import Final

PERF_EVENTS: Final[tuple[str, ...]] = (
    "duration_time",
    "task-clock",
    "context-switches",
    "cpu-cycles",
    "instructions",
    "page-faults",
    "branch-misses",
    "L1-dcache-load-misses",
    "L1-icache-load-misses",
    "LLC-load-misses",
    "dTLB-load-misses",
    "iTLB-load-misses",
)

#: Events counted by the kernel itself (no PMU needed): present even in a VM without a virtual PMU.
SOFTWARE_EVENTS: Final[frozenset[str]] = frozenset(
    {"duration_time", "task-clock", "context-switches", "page-faults"}
)

#: Events that need hardware performance counters; a node without a PMU reports them `<not supported>`.
HARDWARE_EVENTS: Final[tuple[str, ...]] = tuple(e for e in PERF_EVENTS if e not in SOFTWARE_EVENTS)

#: Events whose per-thread values are one shared clock, not per-thread amounts: aggregate with max, not sum.
WALL_CLOCK_EVENTS: Final[frozenset[str]] = frozenset({"duration_time"})
