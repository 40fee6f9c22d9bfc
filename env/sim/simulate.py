"""Simulating a plan on the simulated node: group makespans, per-job times, the time-sharing total, a RunReport.

``simulate_plan(plan, node, seed)`` is what ``cosched run PLAN.json --backend sim`` and every evaluation call.
The plan's jobs name catalogue programs through ``profile``; an unknown name, a plan for another node, or
CPUs the node does not have are bad input (``InputError``, one message).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from functools import lru_cache

from env.errors import InputError
from env.plan.models import Plan, RunGroup, RunJob, RunReport
from env.node.spec import NodeSpec
from env.plan.builder import check_plan_for_node
from env.sim.catalogue import ALL_JOBS, catalogue
from env.sim.model import Geometry, SimJob, geometry, run_group
from env.sim.params import SimParams
from env.sim.world import World, world_for


@dataclass(frozen=True)
class SimResult:
    """What the simulated node gives for a plan (all figures simulated)."""

    makespans: list[float]  # per group, seconds
    job_times: list[dict[str, float]]  # per group: job id -> seconds from the group's start
    total_s: float  # sum of the makespans
    timeshare_s: float  # sum of the planned jobs' catalogue solo times (each alone on the whole node)

    @property
    def throughput_vs_timeshare(self) -> float:
        return self.timeshare_s / self.total_s if self.total_s > 0 else 1.0


def unknown_job_message(names: list[str], node_name: str, known: tuple[str, ...] = ALL_JOBS) -> str:
    return (f"unknown job{'s' if len(names) > 1 else ''} {', '.join(repr(n) for n in names)} for the simulated node "
            f"{node_name}: the catalogue has {', '.join(known)} (see 'cosched jobs --backend sim --node {node_name}')")


def clear_caches() -> None:
    """Forget memoised SimJobs (benchmarks measure cold runs with it)."""
    _model_job.cache_clear()


def _sim_job(g: Geometry, world: World, profile: str, cpus: list[int], memory: str, l3: dict,
             mem_bw_percent: dict[str, int]) -> SimJob:
    """A plan job as the model's SimJob (memoised: identical inputs give the identical immutable job)."""
    return _model_job(g, world, profile, tuple(cpus), memory, tuple((k, a.mask) for k, a in l3.items()),
                      tuple(mem_bw_percent.items()))


@lru_cache(maxsize=100_000)
def _model_job(g: Geometry, world: World, profile: str, cpus: tuple[int, ...], memory: str,
               l3: tuple[tuple[str, str], ...], mem_bw_percent: tuple[tuple[str, int], ...]) -> SimJob:
    masks = {}
    for k, mask in l3:
        li = g.l3_index.get(int(k))
        if li is None:
            raise InputError(f"job {profile}: L3 domain {k} does not exist on {g.name} (it has {g.l3_ids})")
        masks[li] = int(mask, 16)
    mba = {}
    for k, pct in mem_bw_percent:
        si = g.numa_index.get(int(k))
        if si is None:
            raise InputError(f"job {profile}: memory domain {k} does not exist on {g.name} (it has {g.numa_ids})")
        mba[si] = int(pct)
    return SimJob(g, world.entries[profile].params, cpus, memory, masks, mba)


def simulate_plan(plan: Plan, node: NodeSpec, seed: int | None = None, params: SimParams | None = None) -> SimResult:
    """Run ``plan`` on the simulated ``node``. Deterministic; with ``params.noise_sd > 0`` the noise comes from ``seed``.
    ``params`` default: the node's own (``env.sim.world``: a node model's, else the paper's machine)."""
    check_plan_for_node(plan, node)
    world = world_for(node)
    params = params if params is not None else world.params
    unknown = sorted({j.profile for g in plan.groups for j in g.jobs if not world.is_known(j.profile)})
    if unknown:
        raise InputError(unknown_job_message(unknown, node.name, world.all_jobs))
    g = geometry(node, params)
    rng = random.Random(seed) if params.noise_sd > 0 else None
    cat = catalogue(node, params)
    makespans: list[float] = []
    job_times: list[dict[str, float]] = []
    timeshare = 0.0
    for group in plan.groups:
        jobs = [_sim_job(g, world, j.profile, j.cpus, j.memory, j.l3, j.mem_bw_percent) for j in group.jobs]
        factors = [math.exp(rng.gauss(0.0, params.noise_sd)) for _ in jobs] if rng is not None else None
        ends = run_group(g, jobs, factors)
        makespans.append(max(ends))
        job_times.append({j.id: t for j, t in zip(group.jobs, ends)})
        timeshare += sum(cat[j.profile].solo_s for j in group.jobs)
    return SimResult(makespans=makespans, job_times=job_times, total_s=sum(makespans), timeshare_s=timeshare)


def run_report(plan: Plan, node: NodeSpec, seed: int | None = None, params: SimParams | None = None) -> RunReport:
    """The run report of a simulated run (backend "sim", simulated, no run directory)."""
    res = simulate_plan(plan, node, seed, params)
    groups = [
        RunGroup(index=grp.index, makespan_s=ms,
                 jobs=[RunJob(id=j.id, exit_code=0, wall_s=times[j.id]) for j in grp.jobs])
        for grp, ms, times in zip(plan.groups, res.makespans, res.job_times)
    ]
    return RunReport(
        run_dir=None, backend="sim", simulated=True, plan=plan, groups=groups,
        total_s=res.total_s, timeshare_s=res.timeshare_s,
        timeshare_source=f"simulated: solo times of the {world_for(node).source} on {node.name}",
        throughput_vs_timeshare=res.throughput_vs_timeshare if res.total_s > 0 else None,
        failed=[],
    )


def plan_from_actions(node: NodeSpec, schedule_action: int, groups: list[list[tuple[str, int]]],
                      max_concurrency: int = 4, policy: str = "handmade") -> Plan:
    """A plan from explicit choices: a schedule-level action and, per group, (catalogue job, job-level action).

    Job ids are the names (``name:k`` from the second use of a name on). For tests, benchmarks and anyone who
    wants to check the model plan by plan; planners go through ``env.episode.window``.
    """
    from env.plan import actions
    from env.plan.models import WindowJob
    from env.plan.builder import PlanBuilder

    sched = actions.decode(schedule_action)
    if not isinstance(sched, actions.ScheduleAction):
        raise InputError(f"action {schedule_action} is not a schedule-level action (0..5)")
    n_jobs = sum(len(g) for g in groups)
    b = PlanBuilder(node=node, schedule=sched, max_concurrency=max_concurrency, window_size=max(1, n_jobs))
    seen: dict[str, int] = {}
    for grp in groups:
        for name, a in grp:
            k = seen.get(name, 0)
            seen[name] = k + 1
            job = WindowJob(id=name if k == 0 else f"{name}:{k}", profile=name)
            if b.place(job, a) is None:
                raise InputError(f"{actions.describe(a)} for {name} does not fit in group {len(b.groups) - 1}")
        b.close_group()
    return b.build(policy)
