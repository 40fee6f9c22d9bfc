"""The node spec: one JSON shape for a discovered node and for a simulated one.

Discovery (``env.node.discover``) produces it from sysfs; simulated nodes are the same document stored as
JSON (``env/sim/nodes/*.json``), so a simulated node is just data.
"""

from __future__ import annotations

from functools import cached_property
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class Capability(BaseModel):
    """A node facility: available or not, and why not."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    available: bool
    reason: str | None = Field(None, description="why the capability is absent (or a note when present)")


class NumaDomain(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: int = Field(ge=0)
    cpus: list[int]
    memory_bytes: int | None = Field(None, ge=0)
    memory_bandwidth_gbs: float | None = Field(
        None, gt=0, description="sustained bandwidth of the domain; needed to express AMD MBA in its units"
    )


class L3Domain(BaseModel):
    """One last-level cache: the resctrl cache id, its CPUs, its size and ways."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: int = Field(ge=0)
    cpus: list[int]
    size_bytes: int | None = Field(None, ge=0)
    ways: int = Field(ge=1, description="ways that allocation masks address (the CAT cbm_mask bits when known)")


class CatInfo(BaseModel):
    """resctrl ``info/L3``: what a cache allocation mask may be."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    cbm_mask: str = Field(description="hex mask of the allocatable ways, e.g. '7ff'")
    min_cbm_bits: int = Field(ge=1)
    num_closids: int = Field(ge=1)
    shareable_bits: str = "0"
    contiguous: bool = Field(True, description="Intel requires contiguous masks; AMD allows any")

    @property
    def mask_int(self) -> int:
        return int(self.cbm_mask, 16)


class MbaInfo(BaseModel):
    """resctrl ``info/MB``: how bandwidth caps are expressed."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    units: Literal["percent", "amd_eighth_gbs"] = Field(
        description="Intel: percent of the domain's bandwidth; AMD: absolute units of 1/8 GB/s"
    )
    bandwidth_gran: int = Field(ge=1)
    min_bandwidth: int = Field(ge=0)
    max_bandwidth: int = Field(ge=1, description="100 on Intel; the unthrottled value on AMD (2048)")
    num_closids: int = Field(ge=1)


class Capabilities(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    numa_binding: Capability
    l3_cat: Capability
    mba: Capability
    rdtset: Capability
    perf_hw_counters: Capability
    per_thread_counters: Capability


class NodeSpec(BaseModel):
    """What the scheduler knows about a node. ``name`` is ``local`` or ``sim:NAME``.

    Frozen, and hashed by its canonical JSON (made once): caches key on the node itself, so equal specs share
    entries and a spec is never confused with another that reused its memory. Its lists are not changed in place
    either (they would not change the hash); a changed spec is a ``model_copy(update=...)``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    vendor: Literal["intel", "amd", "other"] = "other"
    model_name: str = ""
    cpus: list[int] = Field(min_length=1, description="online CPU ids, ascending")
    numa: list[NumaDomain] = Field(min_length=1)
    l3: list[L3Domain] = Field(min_length=1)
    cat: CatInfo | None = None
    mba: MbaInfo | None = None
    capabilities: Capabilities
    resctrl_path: str | None = Field(None, description="where resctrl is mounted, when it is")
    notes: dict[str, str] = Field(default_factory=dict, description="where the numbers come from")

    @field_validator("cpus")
    @classmethod
    def _ascending(cls, cpus: list[int]) -> list[int]:
        return sorted(cpus)

    @model_validator(mode="after")
    def _consistent(self) -> "NodeSpec":
        online = set(self.cpus)
        if len(online) != len(self.cpus):
            raise ValueError("cpus has duplicates")
        for kind, domains in (("numa", self.numa), ("l3", self.l3)):
            seen: set[int] = set()
            for d in domains:
                if not set(d.cpus) <= online:
                    raise ValueError(f"{kind} domain {d.id} lists CPUs that are not in cpus: {sorted(set(d.cpus) - online)}")
                if seen & set(d.cpus):
                    raise ValueError(f"{kind} domain {d.id} shares CPUs with another {kind} domain")
                seen |= set(d.cpus)
            if seen != online:
                raise ValueError(f"{kind} domains do not cover CPUs {sorted(online - seen)}")
        return self

    @property
    def simulated(self) -> bool:
        """Whether this is a simulated node (named ``sim:...``): its figures come from the node model."""
        return self.name.startswith("sim:")

    @cached_property
    def _key(self) -> str:
        return self.model_dump_json()

    def __hash__(self) -> int:
        return hash(self._key)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, NodeSpec):
            return NotImplemented
        return self._key == other._key

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> NodeSpec:
        """A copy; with ``update``, its cached values (the hash key, the domain maps, the ways) are made anew."""
        copied = super().model_copy(update=update, deep=deep)
        if update:
            for name in _DERIVED:
                copied.__dict__.pop(name, None)
        return copied

    # Derived views; the one place that answers "which domain holds CPU c". Cached: the planner asks often.
    @cached_property
    def _numa_map(self) -> dict[int, int]:
        return {c: d.id for d in self.numa for c in d.cpus}

    @cached_property
    def _l3_map(self) -> dict[int, int]:
        return {c: d.id for d in self.l3 for c in d.cpus}

    def numa_of(self, cpu: int) -> int:
        return self._numa_map[cpu]

    def l3_of(self, cpu: int) -> int:
        return self._l3_map[cpu]

    @cached_property
    def total_ways(self) -> int:
        return sum(d.ways for d in self.l3)

    def summary(self) -> dict[str, object]:
        """The short form a plan carries."""
        return {"name": self.name, "cpus": len(self.cpus), "numa_nodes": len(self.numa), "l3_domains": len(self.l3)}


#: NodeSpec's cached properties: values made from the fields, dropped when a copy changes them.
_DERIVED = tuple(k for k, v in vars(NodeSpec).items() if isinstance(v, cached_property))
