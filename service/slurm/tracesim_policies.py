"""The cluster policies of the trace simulation (``service.slurm.tracesim``): where each rank of a job goes. Every
policy runs under the same FCFS queue with EASY backfilling; they differ in how many jobs a node holds and in the
choice of nodes and CPUs.

* ``easy``: Slurm with exclusive nodes (the standard): a job's ranks take whole nodes, the lowest-numbered free ones.
* ``packing``: Slurm's node sharing (``OverSubscribe=FORCE:Cmax``, select/cons_tres, each job asking for N/Cmax CPUs a
  node, task/affinity block binding): every node is cut into Cmax slots of N/Cmax CPUs (``env.planners.streams.slots``)
  and a rank takes the lowest free slot of the lowest-numbered nodes that have one, as on one node the stream
  baseline ``packing`` does; multi-node jobs share nodes too (one slot on each of their nodes).
* ``packing-lln``: the same with Slurm's ``CR_LLN`` (least-loaded nodes first): ranks go to the nodes running the
  fewest jobs, ties to the lowest-numbered.
* ``cosched`` (``cosched:POLICY``): a job runs alone on whole idle nodes (time sharing's allocation) while the idle
  nodes left would still hold every other queued job that could start now, if its program gains from the whole node
  (it runs at least ``LONE_MIN_GAIN`` times longer on a slot, ``env.planners.streams.slot_slowdown``; the Slurm
  controller's rule too); otherwise it shares: the controller's
  node-level decision code, a stream policy of ``env.planners.streams.stream_registry`` by name
  (``greedy-continuous`` by default, slots of N/Cmax CPUs), is asked on each candidate node what it would start
  there for this job (its allocation); each candidate node is scored by the node model's instantaneous work rate
  (sum over the node's jobs of solo time / predicted time) with the job minus without it, and the job's k ranks go
  to the k best-scoring nodes (ties to the fuller node, which keeps idle nodes whole, then to the lowest-numbered).
  **Giving back** (``give_back``), only by jobs that adapt (``TraceJob.adapts``: their program loses nothing when
  CPUs are taken from it while it runs; an SWF trace never says so, so none of its jobs gives back): while the
  one-node jobs that have waited ``GIVE_BACK_WAIT_S`` or more outnumber the nodes with room, the jobs alone on whole
  nodes with the latest estimated ends keep a slot's share of their
  CPUs (N/Cmax), dealt evenly over the node's NUMA domains, and the rest of each node takes others. Dealt, not
  compact: the job's pages, first-touched while it had the whole node, lie in every domain, and dealt CPUs keep its
  threads in each as near them as before; the node model places its memory that way (first-touch over the domains
  it keeps). On a node given back, a sharing job takes N/Cmax of the free CPUs, compact as far as they allow.
  Nodes that run the same jobs on the same allocations score the same, so a score is computed once per node
  composition and program (for greedy-continuous, packing and timeshare; another policy, e.g. ``rollout``, is asked
  on every candidate node, its jobs carrying their work left). The decision's ``changes`` (new ways / caps of running
  jobs) are not applied (greedy-continuous makes none).
* ``cosched-adapting``: cosched with every job taken to adapt (a what-if): what giving back would gain if every
  program did. A real program fixed its thread count when it started; re-pinned onto fewer CPUs, an OpenMP program
  whose threads spin at barriers runs two orders of magnitude slower (``bench/giveback_cost.py``, measured), which the
  node model does not foresee.
* ``cosched-shared``: cosched without the whole-node case (every job shares, as in packing, nodes chosen as above).
"""

from __future__ import annotations

import math

import numpy as np

from env.episode.stream import StreamJob, StreamView
from env.errors import InputError
from env.plan.allocate import Allocation, assign_cpus, dealt, plain_allocation
from env.planners.streams import LONE_MIN_GAIN, slots, stream_registry
from env.sim.model import solve
from service.slurm.tracesim import BACKFILL_DEPTH, Cluster, TraceJob

#: Jobs a node holds at once in the sharing policies unless told.
DEFAULT_CMAX = 4
#: Stream policies whose decision is a function of the node's jobs and allocations (not of their work left): their
#: node scores are computed once per node composition and program.
_BY_COMPOSITION = ("greedy-continuous", "packing", "timeshare")
#: A job alone on whole nodes gives back CPUs only for one-node jobs that have waited this long (s). Chosen on the
#: design parts of docs/slurm-scale.md (RICC jobs 40,001-50,000 and 60,001-70,000, Thunder 20,001-30,000 at x1.3,
#: draw 1) among 0, 300, 600, 1200 and 3600 s, every job taken to adapt: the geometric mean of mean turnaround over
#: that of cosched with no job giving back,
#: 0.936, 0.917, 0.913, 0.918, 0.911.
GIVE_BACK_WAIT_S = 3600.0
#: Cached node scores kept before the cache starts afresh (bounds memory on long traces).
_CACHE_MAX = 200_000


class Exclusive:
    """``easy``: whole nodes, lowest-numbered first."""

    name = "easy"
    cmax = 1

    def reset(self, cluster: Cluster) -> None:
        self.whole = plain_allocation(cluster.node, cluster.node.cpus)

    def place(self, cluster: Cluster, job: TraceJob, candidates: list[int]) -> list[tuple[int, Allocation]] | None:
        if len(candidates) < job.nodes:
            return None
        return [(n, self.whole) for n in candidates[:job.nodes]]


class Packing:
    """``packing``: Cmax slots a node, the lowest free slot on the lowest-numbered nodes (``lln``: least loaded)."""

    def __init__(self, cmax: int = DEFAULT_CMAX, lln: bool = False) -> None:
        self.cmax, self.lln = cmax, lln
        self.name = "packing-lln" if lln else "packing"

    def reset(self, cluster: Cluster) -> None:
        self.slots = [plain_allocation(cluster.node, s) for s in slots(cluster.node, self.cmax)]

    def place(self, cluster: Cluster, job: TraceJob, candidates: list[int]) -> list[tuple[int, Allocation]] | None:
        if len(candidates) < job.nodes:
            return None
        if self.lln:
            candidates = sorted(candidates, key=lambda n: (int(cluster.count[n]), n))
        out = []
        for n in candidates[:job.nodes]:
            free = cluster.sims[n].free_cpus()
            out.append((n, next(a for a in self.slots if set(a.cpus) <= free)))
        return out


class Cosched:
    """``cosched:POLICY``: alone on whole nodes while nobody else waits, if its program gains from them; else the
    node-level stream policy's allocation (slots of N/Cmax CPUs) on the nodes where the node model gains most
    (``shared``: always the latter); a lone job that adapts gives back CPUs to jobs that have waited (``adapting``:
    every job taken to adapt)."""

    def __init__(self, stream_policy: str = "greedy-continuous", cmax: int = DEFAULT_CMAX, shared: bool = False,
                 adapting: bool = False) -> None:
        self.policy = stream_registry().get(stream_policy)  # one line naming the choices if unknown
        self.cmax, self.shared, self.adapting = cmax, shared, adapting and not shared
        self.memo = stream_policy in _BY_COMPOSITION  # its decision depends on the node's jobs and allocations only
        base = "cosched-shared" if shared else "cosched-adapting" if adapting else "cosched"
        self.name = base if stream_policy == "greedy-continuous" else f"{base}:{stream_policy}"
        self.decide_calls = 0

    def reset(self, cluster: Cluster) -> None:
        self.jobs = {p: StreamJob(p, p, e.params, cluster.solo[p]) for p, e in cluster.entries.items()}
        self.policy.reset(cluster.node, list(self.jobs.values()), self.cmax)
        self.cache: dict[tuple, tuple[float, Allocation | None]] = {}
        self.whole = plain_allocation(cluster.node, cluster.node.cpus)
        self.slot = len(cluster.node.cpus) // self.cmax
        self.slots = slots(cluster.node, self.cmax)
        self.kept = plain_allocation(cluster.node, dealt(cluster.node, cluster.node.cpus, self.slot))
        self.placed_adapting = False  # a job that adapts was placed: only then can a lone job give back

    def give_back(self, cluster: Cluster, queue: list[TraceJob]) -> list[tuple[str, Allocation]]:
        """The lone jobs that keep a slot's share of their CPUs now (the rule in the module's docstring), latest
        estimated end first."""
        alone = self._alone(cluster)
        if alone is None:
            return []
        need = sum(1 for j in _one_node(queue) if cluster.now - j.submit_s >= GIVE_BACK_WAIT_S)
        free = len(cluster.free_nodes())
        if need <= free:
            return []
        ids = {next(iter(cluster.sims[n].running)) for n in np.flatnonzero(alone)}
        lone = [r for r in map(cluster.running.__getitem__, ids) if all(alone[n] for n in r.ranks)]
        out = []
        for r in sorted(lone, key=lambda r: (-r.est_end, r.job.id)):
            if free >= need:
                break
            out.append((r.job.id, self.kept))
            free += len(r.ranks)
        return out

    def wake(self, cluster: Cluster, queue: list[TraceJob]) -> float:
        """When the next one-node job reaches its wait, so that giving back does not wait for an end or an arrival."""
        if self._alone(cluster) is None:
            return math.inf  # nothing would give back
        due = (j.submit_s + GIVE_BACK_WAIT_S for j in _one_node(queue))
        return min((t for t in due if t > cluster.now + 1e-6), default=math.inf)

    def _alone(self, cluster: Cluster):  # noqa: ANN202 - a boolean array or None
        """Which nodes one job that adapts holds whole (each could give back), or None when none does."""
        if self.shared or self.cmax < 2 or not (self.adapting or self.placed_adapting):
            return None  # on an SWF trace no job adapts: nothing to look at on every pass
        alone = (cluster.count == 1) & (cluster.idle_cpus == 0)
        if not self.adapting and alone.any():
            adapts = {jid for jid, r in cluster.running.items() if r.job.adapts}
            if not adapts:
                return None
            for n in np.flatnonzero(alone):
                alone[n] = next(iter(cluster.sims[n].running)) in adapts
        return alone if alone.any() else None

    def place(self, cluster: Cluster, job: TraceJob, candidates: list[int]) -> list[tuple[int, Allocation]] | None:
        if len(candidates) < job.nodes:
            return None
        self.placed_adapting |= job.adapts
        if not self.shared and cluster.scale(job.program) >= LONE_MIN_GAIN:
            # nobody else needs the idle nodes, and the job gains from them: alone on whole nodes (time sharing's)
            idle = [n for n in candidates if cluster.count[n] == 0]
            if len(idle) - job.nodes >= cluster.waiting_nodes:
                return [(n, self.whole) for n in idle[:job.nodes]]
        groups: dict[tuple, list[int]] = {}
        for n in candidates:
            groups.setdefault(cluster.sig[n] if self.memo else (n,), []).append(n)
        scored = []
        for sig, nodes in groups.items():
            key = (sig, job.program)
            hit = self.cache.get(key) if self.memo else None
            if hit is None:
                if len(self.cache) >= _CACHE_MAX:
                    self.cache.clear()
                hit = self.cache[key] = self._score(cluster, nodes[0], job)
            if hit[1] is not None:  # ties: the fuller node (keeps idle nodes whole), then the lowest-numbered
                scored.append((-round(hit[0], 9), -int(cluster.count[nodes[0]]), nodes[0], nodes, hit[1]))
        scored.sort(key=lambda s: s[:3])
        out: list[tuple[int, Allocation]] = []
        for *_, nodes, alloc in scored:
            for n in nodes:
                out.append((n, alloc))
                if len(out) == job.nodes:
                    return out
        return None

    def _score(self, cluster: Cluster, n: int, job: TraceJob) -> tuple[float, Allocation | None]:
        """What the stream policy starts for ``job`` on node ``n``, and the node's work rate gained by it."""
        sim = cluster.sims[n]
        sj = self.jobs[job.program]
        self.decide_calls += 1
        cluster.sync_left(n)
        d = self.policy.decide(StreamView(sim, [sj], self.cmax, 0))
        allocs = [a for jid, a in d.starts if jid == sj.id]
        free = sim.free_cpus()
        if not allocs and len(sim.running) < self.cmax and not any(set(c) <= free for c in self.slots):
            # a node given back: room for a job, but its free CPUs are no slot
            cpus = assign_cpus(cluster.node, self.slot, "compact", set(cluster.node.cpus) - free)
            allocs = [plain_allocation(cluster.node, cpus)] if cpus else []
        if not allocs:
            return 0.0, None
        running = [(r.sim, cluster.solo[r.name]) for r in sim.running.values()]
        before = _work_rate(sim.g, running)
        after = _work_rate(sim.g, running + [(sim.sim_job(sj.params, allocs[0]), sj.solo_s)])
        return after - before, allocs[0]


def _one_node(queue: list[TraceJob]) -> list[TraceJob]:
    """The one-node jobs among those a scheduling pass looks at: the ones giving back serves."""
    return [j for j in queue[:BACKFILL_DEPTH] if j.nodes == 1]


def _work_rate(g, jobs: list) -> float:
    """Solo-seconds of work done per second on the node (greedy-continuous's instantaneous work rate)."""
    if not jobs:
        return 0.0
    return sum(solo / t for (_, solo), t in zip(jobs, solve(g, [j for j, _ in jobs])))


#: The cluster policies by name (``cosched:POLICY`` for another stream policy).
TRACE_POLICIES = ("easy", "packing", "packing-lln", "cosched", "cosched-adapting", "cosched-shared")


def trace_policy(name: str, cmax: int = DEFAULT_CMAX):
    """The cluster policy called ``name``, one line naming the choices when it is unknown."""
    if cmax < 1:
        raise InputError("--cmax must be at least 1")
    if name == "easy":
        return Exclusive()
    if name in ("packing", "packing-lln"):
        return Packing(cmax, lln=name == "packing-lln")
    base, _, stream = name.partition(":")
    if base in ("cosched", "cosched-adapting", "cosched-shared"):
        return Cosched(stream or "greedy-continuous", cmax, shared=base == "cosched-shared",
                       adapting=base == "cosched-adapting")
    raise InputError(f"unknown trace policy {name!r}: choose from {', '.join(TRACE_POLICIES)} or cosched:STREAM-POLICY")


__all__ = ["DEFAULT_CMAX", "GIVE_BACK_WAIT_S", "TRACE_POLICIES", "Cosched", "Exclusive", "Packing", "trace_policy"]
