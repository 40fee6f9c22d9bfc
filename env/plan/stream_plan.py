"""The continuous plan (``"mode": "continuous"``): jobs start at events, no group barriers; its run report.

A continuous plan lists ``launches`` in order. Each launch is a job with its allocation (the fields of a job in a
group, ``PlanJob``) and ``after``: the ids of the launches whose end frees what it needs (the CPUs it takes, or a
place under Cmax). ``cosched run PLAN.json`` starts the launches in their order, each once every job of its
``after`` has ended (the real ends, not the predicted ones), its CPUs are free and fewer than Cmax jobs run; its
``changes`` (new L3 ways / bandwidth caps of a running job) are applied at the end of the job they name
(``at_end_of``). Predicted starts and ends come from the node model (simulated) and are labelled so.

The plan is checked when it is read, one line naming what is wrong: an ``after`` naming no launch, a launch waiting
for itself or for a later launch, a cycle, two launches on one CPU where the later does not wait for the earlier
(oversubscribed CPUs), a change naming no launch. ``GroupsPlan`` is today's window plan saying which mode it is and
why (``mode_reason``). ``LaunchOrder`` is the rule both runners (real and simulated) follow.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from env.node.resctrl import group_path
from env.node.spec import NodeSpec
from env.plan.allocate import Allocation, mba_hardware_value
from env.plan.launch import enforcement, launch_argv
from env.plan.models import (
    MAX_CONCURRENCY,
    Enforcement,
    Excluded,
    L3Alloc,
    Name,
    NodeRef,
    Plan,
    PlanJob,
    RunJob,
    Window,
    WindowJob,
)

Mode = Literal["groups", "continuous"]
#: Times in a node-model run closer than this are the same event (s).
SAME_EVENT_S = 1e-6


class ScheduleRequest(Window):
    """POST /schedule's body: a window, and the mode asked for (absent: whichever the node model predicts better)."""

    mode: Mode | None = Field(None, description="groups (barriers) or continuous (jobs start at events); absent: the "
                              "one the node model predicts better, and the plan says which and why")


class GroupsPlan(Plan):
    """A window plan (groups with barriers) that says which mode it is and why it was chosen."""

    mode: Literal["groups"] = "groups"
    mode_reason: str | None = Field(None, description="why this mode: asked for, or what the node model predicted")
    continuous_predicted_makespan_s: float | None = Field(None, description="the continuous plan's predicted makespan "
                                                          "it was compared with (simulated), when it was")


class Launch(PlanJob):
    after: list[Name] = Field(default_factory=list, description="launches whose end frees what this one needs: it "
                              "starts once they have all ended (and its CPUs are free, and fewer than Cmax jobs run)")
    predicted_start_s: float | None = Field(None, description="a prediction (simulated), s after the run starts")
    predicted_end_s: float | None = Field(None, description="a prediction (simulated), s after the run starts")
    not_before_s: float | None = Field(None, ge=0, allow_inf_nan=False,
                                       description="its submit time in a stream, s after the run starts: it does not "
                                       "start before; absent: no wait")
    adapts: bool = Field(False, description="its program loses nothing when CPUs are taken from it while it runs: "
                         "only such a launch gives CPUs back (a change with cpus)")


class Change(BaseModel):
    """New L3 ways / bandwidth caps of a running job, applied when ``at_end_of`` ends (its CPUs and memory stay); or
    CPUs a running job that adapts gives back (``cpus``: those it keeps), just before ``before_launch`` starts on
    them."""

    model_config = ConfigDict(extra="forbid")
    at_end_of: Name | None = Field(None, description="the launch whose end is the event that applies this change")
    before_launch: Name | None = Field(None, description="the launch this change makes room for: applied just before "
                                       "it starts (a give-back, with cpus)")
    job: Name = Field(description="the running launch whose ways / caps change, or that gives CPUs back")
    cpus: list[int] | None = Field(None, description="the CPUs the job keeps from then on, fewer than it holds (its "
                                   "threads re-pinned onto them); absent: its CPUs stay")
    l3: dict[str, L3Alloc] = Field(default_factory=dict, description="L3 domain id -> ways and contiguous mask")
    mem_bw_percent: dict[str, int] = Field(default_factory=dict, description="memory domain id -> percent")
    mem_bw_hw: dict[str, int] | None = Field(None, description="the value given to the hardware where it is not percent")


class ContinuousPlan(BaseModel):
    model_config = ConfigDict(extra="forbid")
    node: NodeRef
    mode: Literal["continuous"] = "continuous"
    mode_reason: str | None = Field(None, description="why this mode: asked for, or what the node model predicted")
    policy: str = Field(description="the stream policy that decided the launches on the node model")
    window_size: int = Field(ge=1, description="queued jobs the policy chose among at each event")
    max_concurrency: int = Field(ge=1, le=MAX_CONCURRENCY)
    launches: list[Launch]
    changes: list[Change] = Field(default_factory=list)
    excluded: list[Excluded] = Field(default_factory=list)
    enforcement: Enforcement
    pin_runtime: bool = False
    predicted_makespan_s: float | None = Field(None, description="a prediction (simulated): first start to last end")
    predicted_throughput_vs_timeshare: float | None = Field(None, description="a prediction (simulated)")
    predictions_source: str | None = Field(None, description="what made the predictions, e.g. 'simulated: node model sim:reference'")
    groups_predicted_makespan_s: float | None = Field(None, description="the groups plan's predicted makespan it was "
                                                      "compared with (simulated), when it was")

    @model_validator(mode="after")
    def _well_formed(self) -> ContinuousPlan:
        check_launches(self.launches, self.changes, self.excluded)
        if self.pin_runtime and any(c.cpus is not None for c in self.changes):
            raise ValueError("the plan gives CPUs back, but the pinning runtime keeps a job's threads on the CPUs it "
                             "started with: plan without --pin-runtime")
        return self


def check_launches(launches: Sequence[Launch], changes: Sequence[Change], excluded: Sequence[Excluded] = ()) -> None:
    """ValueError (one line) naming what is wrong with the launches' order, ``after`` and CPUs, or nothing."""
    ids = [j.id for j in launches] + [e.id for e in excluded]
    dups = sorted({i for i in ids if ids.count(i) > 1}) if len(set(ids)) != len(ids) else []
    if dups:
        raise ValueError(f"every job must appear exactly once; repeated: {', '.join(dups)}")
    pos = {j.id: k for k, j in enumerate(launches)}
    for j in launches:
        for a in j.after:
            if a not in pos:
                raise ValueError(f"launch {j.id} waits for {a!r}, which is not a launch of this plan")
            if a == j.id:
                raise ValueError(f"launch {j.id} waits for itself")
    cycle = _cycle({j.id: j.after for j in launches})
    if cycle:
        raise ValueError(f"launches wait for each other in a cycle: {' -> '.join(cycle)}: none of them could start")
    for j in launches:
        for a in j.after:
            if pos[a] > pos[j.id]:
                raise ValueError(f"launch {j.id} waits for {a}, which is listed after it: list every launch after "
                                 "the jobs it waits for (launches start in their order)")
    before = closures(launches)
    freed: dict[int, list[tuple[int, set[int]]]] = {}  # launch position -> (giver, CPUs it gives back) before it
    for ch in changes:
        if (ch.at_end_of is None) == (ch.before_launch is None):
            raise ValueError(f"a change of {ch.job} needs one of at_end_of (ways and caps) or before_launch (a give-back)")
        if (ch.cpus is None) != (ch.before_launch is None):
            raise ValueError(f"a change of {ch.job}: CPUs are given back just before a launch (cpus with "
                             "before_launch), ways and caps change at a job's end (at_end_of without cpus)")
        for what in (ch.at_end_of or ch.before_launch, ch.job):
            if what not in pos:
                raise ValueError(f"a change names {what!r}, which is not a launch of this plan")
        if ch.at_end_of == ch.job:
            raise ValueError(f"a change of {ch.job} is tied to its own end: it would never run again")
        if ch.before_launch is not None:
            _check_give_back(launches, pos, before, ch)
            gives = set(launches[pos[ch.job]].cpus) - set(ch.cpus or ())
            freed.setdefault(pos[ch.before_launch], []).append((pos[ch.job], gives))
    last: dict[int, int] = {}
    for k, j in enumerate(launches):
        for giver, cpus in freed.get(k, ()):
            for c in cpus:
                if last.get(c) == giver:
                    del last[c]  # given back just before this launch: it need not wait for the giver's end
        for c in j.cpus:
            if c in last and not before[k] >> last[c] & 1:
                other = launches[last[c]].id
                raise ValueError(f"launches {other} and {j.id} both take CPU {c} and {j.id} does not wait for {other}: "
                                 f"they could run at once and oversubscribe it (add {other!r} to {j.id}'s after)")
            last[c] = k
        if len(set(j.cpus)) != len(j.cpus):
            raise ValueError(f"launch {j.id} lists a CPU twice")


def _check_give_back(launches: Sequence[Launch], pos: dict[str, int], before: list[int], ch: Change) -> None:
    """ValueError (one line) unless ``ch`` gives back CPUs a launch that adapts holds, before a later launch that
    does not wait for its end."""
    j, k = pos[ch.job], pos[ch.before_launch]  # type: ignore[index]
    job = launches[j]
    if not job.adapts:
        raise ValueError(f"launch {ch.job} gives CPUs back but does not say adapts: only a program that loses nothing "
                         "when CPUs are taken from it gives them back")
    if not ch.cpus or not set(ch.cpus) < set(job.cpus):
        raise ValueError(f"launch {ch.job} would keep CPUs {ch.cpus}: it keeps some, not all, of its CPUs {job.cpus}")
    if j >= k or before[k] >> j & 1:
        raise ValueError(f"launch {ch.job} gives CPUs back before {ch.before_launch}, which is listed before it or "
                         "waits for its end: list the launch after it, not waiting for it")


def _cycle(after: dict[str, list[str]]) -> list[str] | None:
    """A cycle of the wait graph (its ids, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    for root, waits in after.items():
        if state.get(root):
            continue
        stack: list[tuple[str, Iterable[str]]] = [(root, iter(waits))]
        path = [root]
        state[root] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                path.pop()
                state[node] = 2
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append((nxt, iter(after.get(nxt, ()))))
    return None


def closures(launches: Sequence[Launch]) -> list[int]:
    """For each launch, the launches it waits for directly or through others, as a bit set of positions (the
    launches must be checked: every ``after`` names an earlier launch)."""
    pos = {j.id: k for k, j in enumerate(launches)}
    out: list[int] = []
    for j in launches:
        bits = 0
        for a in j.after:
            bits |= (1 << pos[a]) | out[pos[a]]
        out.append(bits)
    return out


class LaunchOrder:
    """The rule of ``cosched run PLAN.json`` (real and simulated): launches start in their order; the next one starts
    once every job of its ``after`` has ended, its CPUs are free, fewer than Cmax jobs run and its ``not_before_s`` has
    come; each change is due when its ``at_end_of`` job ends. A give-back (a change with ``before_launch``) counts its
    CPUs as free for that launch while its job still runs, and is due just before the launch starts: the runner
    applies ``before(launch)`` first. ``done``: launches that ended before (a resumed run)."""

    def __init__(self, plan: ContinuousPlan, done: Iterable[str] = ()) -> None:
        self.plan = plan
        self.ended: set[str] = set(done)
        self.started: set[str] = set(self.ended)
        self.running: dict[str, Launch] = {}
        self.cpus: dict[str, set[int]] = {}  # what each running launch holds now
        self.due: dict[str, list[Change]] = {}
        self.next = 0

    @property
    def finished(self) -> bool:
        return self.next >= len(self.plan.launches) and not self.running

    def startable(self, now: float) -> list[Launch]:
        """The launches that start now, in order (marked started)."""
        out: list[Launch] = []
        launches = self.plan.launches
        while self.next < len(launches):
            j = launches[self.next]
            if j.id in self.started:
                self.next += 1
                continue
            gives = [c for c in self.plan.changes if c.before_launch == j.id and c.job in self.running]
            kept = {**self.cpus, **{c.job: set(c.cpus or ()) for c in gives}}
            busy = {c for r in self.running for c in kept[r]}
            if (not set(j.after) <= self.ended or busy & set(j.cpus) or len(self.running) >= self.plan.max_concurrency
                    or (j.not_before_s is not None and now < j.not_before_s)):
                break
            self.cpus = kept
            self.due[j.id] = gives
            self.started.add(j.id)
            self.running[j.id] = j
            self.cpus[j.id] = set(j.cpus)
            out.append(j)
            self.next += 1
        return out

    def before(self, launch_id: str) -> list[Change]:
        """The give-backs to apply just before ``launch_id`` starts (once)."""
        return self.due.pop(launch_id, [])

    def wake_at(self) -> float | None:
        """When the next launch is held only by its submit time (the time to wake up for it), or None."""
        if self.next < len(self.plan.launches):
            j = self.plan.launches[self.next]
            if j.not_before_s is not None and set(j.after) <= self.ended:
                return j.not_before_s
        return None

    def end(self, job_id: str) -> list[Change]:
        """``job_id`` has ended: the changes due now (those tied to its end), in plan order."""
        self.running.pop(job_id, None)
        self.cpus.pop(job_id, None)
        self.ended.add(job_id)
        return [c for c in self.plan.changes if c.at_end_of == job_id]


# -- building a plan -------------------------------------------------------------------------------------------


def plan_job_fields(node: NodeSpec, job: WindowJob, alloc: Allocation, enf: Enforcement, index: int,
                    pin_runtime: Any = None) -> dict[str, Any]:
    """A job's fields in a plan (as ``PlanBuilder`` writes them), its launch argv included; ``index``: its resctrl
    group's number."""
    mb_hw = {d: v for d, pct in alloc.mem_bw_percent.items() if (v := mba_hardware_value(node, d, pct)) is not None}
    hw_differs = node.mba is not None and node.mba.units != "percent"
    argv = launch_argv(node, job.command or [], alloc, enf,
                       resctrl_group=group_path(node, index, job.id) if enf.method == "resctrl" else None,
                       mb_hw=mb_hw, pin_runtime=pin_runtime)
    return {"id": job.id, "profile": job.profile_name, "command": job.command or [], "env": job.env,
            "cpus": list(alloc.cpus), "numa_nodes": list(alloc.numa_nodes), "memory": alloc.memory,
            "l3": {str(d): {"ways": w, "mask": f"{m:#05x}"} for d, (w, m) in alloc.l3.items()},
            "mem_bw_percent": {str(d): v for d, v in alloc.mem_bw_percent.items()},
            "mem_bw_hw": {str(d): v for d, v in mb_hw.items()} if hw_differs else None, "action": None, "launch": argv}


def change_fields(node: NodeSpec, at_end_of: str | None, job_id: str, alloc: Allocation) -> dict[str, Any]:
    mb_hw = {d: v for d, pct in alloc.mem_bw_percent.items() if (v := mba_hardware_value(node, d, pct)) is not None}
    hw_differs = node.mba is not None and node.mba.units != "percent"
    return {"at_end_of": at_end_of, "job": job_id,
            "l3": {str(d): {"ways": w, "mask": f"{m:#05x}"} for d, (w, m) in alloc.l3.items()},
            "mem_bw_percent": {str(d): v for d, v in alloc.mem_bw_percent.items()},
            "mem_bw_hw": {str(d): v for d, v in mb_hw.items()} if hw_differs else None}


def after_sets(starts: Sequence[tuple[float, tuple[int, ...]]], ends: Sequence[float], max_concurrency: int,
               releases: dict[int, set[int]] | None = None) -> list[list[int]]:
    """Each launch's ``after`` (positions) from a node-model run, launches in start order: the last earlier launch on
    each of its CPUs (ended at or before its start), then, while more than Cmax - 1 earlier launches that it does not
    wait for could still run, the latest of them to have ended at or before its start (the end that made a place)."""
    out: list[list[int]] = []
    closure: list[int] = []
    holder: dict[int, int] = {}
    for k, (t, cpus) in enumerate(starts):
        for c in (releases or {}).get(k, ()):  # given back just before this launch: no longer its holder's
            holder.pop(c, None)
        after = sorted({holder[c] for c in cpus if c in holder})
        bits = 0
        for a in after:
            bits |= (1 << a) | closure[a]
        free = [i for i in range(k) if not bits >> i & 1]
        while len(free) > max_concurrency - 1:
            done = [i for i in free if ends[i] <= t + SAME_EVENT_S]
            if not done:
                break
            a = max(done, key=lambda i: (ends[i], i))
            after.append(a)
            bits |= (1 << a) | closure[a]
            free = [i for i in free if not bits >> i & 1]
        out.append(sorted(after))
        closure.append(bits)
        for c in cpus:
            holder[c] = k
    return out


def build_continuous_plan(node: NodeSpec, launches: Sequence[tuple[WindowJob, Allocation, Sequence[str], float | None,
                                                                    float | None, float | None]], *,
                          policy: str, max_concurrency: int, window_size: int,
                          changes: Sequence[tuple[str, str, Allocation]] = (), excluded: Sequence[Excluded] = (),
                          give_backs: Sequence[tuple[str, str, Allocation]] = (), adapts: Sequence[str] = (),
                          pin_runtime: Any = None, **fields: Any) -> ContinuousPlan:
    """The plan document: ``launches`` of (job, allocation, after ids, predicted start, predicted end, not before),
    in order; ``changes`` of (at the end of, job, its new allocation); ``give_backs`` of (before which launch, job,
    its allocation from then on: the CPUs it keeps); ``adapts``: the launches whose program adapts; ``fields``: the
    plan's other fields."""
    enf = enforcement(node)
    docs = []
    for k, (job, alloc, after, start, end, not_before) in enumerate(launches):
        doc = plan_job_fields(node, job, alloc, enf, k, pin_runtime)
        doc.update(after=list(after), predicted_start_s=start, predicted_end_s=end, not_before_s=not_before,
                   adapts=job.id in adapts)
        docs.append(doc)
    return ContinuousPlan.model_validate({
        "node": node.summary(), "policy": policy, "window_size": window_size, "max_concurrency": max_concurrency,
        "launches": docs, "excluded": list(excluded),
        "changes": [change_fields(node, *c) for c in changes] + [
            {**change_fields(node, None, jid, kept), "before_launch": b, "cpus": list(kept.cpus)}
            for b, jid, kept in give_backs],
        "enforcement": enf, "pin_runtime": pin_runtime is not None, **fields})


# -- the run report --------------------------------------------------------------------------------------------


class LaunchRun(RunJob):
    end_s: float = Field(0.0, description="its end, seconds after the run started")
    cpus: list[int] = Field(default_factory=list, description="the CPUs the plan gave it")
    predicted_start_s: float | None = None
    predicted_end_s: float | None = None


class ChangeRun(BaseModel):
    model_config = ConfigDict(extra="forbid")
    at_end_of: str | None = None
    before_launch: str | None = Field(None, description="a give-back: the launch it made room for")
    job: str
    cpus: list[int] | None = Field(None, description="a give-back: the CPUs the job kept")
    at_s: float | None = Field(None, description="when it was due, seconds after the run started")
    applied: bool
    reason: str | None = Field(None, description="why it was not applied, where it was not")


class ContinuousRunReport(BaseModel):
    model_config = ConfigDict(extra="forbid")
    run_dir: str | None
    backend: Literal["real", "sim"]
    simulated: bool
    mode: Literal["continuous"] = "continuous"
    plan: ContinuousPlan
    jobs: list[LaunchRun] = Field(description="the launches in the order they started, then the excluded jobs run alone")
    changes: list[ChangeRun] = Field(default_factory=list)
    total_s: float = Field(description="first start to last end")
    max_running: int = Field(description="the most jobs that ran at once")
    timeshare_s: float | None
    timeshare_source: str | None
    throughput_vs_timeshare: float | None
    predicted_makespan_s: float | None = None
    failed: list[str] = Field(default_factory=list)


def parse_plan(doc: dict[str, Any]) -> Plan | ContinuousPlan:
    """A plan document of either mode (pydantic's ValidationError when it is not valid)."""
    if doc.get("mode") == "continuous" or "launches" in doc:
        return ContinuousPlan.model_validate(doc)
    if "mode" in doc or "mode_reason" in doc:
        return GroupsPlan.model_validate(doc)
    return Plan.model_validate(doc)


__all__ = [
    "Change",
    "ChangeRun",
    "ContinuousPlan",
    "ContinuousRunReport",
    "GroupsPlan",
    "Launch",
    "LaunchOrder",
    "LaunchRun",
    "Mode",
    "ScheduleRequest",
    "after_sets",
    "allocation_of",
    "build_continuous_plan",
    "check_launches",
    "closures",
    "parse_plan",
]


def allocation_of(job: PlanJob | Change, cpus: Sequence[int] = (), numa_nodes: Sequence[int] = (),
                  memory: str = "first-touch") -> Allocation:
    """The ``Allocation`` a plan job (or a change, with the running job's CPUs, domains and memory) stands for."""
    if isinstance(job, PlanJob):
        cpus, numa_nodes, memory = job.cpus, job.numa_nodes, job.memory
    return Allocation(cpus=tuple(cpus), numa_nodes=tuple(numa_nodes), memory=memory,  # type: ignore[arg-type]
                      l3={int(d): (a.ways, int(a.mask, 16)) for d, a in job.l3.items()},
                      mem_bw_percent={int(d): v for d, v in job.mem_bw_percent.items()})
