"""Simulated profiles: the twelve perf counters of each catalogue job's solo run, consistent with its character.

Everything derives from the model's own solo run (``CatalogueJob``) and the entry's parameters, so the agent
sees on the simulated node the same *kind* of features a real node gives:

================================  ==========================================================================
counter                           simulated as
================================  ==========================================================================
duration_time (ns)                the model's solo time on the whole node
task-clock (ms)                   CPU-seconds: Amdahl time shares (serial part on 1 CPU, parallel on all);
                                  stalled cores count as busy, as perf counts them
cpu-cycles                        task-clock x the base clock
instructions                      single-core compute seconds x clock x the entry's IPC (the same work
                                  whatever the core count, so memory stalls show as a lower measured IPC)
context-switches                  CPU-seconds x the entry's rate
page-faults                       footprint / 4 KiB (first touch of every page)
branch-misses, L1-icache-misses   instructions x the entry's misses per kilo-instruction
LLC-load-misses                   the solo run's memory traffic (the model's V) / 64 B x 0.7 (reads)
L1-dcache-load-misses             3 x LLC misses + instructions x (2 + 10 x irregular) / 1000
dTLB-load-misses                  instructions x (0.2 + 4 x irregular) / 1000
iTLB-load-misses                  instructions x L1-I MPKI x 0.02 / 1000
================================  ==========================================================================

The one-core run gives ``one_core_s`` and ``scale_factor`` (model, one CPU).
"""

from __future__ import annotations

from datetime import datetime, timezone

from env.node.discover import node_id
from env.node.spec import NodeSpec
from env.sim.catalogue import CatalogueJob, catalogue
from env.sim.params import DEFAULT_PARAMS, SimParams
from env.sim.synthetic import WithGenerated
from profiler.models import Profile

#: Simulated profiles carry a fixed date so that they (and everything fitted on them) are reproducible.
SIM_PROFILE_DATE = datetime(2026, 1, 1, tzinfo=timezone.utc)
READ_SHARE = 0.7


def simulated_profile(node: NodeSpec, job: CatalogueJob, sp: SimParams = DEFAULT_PARAMS) -> Profile:
    """The job's profile on the simulated node: a node model's measured one when it has it, else simulated."""
    from env.sim.world import world_for

    measured = world_for(node).profiles.get(job.name)
    return measured if measured is not None else model_profile(node, job, sp)


def model_profile(node: NodeSpec, job: CatalogueJob, sp: SimParams = DEFAULT_PARAMS) -> Profile:
    """The profile the model's parameters give (the counters' table above)."""
    e, p = job.entry, job.entry.params
    n = len(node.cpus)
    serial = (1.0 - p.parallel) / ((1.0 - p.parallel) + p.parallel / n)
    cpus_busy = serial + (1.0 - serial) * n
    cpu_s = job.solo_s * cpus_busy
    clock = sp.clock_ghz * 1e9
    instructions = p.work_s * clock * e.ipc
    llc = job.traffic_gb * 1e9 / 64.0 * READ_SHARE
    counters = {
        "duration_time": job.solo_s * 1e9,
        "task-clock": cpu_s * 1e3,
        "context-switches": round(cpu_s * e.cs_per_cpu_s),
        "cpu-cycles": cpu_s * clock,
        "instructions": instructions,
        "page-faults": round(e.footprint_gb * 2**30 / 4096),
        "branch-misses": instructions * e.branch_mpki / 1000.0,
        "L1-dcache-load-misses": 3.0 * llc + instructions * (2.0 + 10.0 * p.irregular) / 1000.0,
        "L1-icache-load-misses": instructions * e.l1i_mpki / 1000.0,
        "LLC-load-misses": llc,
        "dTLB-load-misses": instructions * (0.2 + 4.0 * p.irregular) / 1000.0,
        "iTLB-load-misses": instructions * e.l1i_mpki * 0.02 / 1000.0,
    }
    return Profile(
        name=p.name,
        node_id=node_id(node),
        command=[f"sim/{p.name}"],
        counters=counters,
        wall_s=job.solo_s,
        peak_rss_kb=round(e.footprint_gb * 2**20),
        scale_factor=job.scale_factor,
        one_core_s=job.one_core_s,
        simulated=True,
        created_at=SIM_PROFILE_DATE,
    )


class _Profiles(WithGenerated):
    """The catalogue programs' profiles; a generated job's (``env.sim.synthetic``) is made on first use."""

    def __init__(self, node: NodeSpec, sp: SimParams) -> None:
        from env.sim.world import world_for

        cat = catalogue(node, sp)
        super().__init__((name, simulated_profile(node, cat[name], sp)) for name in world_for(node).all_jobs)
        self._node, self._sp = node, sp

    def _make(self, name: str) -> Profile:
        return simulated_profile(self._node, catalogue(self._node, self._sp)[name], self._sp)


def simulated_profiles(node: NodeSpec, sp: SimParams | None = None) -> dict[str, Profile]:
    """Every catalogue program's profile on ``node``; ``get``/``[]`` also resolve generated jobs' names."""
    from env.sim.world import world_for

    return _Profiles(node, sp if sp is not None else world_for(node).params)
