"""The stream baselines (decided at every event, ``env.episode.stream``); ``packing`` is the bar to beat.

* ``timeshare``: each job alone on the whole node, first come first served.
* ``packing``: what Slurm's node sharing gives (select/cons_tres, task/affinity block binding, each job asking for
  N/Cmax CPUs): the node's CPUs, listed NUMA domain by domain, cut into Cmax slots of floor(N/Cmax) consecutive CPUs;
  first come first served, a job starts in the lowest free slot as soon as one is free and it has arrived;
  first-touch memory, every way, no bandwidth cap, nothing re-partitioned.
* ``greedy-continuous``: packing's slots, but at each event, for each free slot in turn, the job among the first W
  queued that maximises the node model's instantaneous work rate (the sum over the running jobs of solo time x
  progress per second) is started there. A myopic rule: it never waits and never looks past the next event.
* ``groups``: the window planner's plans (with barriers), windows of W taken from the head of the queue as jobs
  arrive: a window's groups run one after another, each when the whole previous group has ended; the next window is
  planned when the last group of this one has ended. The window planner is given by the caller (``env`` plans
  windows without a model; the agent's planners live in ``training``).
* ``rollout-giveback`` (``RolloutGiveBack``; decided on a node model, and only where a running job's CPUs can be
  changed: ``cosched eval --streams``, the benches, continuous plans (``cosched schedule|run --mode continuous``: a
  change with ``before_launch``, re-pinned by the plan runner), online runs (re-pinned by their runner) and ``POST
  /decide`` (by its caller); the Slurm controller and the trace's cluster policy refuse it in one line): ``Rollout``
  with one more candidate.
  Where jobs wait, fewer than Cmax run, fewer than N/Cmax CPUs are free and a running job that adapts
  (``StreamJob.adapts``: its program loses nothing when CPUs are taken from it) holds more than N/Cmax, the one holding
  most keeps N/Cmax of its CPUs dealt over its NUMA domains (``env.plan.allocate.dealt``: near the
  pages it touched), and rollout's candidates for one start on what it freed are valued against starting nothing now,
  each by rollout's own play-out; the best is taken, with the change, only where predicted better. So a job that took
  every CPU while the node was quiet need not hold them through what comes next (docs/continuous.md has the figures).
"""

from __future__ import annotations

from typing import Callable, Sequence

from env.episode.stream import DEFAULT_STREAM_WINDOW, WAIT, Decision, StreamJob, StreamView
from env.errors import InputError
from env.node.spec import NodeSpec
from env.plan.allocate import Allocation, dealt, plain_allocation
from env.plan.models import Plan, Window, WindowJob
from env.planners.continuous import DEFAULT_CANDIDATES, Rollout, Start, slots
from env.planners.registry import Registry
from env.sim.model import solve
from env.sim.stream import StreamNode

def _free_slots(view: StreamView, all_slots: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    free = view.free_cpus()
    return [s for s in all_slots if set(s) <= free]


class TimeShare:
    name = "timeshare"

    def reset(self, node: NodeSpec, jobs: Sequence[StreamJob], max_concurrency: int) -> None:
        self.whole = plain_allocation(node, node.cpus)

    def decide(self, view: StreamView) -> Decision:
        if view.running or not view.queue:
            return WAIT
        return Decision(starts=((view.queue[0].id, self.whole),))


class Packing:
    name = "packing"

    def reset(self, node: NodeSpec, jobs: Sequence[StreamJob], max_concurrency: int) -> None:
        self.slots = slots(node, max_concurrency)
        self.node = node

    def decide(self, view: StreamView) -> Decision:
        free = _free_slots(view, self.slots)[:view.places()]
        return Decision(starts=tuple((j.id, plain_allocation(self.node, s)) for j, s in zip(view.queue, free)))


class GreedyContinuous(Packing):
    name = "greedy-continuous"

    def __init__(self, window: int = DEFAULT_STREAM_WINDOW) -> None:
        self.window = window

    def reset(self, node: NodeSpec, jobs: Sequence[StreamJob], max_concurrency: int) -> None:
        super().reset(node, jobs, max_concurrency)
        self.solo = {j.name: j.solo_s for j in jobs}

    def decide(self, view: StreamView) -> Decision:
        sim = view.sim
        running = [(r.sim, self.solo[r.name]) for r in sim.running.values()]
        queue = list(view.queue[:self.window])
        starts: list[tuple[str, Allocation]] = []
        for s in _free_slots(view, self.slots)[:view.places()]:
            if not queue:
                break
            alloc = plain_allocation(self.node, s)
            best: tuple[float, StreamJob, object] | None = None
            for j in queue:
                job = sim.sim_job(j.params, alloc)
                trial = running + [(job, j.solo_s)]
                rate = sum(solo / t for (_, solo), t in zip(trial, solve(sim.g, [t for t, _ in trial])))
                if best is None or rate > best[0] + 1e-12:  # ties: the earlier job
                    best = (rate, j, job)
            assert best is not None
            _, j, job = best
            queue.remove(j)
            starts.append((j.id, alloc))
            running.append((job, j.solo_s))
        return Decision(starts=tuple(starts))


class Groups:
    """Window plans run with barriers; ``plan(window) -> Plan`` is the window planner."""

    name = "groups"

    def __init__(self, plan: Callable[[Window], Plan], window: int = DEFAULT_STREAM_WINDOW) -> None:
        self.plan = plan
        self.window = window

    def reset(self, node: NodeSpec, jobs: Sequence[StreamJob], max_concurrency: int) -> None:
        self.cmax = max_concurrency
        self.todo: list[list[tuple[str, Allocation]]] = []  # the current window's groups not started yet

    def decide(self, view: StreamView) -> Decision:
        if view.running:
            return WAIT  # the barrier
        if not self.todo:
            if not view.queue:
                return WAIT
            head = view.queue[:self.window]
            plan = self.plan(Window(jobs=[WindowJob(id=j.id, profile=j.name) for j in head],
                                    max_concurrency=self.cmax))
            self.todo = [[(pj.id, _allocation(pj)) for pj in g.jobs] for g in plan.groups]
            if plan.excluded:
                raise ValueError(f"the window planner excluded {', '.join(e.id for e in plan.excluded)}")
        return Decision(starts=tuple(self.todo.pop(0)))


#: A saturated queue (every job known, the makespan objective): ``rollout`` chooses each start as ``best-found`` does
#: while at most this many jobs are known, ``Fill``'s play-outs beyond. Set from the cost, before any figure with it:
#: the guard's play of a 48-job stream (every decision of it) takes 10-21 s of one core on sim:reference with the
#: play-outs in C (docs/continuous.md).
DEEP_MAX_MAKESPAN = 48


class DeepRollout(Rollout):
    """``rollout`` as it ships, the default continuous policy: ``Rollout`` (env.planners.continuous; with arrivals
    its starts are valued one level deeper while few jobs are known), and on a saturated queue of at most
    ``DEEP_MAX_MAKESPAN`` jobs each start chosen as ``best-found`` chooses it (``deep_options``, valued by rollout's
    own play). Rollout's own choice is a candidate valued by its own play, so on the node model it is never below
    the shallower search; its guard against packing is Rollout's. The shallower search alone (``Rollout``) teaches the
    stream learner and plays forward inside this one."""

    def _deeper(self, sim: StreamNode, queue: list[StreamJob]) -> bool:
        return (self.goal == "makespan" and self.inner is not None
                and len(queue) + len(sim.running) <= DEEP_MAX_MAKESPAN)

    def _options(self, sim: StreamNode, queue: list[StreamJob], places: int, base: Start) -> list[Start | None]:
        if self._deeper(sim, queue):
            return deep_options(self, sim, queue, places, base)
        return super()._options(sim, queue, places, base)

    def _value(self, sim: StreamNode, queue: list[StreamJob], start: Start | None) -> float:
        if self._deeper(sim, queue):
            return self._deep_value(sim, queue, start)
        return super()._value(sim, queue, start)


def deep_options(pol: Rollout, sim: StreamNode, queue: list[StreamJob], places: int, base: Start
                 ) -> list[Start | None]:
    """The candidates of a start valued one level deeper: the shallower rollout's own choice first (so the deeper
    search is never below it), then ``Fill``'s start, the best ``candidates`` of ``Proposals`` and nothing more now
    (when something runs); each start once."""
    own = pol.inner.search(StreamView(sim, queue, pol.cmax, 0)).starts  # type: ignore[union-attr]
    options = [(next(j for j in queue if j.id == own[0][0]), own[0][1]) if own else None, base,
               *pol.proposals.ranked(sim, queue, places)[: pol.candidates], *([None] if sim.running else [])]
    keys: list = []
    unique: list[Start | None] = []
    for o in options:
        key = None if o is None else (o[0].name, o[1])
        if key not in keys:
            keys.append(key)
            unique.append(o)
    return unique


class BestFound(Rollout):
    """The offline reference for streams: rollout one level deeper at every start, whatever the objective and the
    jobs known, with no guard. At each start, every candidate of ``deep_options`` (rollout's own choice, ``Fill``'s
    start, the best 8 of ``Proposals``, and starting nothing more now) is played forward to the last known end by the
    whole ``rollout`` search (deciding at every event, its guard off), not by ``Fill``, and the best is taken. On the
    node model it is never worse than the shallower rollout (tested). It gained 1.5-3 % over it on the held-out
    streams where a larger budget (W 32, 32 candidates: this policy until 2026-11-26) gained 0-1 %
    (docs/continuous.md). Seconds to minutes of one core per stream of 48 jobs."""

    name = "best-found"

    def __init__(self, window: int = DEFAULT_STREAM_WINDOW, candidates: int = DEFAULT_CANDIDATES,
                 objective: str = "auto") -> None:
        super().__init__(window, candidates, objective, guard=False, margin=0.0, deep=True)

    def decide(self, view: StreamView) -> Decision:
        return self.search(view) if view.queue else WAIT

    def _options(self, sim: StreamNode, queue: list[StreamJob], places: int, base: Start) -> list[Start | None]:
        return deep_options(self, sim, queue, places, base)

    def _value(self, sim: StreamNode, queue: list[StreamJob], start: Start | None) -> float:
        return self._deep_value(sim, queue, start)


def _allocation(pj) -> Allocation:  # noqa: ANN001 - a PlanJob
    return Allocation(cpus=tuple(pj.cpus), numa_nodes=tuple(pj.numa_nodes), memory=pj.memory,
                      l3={int(d): (a.ways, int(a.mask, 16)) for d, a in pj.l3.items()},
                      mem_bw_percent={int(d): v for d, v in pj.mem_bw_percent.items()})


#: The stream policies ``cosched eval --streams`` compares by default.
STREAM_POLICIES = ("timeshare", "packing", "groups", "greedy-continuous", "rollout")
#: The continuous policy a stream gets when none is named: rollouts on the node model (no learned part).
DEFAULT_CONTINUOUS_POLICY = "rollout"
_NOT_YET = ("the continuous {} policy needs the stream learner, which is not trained yet: "
            "choose from timeshare, packing, groups, greedy-continuous, rollout")


class RolloutGiveBack(DeepRollout):
    """``rollout-giveback`` (the module's docstring): rollout's decision, or, where it can only wait because a running
    job holds the CPUs, that job's dealt share kept and a start on the rest when the play-outs predict it better."""

    name = "rollout-giveback"

    def reset(self, node: NodeSpec, jobs: Sequence[StreamJob], max_concurrency: int) -> None:
        if not node.simulated:
            raise InputError(f"rollout-giveback decides on a node model, and node {node.name} is none: give it the "
                             "node's model ('cosched calibrate' writes it), or use packing")
        super().reset(node, jobs, max_concurrency)
        self.node, self.slot, self.given = node, len(node.cpus) // max_concurrency, 0
        self.adapts = {j.id for j in jobs if j.adapts}  # only these may give back (StreamJob.adapts)

    def search(self, view: StreamView) -> Decision:
        d = super().search(view)
        if d.starts or not view.queue or view.places() == 0 or len(view.free_cpus()) >= self.slot:
            return d
        big = [(len(r.alloc.cpus), k) for k, r in view.running.items()
               if len(r.alloc.cpus) > self.slot and k in self.adapts]
        if not big:
            return d
        _, jid = max(big)
        held = view.running[jid].alloc
        kept = plain_allocation(self.node, dealt(self.node, held.cpus, self.slot), memory=held.memory)
        queue = list(view.queue)
        wait = self._value(view.sim, queue, None)
        sim = view.sim.fork()
        sim.give_back(jid, kept)
        base = self.base.next_start(sim, queue, view.places())
        if base is None:
            return d
        options = [o for o in self._options(sim, queue, view.places(), base) if o is not None]
        values = [self._value(sim, queue, o) for o in options]
        best = min(range(len(options)), key=lambda k: (values[k], k))
        if not values[best] < wait:
            return d
        self.given += 1
        job, alloc = options[best]
        return Decision(starts=((job.id, alloc),), changes=((jid, kept),),
                        note=f"{jid} gives back {len(held.cpus) - self.slot} CPUs for {job.id}")


#: Why ``rollout-giveback`` is refused where its decisions would be carried out or planned.
_GIVE_BACK_HERE = ("rollout-giveback changes a running job's CPUs, which the Slurm controller and the trace's cluster "
                   "policy cannot carry out yet: use it in cosched schedule|run --mode continuous, POST /decide or "
                   "cosched eval --streams; use rollout here")


def stream_registry(plan: Callable[[Window], Plan] | None = None, window: int = DEFAULT_STREAM_WINDOW, *,
                    give_back: bool = False) -> Registry:
    """The stream policies by name; ``plan``: the window planner ``groups`` runs (absent: groups is refused);
    ``give_back``: the caller runs decisions on the node model (``run_stream``), so ``rollout-giveback`` may be
    chosen (elsewhere it is refused in one line)."""
    factories: dict = {"timeshare": TimeShare, "packing": Packing, "greedy-continuous": lambda: GreedyContinuous(window),
                       "rollout": lambda: DeepRollout(window), "best-found": BestFound}
    later = {"agent": _NOT_YET.format("agent"), "agent-search": _NOT_YET.format("agent-search")}
    if give_back:
        factories["rollout-giveback"] = lambda: RolloutGiveBack(window)
    else:
        later["rollout-giveback"] = _GIVE_BACK_HERE
    if plan is not None:
        factories["groups"] = lambda: Groups(plan, window)
    else:
        later["groups"] = "groups needs a window planner here"
    return Registry(factories, later)


def evaluate_streams(streams: Sequence[Window], node: NodeSpec, policies: Sequence[str], registry: Registry, *,
                     progress: Callable[[int, str, float], None] | None = None) -> dict:
    """Every stream run by every policy on the node model: the ``cosched eval --streams --json`` document
    (per stream and mean: makespan_s, throughput_vs_timeshare, mean_turnaround_s, mean_bounded_slowdown)."""
    import time

    from env.episode.stream import run_stream, sim_stream

    pols = {name: registry.get(name) for name in policies}
    out, sums = [], {name: {} for name in policies}
    for i, w in enumerate(streams):
        jobs = sim_stream(node, w.jobs)
        results = {}
        for name, pol in pols.items():
            t0 = time.perf_counter()
            results[name] = run_stream(node, jobs, w.max_concurrency, pol).metrics()  # type: ignore[arg-type]
            for k, v in results[name].items():
                sums[name][k] = sums[name].get(k, 0.0) + v
            if progress is not None:
                progress(i, name, time.perf_counter() - t0)
        out.append({"index": i, "jobs": len(jobs), "max_concurrency": w.max_concurrency, "results": results})
    mean = {name: {k: v / len(streams) for k, v in sums[name].items()} for name in policies}
    return {"backend": "sim", "node": node.name, "simulated": True, "policies": list(policies), "streams": out,
            "mean": mean}


#: A cluster's whole-node rule (the trace simulation's ``cosched`` and the Slurm controller's continuous mode) gives a
#: job a whole idle node only where its program runs at least this much longer on one of packing's slots
#: (``slot_slowdown``): a job that runs as fast on its slot gains nothing from the rest of the node, which then stays
#: whole for a job that does (on sim:reference at Cmax 2: DC 0.94 and cholesky 1.00 share, fft at 1.22 and every
#: other program runs alone). Chosen on the trace's design parts (docs/slurm-scale.md, "What chose what"): among 1.05,
#: 1.1 and 1.3 it lowered cosched's mean turnaround in all nine (three parts, three draws).
LONE_MIN_GAIN = 1.1


def slot_slowdown(node: NodeSpec, params, max_concurrency: int) -> float:  # noqa: ANN001 - JobParams
    """How much longer a job takes alone on packing's first slot than alone on the whole node (the node model's
    times, first-touch, every way, no cap); 1 with Cmax 1."""
    if max_concurrency <= 1:
        return 1.0
    from env.sim.model import solo_time
    from env.sim.world import world_for

    sp = world_for(node).params
    return solo_time(node, params, list(slots(node, max_concurrency)[0]), sp=sp) / solo_time(node, params, sp=sp)


__all__ = ["DEFAULT_STREAM_WINDOW", "LONE_MIN_GAIN", "DEFAULT_CONTINUOUS_POLICY", "STREAM_POLICIES", "TimeShare", "Packing", "GreedyContinuous", "Groups", "RolloutGiveBack", "DeepRollout", "BestFound",
           "DEEP_MAX_MAKESPAN", "deep_options", "slots",
           "slot_slowdown", "stream_registry", "evaluate_streams"]
