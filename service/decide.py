"""The one place that decides at an event: a node's state in, the decision and its predicted effect out.

Three callers share it: ``POST /decide`` (``service.api.routers.decide``), the online runner of ``cosched run
WINDOW.json --mode continuous`` (``service.commands.run_online``: the command line's entry, ``env.real.online`` runs the jobs)
and the Slurm controller, in process, through ``decide_state``.

* **State**: the running jobs (id, profile, allocation, seconds run), the queue head (id, profile, submit_s), Cmax,
  optionally the policy (default ``rollout``, ``env.planners.streams.DEFAULT_CONTINUOUS_POLICY``), the window W and
  the caller's clock ``now_s``. Every check names what is wrong and how to fix it in one line (``DecideError``:
  HTTP 422): a profile the node model does not know, a CPU held twice or not on the node, more jobs running than
  Cmax, negative seconds, an L3 domain or NUMA domain the node lacks.
* **The node model**: a simulated node is its own model (figures *simulated*); the real node uses the node model
  ``cosched calibrate`` fitted on it (figures labelled *model*). Without one, only ``packing`` and ``timeshare``
  decide (they look only at which CPUs are held), and nothing is predicted.
* **Running jobs in the model** (``StreamNode.from_running``): each job's work left is estimated from the model's
  rate at its current allocation under the current contention; what ran beside it earlier is not known.
* **Predicted effect**: the decision applied, the known jobs (running and queued, never jobs not yet submitted)
  played forward to their ends on the node model, the rest decided by the policy itself, or by ``fill`` (rollout's
  base, what its own rollouts assume) for the search policies: each job's predicted start and end and the known
  jobs' makespan (first start or submit to last end).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from env.episode.stream import (
    DEFAULT_STREAM_WINDOW,
    Decision,
    StreamJob,
    StreamView,
    check_decision,
)
from env.errors import InputError, RunError
from env.node.spec import NodeSpec
from env.plan.actions import MemoryPolicy
from env.plan.allocate import Allocation, plain_allocation
from env.plan.models import MAX_CONCURRENCY, MAX_JOBS, L3Alloc, Name
from env.real.online import HeldCpus, stream_model

#: Policies that decide from which CPUs are held alone (no node model needed).
MODEL_FREE = ("packing", "timeshare")
#: The stream policies that decide online (``groups`` plans windows with barriers; ``best-found`` is offline).
ONLINE_POLICIES = ("rollout", "greedy-continuous", "packing", "timeshare", "agent", "agent-search")
#: Policies cheap enough to play the known jobs forward themselves; the others are predicted by ``fill``.
SELF_PREDICTED = ("packing", "timeshare", "greedy-continuous")


class DecideError(InputError):
    """Bad state: ``field`` and one line saying what is wrong and how to fix it."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field, self.reason = field, reason


class DecideAllocation(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cpus: list[int] = Field(min_length=1, max_length=4096, description="the CPUs the job holds")
    memory: MemoryPolicy = "first-touch"
    numa_nodes: list[int] | None = Field(None, description="its memory domains (in answers; derived from the CPUs)")
    l3: dict[str, L3Alloc] | None = Field(None, description="L3 domain id -> ways and mask; absent: every way")
    mem_bw_percent: dict[str, int] | None = Field(None, description="NUMA id -> bandwidth cap (1-100); absent: none")


SOLO_HELP = ("its time alone on the whole node where the caller knows it better than its program's profile (from the "
             "program's jobs that ended on this node, say): the node model's program scaled to it (its work and "
             "traffic; its character stays). Absent: its profile's")


def _solo(v: float | None) -> float | None:
    if v is not None and not 0 < v <= 1e9:
        raise ValueError(f"{v} is not a time alone: send the job's seconds alone on the whole node (above 0, at most "
                         "1e9), or leave solo_s out for its profile's")
    return v


SoloS = Annotated[float | None, AfterValidator(_solo)]


class RunningIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: Name
    profile: Name | None = Field(None, description="its program (a profile or catalogue job); default: the id")
    allocation: DecideAllocation
    seconds_run: float = Field(allow_inf_nan=False, description="seconds it has run so far")
    solo_s: SoloS = Field(None, allow_inf_nan=False, description=SOLO_HELP)
    adapts: bool | None = Field(None, description="its program loses nothing when CPUs are taken from it while it "
                                "runs; only such a job may be asked to give CPUs back (rollout-giveback). The caller "
                                "then re-pins every thread of it onto the CPUs the change keeps before it starts "
                                "anything on the others. Absent: what its profile measured (cosched profile --adapts)")

    @field_validator("seconds_run")
    @classmethod
    def _not_negative(cls, v: float) -> float:
        if v < 0:
            raise ValueError(f"{v} is negative: send the seconds the job has run so far (0 or more)")
        return v


class QueuedIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: Name
    profile: Name | None = None
    submit_s: float = Field(0.0, ge=0, le=1e9, allow_inf_nan=False, description="when it was submitted (caller's clock)")
    solo_s: SoloS = Field(None, allow_inf_nan=False, description=SOLO_HELP)


class DecideRequest(BaseModel):
    """The node's state at an event (``POST /decide``'s body)."""

    model_config = ConfigDict(extra="forbid")
    running: list[RunningIn] = Field(default_factory=list, max_length=MAX_CONCURRENCY)
    queue: list[QueuedIn] = Field(default_factory=list, max_length=MAX_JOBS, description="arrived jobs, queue order")
    max_concurrency: int = Field(ge=1, le=MAX_CONCURRENCY, description="Cmax: jobs at most at once")
    policy: str | None = Field(None, max_length=64, description="a stream policy (rollout, greedy-continuous, packing, timeshare, agent, agent-search, rollout-giveback); default rollout")
    window: int | None = Field(None, ge=1, le=MAX_JOBS, description="W: queued jobs the policy chooses among")
    now_s: float | None = Field(None, ge=0, le=1e9, allow_inf_nan=False,
                                description="the caller's clock now; default the latest submit_s of the queue (or 0)")
    predict: bool = Field(True, description="false: the decision only (no play-forward: the Slurm controller's fast path)")


class DecidedJob(BaseModel):
    id: str
    profile: str
    allocation: DecideAllocation
    solo_s: float | None = Field(None, description="its time alone on the whole node as the decision took it (the "
                                 "caller's solo_s, else its profile's); null where neither says")


class PredictedJob(BaseModel):
    id: str
    state: Literal["running", "started", "queued"]
    start_s: float | None
    end_s: float | None


class Prediction(BaseModel):
    kind: Literal["simulated", "model"] = Field(description="simulated node, or a node model's prediction of this node")
    source: str
    decided_by: str = Field(description="the policy that decides the known jobs after this event in the prediction")
    jobs: list[PredictedJob]
    makespan_s: float | None = Field(description="the known jobs: first start or submit to last end")


class DecideResponse(BaseModel):
    node: str
    policy: str
    now_s: float
    starts: list[DecidedJob]
    changes: list[DecidedJob]
    predicted: Prediction | None
    no_prediction: str | None = None
    not_enforced: dict[str, str] = Field(default_factory=dict, description="what this node cannot enforce, and why")
    note: str | None = Field(None, description="why the policy departed from its rule (e.g. a fallback to packing)")


class Decider:
    """A stream policy deciding from a node's state. ``reset`` with every job it may see (their programs' solo
    times), then ``decide`` at each event; one object keeps the policy's own state between events (the online
    runner), a fresh one per request is stateless (``/decide``). ``give_back``: the caller carries out a change that
    takes CPUs from a running job (the online runner re-pins it), so ``rollout-giveback`` may be chosen."""

    def __init__(self, node: NodeSpec, policy: str | None = None, window: int | None = None,
                 model: str | Path | None = None, give_back: bool = False) -> None:
        from env.planners.streams import DEFAULT_CONTINUOUS_POLICY, stream_registry
        from training.stream.policy import stream_agents

        self.node, self.window = node, window or DEFAULT_STREAM_WINDOW
        self.name = policy or DEFAULT_CONTINUOUS_POLICY
        here = ONLINE_POLICIES + (("rollout-giveback",) if give_back else ())
        if self.name not in here:
            raise DecideError("policy", f"{self.name!r} does not decide at events here: choose {', '.join(here)}")
        if model is not None and self.name not in ("agent", "agent-search"):
            raise DecideError("model", f"a stream model is for the agent policies, not {self.name}: drop the model or "
                                       "choose agent or agent-search")
        registry = stream_registry(window=self.window, give_back=give_back)
        if self.name in ("agent", "agent-search"):  # the node's shipped stream model, or the one given
            registry = registry.extended(*stream_agents(node, model, self.window))
        try:
            self.policy = registry.get(self.name)
        except InputError as exc:
            raise DecideError("policy", str(exc)) from None
        self.model_file = str(model) if model is not None else None
        self.model = stream_model(node)
        if self.model is None and self.name not in MODEL_FREE:
            raise DecideError("policy", f"{self.name} decides on a node model and node {node.name} has none: run "
                                        "'cosched calibrate', or choose packing or timeshare")
        self.dnode = self.model.node if self.model is not None else node
        self._profiles: dict[str, Any] = {}

    def stream_job(self, id: str, profile: str, submit_s: float = 0.0, field: str = "job",
                   adapts: bool | None = None, solo_s: float | None = None) -> StreamJob:
        """A job as the policy sees it (its program's params and solo time from the node model, scaled to
        ``solo_s`` where the caller gives its time alone); ``adapts``: as the caller says, else as its profile on
        this node measured (``cosched profile --adapts``), else False."""
        if adapts is None:
            adapts = self._profile_adapts(profile)
        if self.model is None:
            solo = solo_s if solo_s is not None else self._profile_solo(profile)
            return StreamJob(id, profile, None, solo, submit_s, adapts)  # type: ignore[arg-type]
        from env.episode.stream import program_for
        from env.sim.world import world_for

        if not world_for(self.dnode).is_known(profile):
            how = "GET /profiles, 'cosched profile'" if self.model.kind == "model" else "'cosched jobs --backend sim'"
            raise DecideError(f"{field}.profile", f"node {self.node.name} does not know program {profile!r}: send a "
                                                  f"profile its node model has ({how})")
        return StreamJob(id, profile, *program_for(self.dnode, profile, solo_s), submit_s, adapts)

    def _profile_adapts(self, profile: str) -> bool:
        return profile_adapts(self.node, profile, self._profile)

    def _profile_solo(self, profile: str) -> float:
        prof = self._profile(profile)
        return prof.duration_s if prof is not None else math.nan

    def _profile(self, profile: str):  # noqa: ANN202 - a Profile or None
        """The program's stored profile on this node (read once per Decider)."""
        if profile not in self._profiles:
            from env.node.discover import node_id
            from profiler.store import ProfileStore

            self._profiles[profile] = ProfileStore().get(profile, node_id(self.node))
        return self._profiles[profile]

    def reset(self, jobs: Sequence[StreamJob], max_concurrency: int) -> None:
        self.cmax, self.adapts = max_concurrency, {j.id for j in jobs if j.adapts}
        try:
            self.policy.reset(self.dnode, jobs, max_concurrency)
        except ValueError as exc:  # packing's slots: Cmax above the node's CPUs
            raise DecideError("max_concurrency", f"{exc}: give at most one job per CPU") from None

    def view(self, running: Sequence[tuple[StreamJob, Allocation, float]], queue: list[StreamJob], now: float,
             pending: int = 0) -> StreamView:
        """The state as a policy sees it (running: each job, its allocation and seconds run)."""
        if self.model is None:
            return StreamView(HeldCpus(self.node, now, {j.id: a for j, a, _ in running}), queue, self.cmax, pending)  # type: ignore[arg-type]
        from env.sim.stream import StreamNode
        from env.sim.world import world_for

        sim = StreamNode.from_running(self.dnode, world_for(self.dnode).params,
                                      [(j.id, j.name, j.params, a, ran) for j, a, ran in running], now=now)
        return StreamView(sim, queue, self.cmax, pending)

    def decide(self, view: StreamView) -> Decision:
        d = self.policy.decide(view)
        try:
            check_decision(view, d, self.adapts)
        except ValueError as exc:
            raise RunError(f"policy {self.name} made a decision it may not: {exc}") from None
        return d

    def predict(self, view: StreamView, d: Decision, jobs: Sequence[StreamJob]) -> Prediction | None:
        """The decision applied and the known jobs played forward to their ends on the node model."""
        if self.model is None:
            return None
        from env.planners.continuous import Fill
        from env.planners.streams import stream_registry

        mine = self.name in SELF_PREDICTED
        pol = stream_registry(window=self.window).get(self.name) if mine else Fill(self.window)
        pol.reset(self.dnode, jobs, self.cmax)
        by_id = {j.id: j for j in jobs}
        sim, starts = view.sim.fork(), {k: r.start_s for k, r in view.running.items()}
        queue, d0 = list(view.queue), d
        while True:
            for jid, a in d.changes:
                sim.apply(jid, a)
            for jid, a in d.starts:
                sim.start(jid, by_id[jid].name, by_id[jid].params, a)
                starts[jid] = sim.now
            queue = [j for j in queue if j.id not in starts]
            if not sim.running:
                break  # nothing left, or the policy waits for nothing: the rest stays unpredicted
            sim.advance()
            v = StreamView(sim, queue, self.cmax, 0)
            d = pol.decide(v)
            check_decision(v, d)
        state = {**{k: "running" for k in view.running}, **{k: "started" for k, _ in d0.starts}}
        out = [PredictedJob(id=j.id, state=state.get(j.id, "queued"), start_s=starts.get(j.id), end_s=sim.ended.get(j.id))
               for j in jobs]
        first = min([p.start_s for p in out if p.state == "running"] + [j.submit_s for j in view.queue], default=view.now)
        ends = [p.end_s for p in out]
        last = max(ends) if ends and None not in ends else None  # type: ignore[type-var]
        return Prediction(kind=self.model.kind, source=self.model.source, decided_by=pol.name, jobs=out,
                          makespan_s=round(last - first, 6) if last is not None else None)


def profile_solo_s(node: NodeSpec, profile: str) -> float | None:
    """``profile``'s time alone on the whole node as the node's model has it from its profile, what a ``solo_s``
    replaces (None: no node model, or a program it does not know)."""
    model = stream_model(node)
    if model is None:
        return None
    from env.episode.stream import program_for
    from env.sim.world import world_for

    return program_for(model.node, profile)[1] if world_for(model.node).is_known(profile) else None


def profile_adapts(node: NodeSpec, profile: str, stored: Any = None) -> bool:
    """Whether ``profile``'s program adapts to CPUs taken from it while it runs, as ``cosched profile --adapts``
    measured it on this node (``stored``: profile name -> its stored profile or None); False where nothing was
    measured, and on a simulated node (its catalogue says nothing of it)."""
    if node.simulated:
        return False
    if stored is None:
        from env.node.discover import node_id
        from profiler.store import ProfileStore

        prof = ProfileStore().get(profile, node_id(node))
    else:
        prof = stored(profile)
    return bool(prof is not None and prof.adapts)


def allocation_in(node: NodeSpec, a: DecideAllocation, field: str) -> Allocation:
    """A caller's allocation on ``node`` (one line naming what the node lacks)."""
    cpus = tuple(sorted(a.cpus))
    bad = sorted(set(cpus) - set(node.cpus))
    if bad:
        raise DecideError(f"{field}.cpus", f"CPUs {bad} are not on node {node.name} (it has {_span(node.cpus)}): "
                                           "send the CPU ids the job holds on this node")
    if len(set(cpus)) != len(cpus):
        raise DecideError(f"{field}.cpus", "a CPU is listed twice: list each CPU the job holds once")
    base = plain_allocation(node, cpus, a.memory)
    l3, bw = dict(base.l3), dict(base.mem_bw_percent)
    ways = {d.id: d.ways for d in node.l3}
    for key, v in (a.l3 or {}).items():
        d = int(key) if key.isascii() and key.isdigit() else -1
        mask = int(v.mask, 16)
        if d not in l3:
            raise DecideError(f"{field}.l3", f"L3 domain {key} holds none of the job's CPUs on node {node.name} "
                                             f"(its CPUs are in {sorted(l3)}): give ways for those domains")
        if mask.bit_count() != v.ways or mask >= 1 << ways[d]:
            raise DecideError(f"{field}.l3.{key}", f"mask {v.mask} is not {v.ways} of the domain's {ways[d]} ways: "
                                                   "send a mask with one bit per way")
        l3[d] = (v.ways, mask)
    for key, pct in (a.mem_bw_percent or {}).items():
        d = int(key) if key.isascii() and key.isdigit() else -1
        if d not in bw:
            raise DecideError(f"{field}.mem_bw_percent", f"NUMA domain {key} holds none of the job's CPUs (they are "
                                                         f"in {sorted(bw)}): cap those domains")
        if not 1 <= pct <= 100:
            raise DecideError(f"{field}.mem_bw_percent.{key}", f"{pct} is not a percent from 1 to 100")
        bw[d] = pct
    return Allocation(cpus, base.numa_nodes, a.memory, l3, bw)


def allocation_out(a: Allocation) -> DecideAllocation:
    return DecideAllocation(cpus=list(a.cpus), memory=a.memory, numa_nodes=list(a.numa_nodes),
                            l3={str(d): L3Alloc(ways=w, mask=f"{m:#05x}") for d, (w, m) in a.l3.items()},
                            mem_bw_percent={str(d): p for d, p in a.mem_bw_percent.items()})


def _span(cpus: Sequence[int]) -> str:
    from env.node.cpulist import format_cpulist

    return format_cpulist(list(cpus))


def decide_state(node: NodeSpec, request: DecideRequest | dict[str, Any]) -> DecideResponse:
    """The decision at one event for ``node`` (a ``NodeSpec``: ``env.sim.nodes.load_node("local")`` or
    ``"sim:NAME"``) from ``request``, a ``DecideRequest`` or the same dict as ``POST /decide``'s body::

        {"running": [{"id": "a", "profile": "MG", "seconds_run": 12.0,
                      "allocation": {"cpus": [0, 1, 2], "memory": "first-touch"}}],
         "queue": [{"id": "b", "profile": "EP", "submit_s": 3.0}], "max_concurrency": 4}

    Returns a ``DecideResponse`` (``starts`` and ``changes`` with allocations, ``predicted``); raises
    ``DecideError`` (an ``InputError``: ``field`` and one line) on bad state. The Slurm controller calls it in
    process with its node's state at each event; the HTTP route answers the same document."""
    from pydantic import ValidationError

    from service.output import describe_validation_error

    if not isinstance(request, DecideRequest):
        try:
            request = DecideRequest.model_validate(request)
        except ValidationError as exc:
            raise InputError(f"bad state: {describe_validation_error(exc)}") from None
    req = request
    if len(req.running) > req.max_concurrency:
        raise DecideError("running", f"{len(req.running)} jobs run, above max_concurrency {req.max_concurrency}: "
                                     "send the jobs running now and the node's Cmax")
    decider = Decider(node, req.policy, req.window, give_back=True)  # the caller re-pins a job that adapts
    seen: dict[str, str] = {}
    held: dict[int, str] = {}
    running: list[tuple[StreamJob, Allocation, float]] = []
    now = req.now_s if req.now_s is not None else max((q.submit_s for q in req.queue), default=0.0)
    for i, r in enumerate(req.running):
        where = f"running[{i}]"
        _unique(seen, r.id, where)
        alloc = allocation_in(decider.dnode, r.allocation, f"{where}.allocation")
        for c in alloc.cpus:
            if c in held:
                raise DecideError(f"{where}.allocation.cpus", f"CPU {c} is also held by {held[c]}: a CPU runs one "
                                                              "job at a time; send each job's own CPUs")
            held[c] = f"{where} ({r.id!r})"
        running.append((decider.stream_job(r.id, r.profile or r.id, 0.0, where, r.adapts, r.solo_s), alloc,
                        r.seconds_run))
    queue = []
    for i, q in enumerate(req.queue):
        _unique(seen, q.id, f"queue[{i}]")
        if q.submit_s > now:
            raise DecideError(f"queue[{i}].submit_s", f"{q.submit_s} is after now_s {now}: queue only the jobs "
                                                      "submitted by now")
        queue.append(decider.stream_job(q.id, q.profile or q.id, q.submit_s, f"queue[{i}]", solo_s=q.solo_s))
    known = [j for j, _, _ in running] + queue
    decider.reset(known, req.max_concurrency)
    view = decider.view(running, queue, now)
    d = decider.decide(view)
    names = {j.id: j.name for j in known}
    solos = {j.id: j.solo_s if math.isfinite(j.solo_s) else None for j in known}
    pred = decider.predict(view, d, known) if req.predict else None
    from env.plan.launch import enforcement

    return DecideResponse(
        node=node.name, policy=decider.name, now_s=now,
        starts=[DecidedJob(id=k, profile=names[k], allocation=allocation_out(a), solo_s=solos[k]) for k, a in d.starts],
        changes=[DecidedJob(id=k, profile=names[k], allocation=allocation_out(a), solo_s=solos[k])
                 for k, a in d.changes],
        predicted=pred,
        no_prediction=None if pred is not None else "not asked for (predict: false)" if not req.predict else
        f"no node model for node {node.name}: run 'cosched calibrate'",
        not_enforced={} if node.simulated else enforcement(node).reasons, note=d.note or None)


def _unique(seen: dict[str, str], jid: str, where: str) -> None:
    if jid in seen:
        raise DecideError(f"{where}.id", f"{jid!r} is also {seen[jid]}: each job appears once, running or queued")
    seen[jid] = where
