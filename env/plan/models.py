"""The JSON documents of docs/design/interfaces.md: window, plan, run report. The single source of their schemas.

Limits (job count, string sizes) live here too, so the command line and the HTTP service refuse the
same oversized input with the same message.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

from env.plan.actions import Affinity, MemoryPolicy
from env.errors import InputError

NAME_PATTERN = r"^[A-Za-z0-9._:-]{1,128}$"
MAX_JOBS = 1024
MAX_ARGS = 256
MAX_ARG_CHARS = 4096
MAX_ENV = 64
MAX_CONCURRENCY = 64

Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
Arg = Annotated[str, StringConstraints(max_length=MAX_ARG_CHARS)]
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]


def _no_nul(values: list[str]) -> list[str]:
    if any("\0" in v for v in values):
        raise ValueError("must not contain NUL characters")
    return values


class WindowJob(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: Name = Field(description="unique in the window; 1-128 of [A-Za-z0-9._:-]")
    profile: Name | None = Field(None, description="stored profile (or sim catalogue job); default: the id")
    command: list[Arg] | None = Field(None, max_length=MAX_ARGS, description="argv, never run through a shell")
    env: dict[EnvName, Arg] = Field(default_factory=dict, max_length=MAX_ENV)
    submit_s: float | None = Field(None, ge=0, le=1e9, allow_inf_nan=False,
                                   description="in a stream: when the job is submitted (s); absent: 0, a saturated queue")
    adapts: bool | None = Field(None, description="in a stream: the job's program loses nothing when CPUs are taken "
                                "from it while it runs (its threads sleep when they wait, or it re-reads its CPUs); "
                                "only such a job is asked to give CPUs back (docs/continuous.md, 'Giving CPUs back'). "
                                "Absent: what its profile measured ('cosched profile --adapts'), else false")
    solo_s: float | None = Field(None, gt=0, le=1e8, allow_inf_nan=False,
                                 description="the job's time alone on the whole node (s), where its user knows it "
                                 "better than its program's profile does (another input, another size): continuous "
                                 "decisions play its program scaled to it (its work and traffic; its working sets and "
                                 "character as profiled). Groups plans take profiles only and refuse it. Absent: its "
                                 "profile's")

    @field_validator("command")
    @classmethod
    def _command(cls, v: list[str] | None) -> list[str] | None:
        if v is not None:
            if not v or not v[0]:
                raise ValueError("must be a non-empty argv list whose first element names the program")
            _no_nul(v)
        return v

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        _no_nul(list(v.values()))
        return v

    @property
    def profile_name(self) -> str:
        return self.profile or self.id


class Window(BaseModel):
    model_config = ConfigDict(extra="forbid")
    jobs: list[WindowJob] = Field(min_length=1, max_length=MAX_JOBS)
    max_concurrency: int = Field(4, ge=1, le=MAX_CONCURRENCY, description="Cmax: jobs at most in one group")

    @model_validator(mode="after")
    def _unique_ids(self) -> "Window":
        seen: set[str] = set()
        dups = [j.id for j in self.jobs if j.id in seen or seen.add(j.id)]  # type: ignore[func-returns-value]
        if dups:
            raise ValueError(f"job ids must be unique; repeated: {', '.join(sorted(set(dups)))}")
        return self

    def require_commands(self) -> None:
        """The real backend runs commands: every job needs one."""
        missing = [j.id for j in self.jobs if not j.command]
        if missing:
            raise InputError(f"jobs without a command cannot run on the real backend: {', '.join(missing)} (add \"command\": [\"prog\", \"arg\", ...])")


class NodeRef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    cpus: int
    numa_nodes: int
    l3_domains: int


class ModelRef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    trained_for: str


class SchedulePolicy(BaseModel):
    model_config = ConfigDict(extra="forbid")
    affinity: Affinity = "compact"
    memory: MemoryPolicy = "first-touch"


class L3Alloc(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ways: int = Field(ge=1)
    mask: str = Field(pattern=r"^0x[0-9a-f]+$")


class PlanJob(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: Name
    profile: Name
    command: list[Arg] = Field(default_factory=list, max_length=MAX_ARGS)
    env: dict[EnvName, Arg] = Field(default_factory=dict, max_length=MAX_ENV)
    cpus: list[int] = Field(min_length=1)
    numa_nodes: list[int] = Field(min_length=1)
    memory: MemoryPolicy
    l3: dict[str, L3Alloc] = Field(description="L3 domain id (resctrl cache id) -> ways and contiguous mask")
    mem_bw_percent: dict[str, int] = Field(description="memory domain id -> percent of its bandwidth")
    mem_bw_hw: dict[str, int] | None = Field(
        None, description="the value given to the hardware per domain when its units are not percent (AMD: 1/8 GB/s)"
    )
    action: int | None = Field(None, ge=0, le=256, description="the job-level action index that chose this allocation")
    launch: list[str] = Field(description="the exact argv the batch runner executes")


class PlanGroup(BaseModel):
    model_config = ConfigDict(extra="forbid")
    index: int = Field(ge=0)
    jobs: list[PlanJob] = Field(min_length=1)
    predicted_makespan_s: float | None = Field(None, description="a prediction (simulated), when the policy has one")


class Excluded(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: Name
    profile: Name | None = None
    command: list[Arg] = Field(default_factory=list, max_length=MAX_ARGS)
    env: dict[EnvName, Arg] = Field(default_factory=dict, max_length=MAX_ENV)
    reason: str


class Enforcement(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cpus: bool
    memory: bool
    l3: bool
    mem_bw: bool
    method: Literal["resctrl", "rdtset"] | None = Field(None, description="how cache/bandwidth are enforced, when they are")
    reasons: dict[str, str] = Field(default_factory=dict, description="why each missing piece is not enforced")


#: Node-model calls the local search may make per rollout of the search's budget (the default budget 4: 320 calls; a
#: call costs about 0.04 ms cold on the reference node with the C group run, most of it finding the group's jobs and
#: placements; the memo makes repeats free). See env.planners.search.DEFAULT_BUDGET (the local search, env.planners.localsearch, spends it) for how 4 x 80 was chosen.
CALLS_PER_ROLLOUT = 80


class SearchInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    budget: int = Field(ge=1, description=f"rollouts allowed per chunk of the window, and {CALLS_PER_ROLLOUT} node-model "
                        "calls of local search per rollout (counts work, not time)")
    rollouts: int = Field(ge=0, description="rollouts done, all chunks")
    local_calls: int = Field(0, ge=0, description="node-model calls the local search made, all chunks")
    chunks: int = Field(ge=0, description="episodes the window was planned in (an MLP model's W jobs each; a set model's up to 32)")
    agent_predicted_throughput_vs_timeshare: float | None = Field(None, description="the agent's own plan (the first rollout), predicted")


class Plan(BaseModel):
    model_config = ConfigDict(extra="forbid")
    node: NodeRef
    policy: str
    model: ModelRef | None = None
    window_size: int = Field(ge=1)
    max_concurrency: int = Field(ge=1, le=MAX_CONCURRENCY)
    schedule_policy: SchedulePolicy
    groups: list[PlanGroup]
    excluded: list[Excluded] = Field(default_factory=list)
    enforcement: Enforcement
    pin_runtime: bool = Field(False, description="the launch argv loads the C pinning runtime")
    predicted_throughput_vs_timeshare: float | None = Field(None, description="a prediction (simulated), when the policy has one")
    predictions_source: str | None = Field(None, description="what made the predictions, e.g. 'simulated: sim:reference'")
    no_prediction: str | None = Field(None, description="why the plan has no predicted throughput (e.g. no node model for the real node)")
    requested_policy: str | None = Field(None, description="the policy asked for, when another made the plan (a fallback)")
    fallback_reason: str | None = Field(None, description="why the requested policy's plan was replaced (predicted below time sharing)")
    search: SearchInfo | None = Field(None, description="what agent-search did: its budget, rollouts and the agent's own plan")
    stale_model: str | None = Field(None, description="programs of the window outside what the model was trained on, "
                                    "and the one command that refreshes it (one line)")

    @model_validator(mode="after")
    def _well_formed(self) -> "Plan":
        ids = [j.id for g in self.groups for j in g.jobs] + [e.id for e in self.excluded]
        dups = sorted({i for i in ids if ids.count(i) > 1})
        if dups:
            raise ValueError(f"every job must appear exactly once; repeated: {', '.join(dups)}")
        for pos, g in enumerate(self.groups):
            if g.index != pos:
                raise ValueError(f"group indices must be 0, 1, 2, ... in order; group {pos} says {g.index}")
            if len(g.jobs) > self.max_concurrency:
                raise ValueError(f"group {g.index} has {len(g.jobs)} jobs, more than max_concurrency {self.max_concurrency}")
            taken: dict[int, str] = {}
            for j in g.jobs:
                for c in j.cpus:
                    if c in taken:
                        raise ValueError(f"group {g.index}: CPU {c} is given to both {taken[c]} and {j.id}")
                    taken[c] = j.id
        return self


class RunJob(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    exit_code: int | None = Field(description="None when the job did not end by itself (killed, timed out)")
    signal: int | None = Field(None, description="the signal that ended the job, when one did")
    wall_s: float
    start_s: float = Field(0.0, description="start, seconds after its group started")
    stdout: str | None = None
    stderr: str | None = None
    timed_out: bool = False
    observed_cpus: list[int] | None = Field(None, description="the CPUs the process was allowed, read from /proc while it ran")


class RunGroup(BaseModel):
    model_config = ConfigDict(extra="forbid")
    index: int
    makespan_s: float
    jobs: list[RunJob]
    solo_profile: bool = Field(False, description="a job without a profile, run alone on the whole node while profiled")
    predicted_makespan_s: float | None = Field(None, description="the node model's prediction of makespan_s, where it has one")


class RunReport(BaseModel):
    model_config = ConfigDict(extra="forbid")
    run_dir: str | None
    backend: Literal["real", "sim"]
    simulated: bool
    plan: Plan
    groups: list[RunGroup]
    total_s: float
    timeshare_s: float | None
    timeshare_source: str | None = Field(description="where time sharing came from: measured in this run, or predicted from profiles")
    throughput_vs_timeshare: float | None
    failed: list[str] = Field(default_factory=list)
    predictions_source: str | None = Field(None, description="what predicted the groups' makespans (a node model), or why nothing did")
