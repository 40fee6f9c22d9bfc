"""The profile document: a solo run of one job on one node (pydantic: the one schema).

Units of ``counters`` (perf's own): ``duration_time`` in nanoseconds, ``task-clock`` in milliseconds,
every other event a count. A counter the node could not count is ``None`` (missing), never 0.

A simulated node builds ``Profile`` objects directly (``simulated=True``, usually every counter present).
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from profiler.errors import ProfilerInputError
from profiler.events import PERF_EVENTS

PROFILE_SCHEMA_VERSION = 1

#: A program adapts to CPUs taken from it while it runs when its measured time is at most this many times what the
#: node model predicts (``profiler.adaptivity``). The measured programs are at 0.98-1.09 or about 100
#: (``bench/giveback_cost.py``): the bound sits between, nearer the first, with room for a busy node's noise.
ADAPTS_MAX = 1.25

#: What a profile name (and a job id) may be made of.
NAME_PATTERN = r"^[A-Za-z0-9._:-]{1,128}$"

_NAME = re.compile(NAME_PATTERN)


def check_profile_name(name: str) -> str:
    """The name, or ProfilerInputError saying what a name may be."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ProfilerInputError(f"bad profile name {name!r}: use 1-128 characters of A-Z a-z 0-9 . _ : -")
    return name


ProfileName = Annotated[str, Field(pattern=NAME_PATTERN, description="1-128 characters of [A-Za-z0-9._:-]")]


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Profile(BaseModel):
    """One job's solo profile on one node, keyed by (name, node_id)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: int = Field(default=PROFILE_SCHEMA_VERSION, description="version of this document's schema")
    name: ProfileName
    node_id: str = Field(min_length=1, max_length=256, description="the node's hardware-shape id")
    command: list[str] = Field(min_length=1, description="argv of the profiled command, never run through a shell")
    counters: dict[str, float | None] = Field(
        description="perf event -> value (duration_time ns, task-clock ms, others counts); None = missing"
    )
    available_counters: list[str] = Field(
        default_factory=list, description="the events this node counted in this run (derived from counters)"
    )
    wall_s: float = Field(gt=0, description="wall time of the solo run on the whole node (monotonic clock)")
    exit_status: int = Field(default=0, description="the command's exit status (stored profiles: 0)")
    peak_rss_kb: int | None = Field(default=None, ge=0, description="peak resident memory (rusage ru_maxrss)")
    scale_factor: float | None = Field(
        default=None, gt=0, description="one_core_s / wall_s; None when not measured (--no-scale)"
    )
    one_core_s: float | None = Field(default=None, gt=0, description="wall time of the run bound to one core")
    # Not measured: left out of the document, which is then as before these fields existed (node-model files embed
    # profiles and are compared byte for byte).
    giveback_ratio: float | None = Field(
        default=None, gt=0, exclude_if=lambda v: v is None, description="measured (cosched profile --adapts): its time when half its CPUs are taken "
        "halfway through, over what a start on those CPUs predicts; a lower bound when the run was stopped; None: not "
        "measured")
    adapts: bool | None = Field(
        default=None, exclude_if=lambda v: v is None, description=f"it loses nothing when CPUs are taken from it while it runs (giveback_ratio <= "
        f"{ADAPTS_MAX}, not stopped); None: not measured. Only such a program is asked to give CPUs back")
    other_load_cpus: float | None = Field(
        default=None, ge=0, description="CPUs used by other processes during the solo run (0 = the node was idle)"
    )
    perf_version: str | None = Field(default=None, description="'perf version 6.1.192'; None when simulated")
    simulated: bool = Field(default=False, description="True when a model produced these figures, not a run")
    created_at: datetime = Field(default_factory=_utcnow)

    @field_validator("counters")
    @classmethod
    def _known_events_all_present(cls, counters: dict[str, float | None]) -> dict[str, float | None]:
        unknown = sorted(set(counters) - set(PERF_EVENTS))
        if unknown:
            raise ValueError(f"unknown perf events {unknown}; known: {list(PERF_EVENTS)}")
        out: dict[str, float | None] = {}
        for event in PERF_EVENTS:  # every event, in the fixed order; absent ones are missing
            value = counters.get(event)
            if value is not None and (not math.isfinite(value) or value < 0):
                raise ValueError(f"{event}: a counter is a finite value >= 0 or null (missing), not {value}")
            out[event] = None if value is None else float(value)
        return out

    @model_validator(mode="after")
    def _consistent(self) -> "Profile":
        available = [e for e in PERF_EVENTS if self.counters[e] is not None]
        if self.available_counters and sorted(self.available_counters) != sorted(available):
            raise ValueError(
                f"available_counters {self.available_counters} disagree with the counters present {available}"
            )
        object.__setattr__(self, "available_counters", available)
        if (self.scale_factor is None) != (self.one_core_s is None):
            raise ValueError("scale_factor and one_core_s are both given or both missing")
        if (self.giveback_ratio is None) != (self.adapts is None):
            raise ValueError("giveback_ratio and adapts are both given or both missing")
        if self.schema_version != PROFILE_SCHEMA_VERSION:
            raise ValueError(f"profile schema_version {self.schema_version} is not {PROFILE_SCHEMA_VERSION}")
        return self

    @property
    def missing_counters(self) -> list[str]:
        return [e for e in PERF_EVENTS if self.counters[e] is None]

    @property
    def duration_s(self) -> float:
        """The solo time: perf's duration_time when counted, else the measured wall time."""
        ns = self.counters.get("duration_time")
        return ns / 1e9 if ns else self.wall_s
