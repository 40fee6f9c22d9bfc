"""Building a plan: the one place where allocation decisions become a ``Plan`` document.

Every planner (the episode with the agent or a baseline, a hand-written plan check) goes through
``PlanBuilder``, so a plan means the same thing wherever it was made.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from env.errors import InputError
from env.node.resctrl import group_path
from env.node.spec import NodeSpec
from env.plan import actions
from env.plan.actions import Affinity, JobAction, MemoryPolicy, ScheduleAction
from env.plan.allocate import Allocation, GroupState, allocate, core_count, mba_hardware_value
from env.plan.launch import RdtTool, enforcement, launch_argv
from env.plan.models import Excluded, ModelRef, Plan, WindowJob


@dataclass
class _Placed:
    job: WindowJob
    action: int | None  # None: not an action of the encoding (time sharing's whole node)
    alloc: Allocation


@dataclass
class PlanBuilder:
    node: NodeSpec
    schedule: ScheduleAction
    max_concurrency: int
    window_size: int
    rdt_tool: RdtTool = "resctrl"
    pin_runtime: Path | None = None
    groups: list[list[_Placed]] = field(default_factory=list)
    excluded: list[Excluded] = field(default_factory=list)
    state: GroupState = field(default_factory=GroupState)

    def __post_init__(self) -> None:
        self.groups.append([])

    @property
    def open_group(self) -> list[_Placed]:
        return self.groups[-1]

    def fits(self, action_index: int) -> bool:
        """Would this job-level action fit in the open group now? (Used for action masks.)"""
        if len(self.open_group) >= self.max_concurrency:
            return False
        a = actions.decode(action_index)
        if not isinstance(a, JobAction):
            return False
        return core_count(self.node, a.cores) <= len(self.state.free_cpus(self.node))

    def place(self, job: WindowJob, action_index: int) -> Allocation | None:
        """Allocate ``job`` into the open group; None when it does not fit (nothing changes then)."""
        a = actions.decode(action_index)
        if not isinstance(a, JobAction):
            raise ValueError(f"action {action_index} is not a job-level action")
        if len(self.open_group) >= self.max_concurrency:
            return None
        alloc = _allocate_memoised(self.node, self.schedule, action_index, self.state)
        if alloc is not None:
            self.open_group.append(_Placed(job, action_index, alloc))
        return alloc

    def place_whole_node(self, job: WindowJob) -> Allocation:
        """Time sharing: ``job`` alone in a group of its own with the whole node (every CPU, every way,
        no bandwidth cap, the memory policy of ``schedule``). Not an action of the encoding (the largest core
        option is 7/8), so the plan job's ``action`` is None."""
        from env.plan.allocate import place_mask

        self.close_group()
        cpus = tuple(self.node.cpus)
        l3 = {d.id: (d.ways, place_mask(self.node, d.id, d.ways, self.state)) for d in self.node.l3}
        self.state.taken_cpus.update(cpus)
        alloc = Allocation(cpus=cpus, numa_nodes=tuple(d.id for d in self.node.numa), memory=self.schedule.memory,
                           l3=l3, mem_bw_percent={d.id: 100 for d in self.node.numa})
        self.open_group.append(_Placed(job, None, alloc))
        self.close_group()
        return alloc

    def close_group(self) -> None:
        if self.open_group:
            self.groups.append([])
            self.state = GroupState()

    def exclude(self, job: WindowJob, reason: str) -> None:
        self.excluded.append(Excluded(id=job.id, profile=job.profile, command=job.command or [], env=job.env, reason=reason))

    def build(
        self,
        policy: str,
        model: ModelRef | None = None,
        predicted_makespans: list[float] | None = None,
        predicted_throughput: float | None = None,
        predictions_source: str | None = None,
        **notes: Any,
    ) -> Plan:
        """The finished plan. ``notes``: the plan's other fields (``search``, ``no_prediction``, ``requested_policy``,
        ``fallback_reason``), so that no plan is edited after it is built."""
        enf = enforcement(self.node, self.rdt_tool)
        hw_differs = self.node.mba is not None and self.node.mba.units != "percent"
        groups = [g for g in self.groups if g]
        plan_groups = []
        for gi, group in enumerate(groups):
            jobs = []
            for p in group:
                mb_hw = {d: v for d, pct in p.alloc.mem_bw_percent.items() if (v := mba_hardware_value(self.node, d, pct)) is not None}
                argv = launch_argv(
                    self.node,
                    p.job.command or [],
                    p.alloc,
                    enf,
                    resctrl_group=group_path(self.node, gi, p.job.id) if enf.method == "resctrl" else None,
                    mb_hw=mb_hw,
                    pin_runtime=self.pin_runtime,
                )
                # Plain data, validated below with the whole plan in one call (the same checks as a PlanJob(...)
                # per job, without a Python-level model construction per job and per L3 domain).
                jobs.append({
                    "id": p.job.id,
                    "profile": p.job.profile_name,
                    "command": p.job.command or [],
                    "env": p.job.env,
                    "cpus": p.alloc.cpus,
                    "numa_nodes": p.alloc.numa_nodes,
                    "memory": p.alloc.memory,
                    "l3": {str(d): {"ways": w, "mask": f"{m:#05x}"} for d, (w, m) in p.alloc.l3.items()},
                    "mem_bw_percent": {str(d): v for d, v in p.alloc.mem_bw_percent.items()},
                    "mem_bw_hw": {str(d): v for d, v in mb_hw.items()} if hw_differs else None,
                    "action": p.action,
                    "launch": argv,
                })
            makespan = predicted_makespans[gi] if predicted_makespans and gi < len(predicted_makespans) else None
            plan_groups.append({"index": gi, "jobs": jobs, "predicted_makespan_s": makespan})
        return Plan.model_validate({
            "node": self.node.summary(),
            "policy": policy,
            "model": model,
            "window_size": self.window_size,
            "max_concurrency": self.max_concurrency,
            "schedule_policy": {"affinity": self.schedule.affinity, "memory": self.schedule.memory},
            "groups": plan_groups,
            "excluded": self.excluded,
            "enforcement": enf,
            "pin_runtime": self.pin_runtime is not None,
            "predicted_throughput_vs_timeshare": predicted_throughput,
            "predictions_source": predictions_source,
            # set (as None) like every other field, so the plan and its JSON round trip are the same document
            "no_prediction": None,
            "requested_policy": None,
            "fallback_reason": None,
            "search": None,
            "stale_model": None,
            **notes,
        })


def _allocate_memoised(node: NodeSpec, schedule: ScheduleAction, action_index: int, state: GroupState) -> Allocation | None:
    """``allocate(node, schedule.affinity, schedule.memory, decode(action_index), state)``, memoised (``_allocation``)."""
    alloc, cursors = _allocation(node, schedule.affinity, schedule.memory, action_index,
                                 frozenset(state.taken_cpus), tuple(sorted(state.mask_cursor.items())))
    if alloc is not None:  # what allocate does to the state: the CPUs taken, the cursors moved
        state.taken_cpus.update(alloc.cpus)
        state.mask_cursor.update(cursors)
    return alloc


@functools.lru_cache(maxsize=32768)  # a few MB at most
def _allocation(node: NodeSpec, affinity: Affinity, memory: MemoryPolicy, action_index: int, taken: frozenset[int],
                cursors: tuple[tuple[int, int], ...]) -> tuple[Allocation | None, tuple[tuple[int, int], ...]]:
    """The allocation and the mask cursors after it. ``allocate`` is a pure function of exactly these, and a service
    plans the same few group states over and over; allocations are frozen, so one object may serve many plans."""
    scratch = GroupState(set(taken), dict(cursors))
    alloc = allocate(node, affinity, memory, actions.decode(action_index), scratch)  # type: ignore[arg-type]  # a job action
    return alloc, tuple(scratch.mask_cursor.items())


def check_plan_for_node(plan: Plan, node: NodeSpec) -> None:
    """A plan runs only on the node it was made for, and only on CPUs that node has."""
    if plan.node.name != node.name:
        raise InputError(f"the plan is for node {plan.node.name!r}, not {node.name!r}: plan it again for this node")
    online = set(node.cpus)
    for g in plan.groups:
        for j in g.jobs:
            bad = sorted(set(j.cpus) - online)
            if bad:
                raise InputError(f"job {j.id} in group {g.index} asks for CPUs {bad}, which node {node.name} does not have (it has {node.cpus})")
            bad_numa = sorted(set(j.numa_nodes) - {d.id for d in node.numa})
            if bad_numa:
                raise InputError(f"job {j.id} in group {g.index} asks for NUMA domains {bad_numa}, which node {node.name} does not have")
