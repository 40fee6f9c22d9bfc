"""The node model a plan is scored on: the group evaluator the searches use (the simulated node's model directly, with
the same allocation code as the plans), the scorer of a node (``node_scorer``: None where there is no node model) and
a plan's predicted throughput."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from env.node.spec import NodeSpec
from env.plan import actions
from env.plan.allocate import GroupState, allocate

Scorer = Callable[[int, Sequence[tuple[str, int]]], float]  # (schedule action, [(job, action)...]) -> makespan (s)


class AllocationTable:
    """The node's allocations, shared by every evaluator of the node object: an allocation (and what the model sees
    of it: CPUs, memory policy, way masks and caps by domain index) depends on the node, the schedule, the action
    and what the group already holds, never on the jobs. Group states and placements are numbered, so a lookup
    hashes three small integers."""

    def __init__(self, node: NodeSpec) -> None:
        self.node = node
        self.entries: dict[tuple[int, int, int], tuple] = {}  # (schedule, action, state) -> see allocate
        self.states: list[tuple[frozenset[int], tuple[tuple[int, int], ...]]] = [(frozenset(), ())]  # (CPUs, cursor)
        self.state_ids = {self.states[0]: 0}
        self.place_ids: dict[tuple, int] = {}

    def allocate(self, g, schedule: int, a: int, state: int) -> tuple:  # noqa: ANN001 - g: env.sim.model.Geometry
        """(allocation or None, the group's next state, the placement's id, (its domain masks, its caps))."""
        from env.sim.model import memory_key

        sched = actions.decode(schedule)
        taken, cursor = self.states[state]
        st = GroupState(set(taken), dict(cursor))
        alloc = allocate(self.node, sched.affinity, sched.memory, actions.decode(a), st)  # type: ignore[union-attr,arg-type]
        nxt = (frozenset(st.taken_cpus), tuple(sorted(st.mask_cursor.items())))
        sid = self.state_ids.get(nxt)
        if sid is None:
            sid = self.state_ids[nxt] = len(self.states)
            self.states.append(nxt)
        r: tuple = (None, sid, -1, None)
        if alloc is not None:  # what the model sees of the placement: equal ones give equal SimJobs
            masks = {g.l3_index[d]: m for d, (_, m) in alloc.l3.items()}
            mba = {g.numa_index[d]: p for d, p in alloc.mem_bw_percent.items()}
            place = (alloc.cpus, memory_key(g, alloc.cpus, alloc.memory), tuple(sorted(masks.items())),
                     tuple(sorted(mba.items())))
            pid = self.place_ids.setdefault(place, len(self.place_ids))
            r = (alloc, sid, pid, (masks, mba))
        self.entries[(schedule, a, state)] = r
        return r


class NodeCache(dict):
    """node -> the object ``make(node)`` made for it: at most ``size`` nodes (the oldest dropped first), an object
    made anew once ``stale(object)`` (bounds the memory of a long-running service)."""

    def __init__(self, make: Callable[[NodeSpec], Any], size: int, stale: Callable[[Any], bool]) -> None:
        super().__init__()
        self.make, self.size, self.stale = make, size, stale

    def __call__(self, node: NodeSpec) -> Any:
        hit = self.get(node)
        if hit is None or self.stale(hit):
            if hit is None and len(self) >= self.size:
                self.pop(next(iter(self)))
            hit = self[node] = self.make(node)
        return hit


_ALLOCATIONS = NodeCache(AllocationTable, 16, lambda t: len(t.entries) > 500_000)


class GroupEvaluator:
    """Makespan of one group on the simulated node, memoised by (schedule, ((job, action), ...))."""

    def __init__(self, node: NodeSpec) -> None:
        from env.sim.model import geometry
        from env.sim.world import world_for

        world = world_for(node)  # the node model's jobs and parameters when it has one
        self.node, self.world = node, world
        self.g = geometry(node, world.params)
        self.by_name = world.entries
        self.memo: dict[tuple, float] = {}
        self.allocations = _ALLOCATIONS(node)  # shared by the node's evaluators
        self.job_memo: dict[tuple[str, int], object] = {}  # (job, placement id) -> its SimJob
        self.group_memo: dict[tuple, float] = {}
        self.evals = 0

    def makespan(self, schedule: int, members: Sequence[tuple[str, int]]) -> float:
        key = (schedule, tuple(members))
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        from env.sim.model import run_group

        jobs = self._jobs(schedule, key[1])
        if jobs is None:
            self.memo[key] = float("inf")
            return float("inf")
        same = tuple(id(j) for j in jobs)  # groups the model cannot tell apart share one simulation
        ms = self.group_memo.get(same)
        if ms is None:
            self.evals += 1
            ms = max(run_group(self.g, jobs))
            self.group_memo[same] = ms
        self.memo[key] = ms
        return ms

    def _jobs(self, schedule: int, members: tuple[tuple[str, int], ...]) -> list | None:
        """The group's SimJobs. An allocation depends only on (schedule, action, what the group already holds)
        (``AllocationTable``), and a SimJob only on the job and its placement, so both are memoised by that."""
        from env.sim.model import SimJob

        table = self.allocations
        entries = table.entries
        state = 0
        jobs = []
        for name, a in members:
            r = entries.get((schedule, a, state))
            if r is None:
                r = table.allocate(self.g, schedule, a, state)
            alloc, state, pid, place = r
            if alloc is None:
                return None
            job = self.job_memo.get((name, pid))
            if job is None:
                job = self.job_memo[(name, pid)] = SimJob(self.g, self.by_name[name].params, alloc.cpus, alloc.memory,
                                                          place[0], place[1])
            jobs.append(job)
        return jobs


def _stale(ev: GroupEvaluator) -> bool:
    from env.sim.world import world_for

    return len(ev.memo) > 200_000 or ev.world is not world_for(ev.node)  # or the node's model changed since


#: The node's shared group evaluator (its memo makes repeated groups free); a fresh one past 200,000 groups, or once
#: the node's model is another (a node-model file rewritten, the real node's model learning from a run).
node_evaluator = _EVALUATORS = NodeCache(GroupEvaluator, 8, _stale)


def clear_evaluators() -> None:
    """Forget every node's evaluator (a cold memo: benchmarks, tests)."""
    _EVALUATORS.clear()


def model_node(node: NodeSpec) -> NodeSpec | None:
    """The simulated node plans for ``node`` are scored on: ``node`` itself when simulated (``sim:NAME``, a node-model
    file ``sim:FILE``); for the real node, its calibrated node model with the programs learned since
    (``env.calibration.learned.scoring_node``); None when it has none."""
    if node.simulated:
        return node
    from env.calibration.learned import scoring_node

    return scoring_node(node)


def node_scorer(node: NodeSpec) -> Scorer | None:
    """The node model's group makespan for ``node`` (``model_node``'s, through ``node_evaluator``), or None when no
    node model exists for it."""
    scored = model_node(node)
    return None if scored is None else node_evaluator(scored).makespan


def no_prediction_reason(node: NodeSpec) -> str:
    if node.simulated:
        return f"no node model for node {node.name!r}: plans on it have no predicted throughput"
    return (f"no node model for node {node.name!r}: plans on it have no predicted throughput ('cosched calibrate' "
            "measures this node and writes one)")


def predicted_throughput(plan, node: NodeSpec, solo_total_s: float) -> tuple[float, list[float]] | None:  # noqa: ANN001
    """(throughput vs time sharing, group makespans) of ``plan`` on the node model, or None without one."""
    scored = model_node(node)
    if scored is None or not plan.groups:
        return None
    from env.sim.backend import SimBackend

    if scored is not node:  # the real node's plan, scored on its model
        plan = plan.model_copy(update={"node": plan.node.model_copy(update={"name": scored.name})})
    makespans = SimBackend(scored).evaluate(plan)
    total = sum(makespans)
    return (solo_total_s / total if total > 0 else 1.0), makespans
