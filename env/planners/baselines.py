"""Baseline policies and the policy registry (interfaces.md names).

Every policy but time sharing plans through ``env.episode.window`` (the one planning path); search policies find a
*script* (a schedule-level action and ordered groups of (job, job-level action)) and replay it through the
episode with ``ScriptChooser``, so their plans are built exactly like the agent's.

* ``timeshare``: each job alone on the whole node, in queue order (the baseline: throughput 1.0 by definition).
  The whole node is not an action of the encoding (cores top out at 7/8), so it is placed with
  ``PlanBuilder.place_whole_node``.
* ``greedy`` (profiles only, no search): compact affinity, first-touch. Jobs are ranked by memory intensity
  (LLC misses per second of their solo run; scale factor when the counter is missing) and the most
  memory-bound job is paired with the most compute-bound one, the next with the next, ... (groups of two;
  with Cmax 1, alone). A pair shares the node's cores in proportion to the two jobs' scale factors (the
  nearest pair of core options that fits), all ways shared, no bandwidth cap; a job left alone gets 7/8.
* ``random``: a uniformly random valid action at every step (seeded): a random valid plan.
* ``pairs`` (like the paper's OCRP-ML): best pairing with Cmax = 2 searched on the simulated node, cores and
  affinity/memory policy only (all ways shared, no bandwidth cap: no partitioning).
* ``best-found``: the reference upper bound, a budgeted search on the simulated node. Total time is a sum of
  group makespans, so for each schedule-level action it finds a good allocation for every subset of at most
  Cmax jobs, then the best partition by dynamic programming over subsets. Phase 1, all six schedule actions:
  per subset, every combination of core options (all ways, no cap). Phase 2, the two best schedule actions:
  per subset, coordinate descent from its two best core combinations (per job: ways, bandwidth, split, cores;
  until no change, at most ``rounds`` = 3 passes). Budget: at most ``max_evals`` = 60,000 new group
  simulations per chunk (after it, refinement stops); a W = 6, Cmax = 4 window takes about 6,000 simulations
  (allocations the model cannot tell apart share one), 2-3 s on the development machine. ``search(..., exhaustive=True)`` enumerates a grid completely (small
  windows, reduced grids): on W = 4 windows best-found matched it exactly (``bench/sim_bench.py``).
* ``agent`` and ``fifo`` (a trained model's plans) live in ``training.policies``, imported on first use (``LAZY``).
"""

from __future__ import annotations

import itertools
import random as _random
from dataclasses import dataclass
from pathlib import Path
from fractions import Fraction
from typing import Callable, Protocol, Sequence

import numpy as np

from env.plan import actions
from env.plan.actions import SKIP, JobAction, ScheduleAction, encode
from env.plan.allocate import GroupState, allocate, core_count
from env.episode.window import DEFAULT_WINDOW, Episode, plan_window
from env.errors import InputError
from env.episode.jobinfo import JobInfo, JobInfoProvider
from env.plan.models import Plan, Window
from env.node.spec import NodeSpec
from env.plan.builder import PlanBuilder

# -- scripts and their replay through the episode --------------------------------------------------


@dataclass
class Script:
    """A complete decision for one chunk: schedule action, then groups of (slot in the chunk, job action)."""

    schedule: int
    groups: list[list[tuple[int, int]]]
    predicted_total_s: float | None = None
    predicted_makespans: list[float] | None = None

    def canonical(self) -> "Script":
        """Groups ordered by their first slot, members by slot: the order the evaluator and the replay share."""
        groups = sorted((sorted(g) for g in self.groups if g), key=lambda g: g[0][0])
        return Script(self.schedule, groups, self.predicted_total_s, None)


class ScriptChooser:
    """Replays a script through an episode: the wanted job's action when it is current, skip otherwise."""

    def __init__(self, script: Script) -> None:
        self.schedule = script.schedule
        self.pending = [list(g) for g in script.groups]
        self.closing = False  # a scripted group is complete: skip until the episode closes it

    def __call__(self, obs: np.ndarray, mask: np.ndarray, ep: Episode) -> int:
        if ep.schedule_index is None:
            return self.schedule
        if self.closing:
            if ep.open_slots:
                return SKIP
            self.closing = False
        group = self.pending[0]
        slot, action = group[0]
        if ep.current != slot:
            return SKIP
        group.pop(0)
        if not group:
            self.pending.pop(0)
            self.closing = True
        return action


# -- the fast evaluator the searches use (the sim model directly, same allocation code) ------------


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


_ALLOCATIONS: dict[int, AllocationTable] = {}


def _allocation_table(node: NodeSpec) -> AllocationTable:
    """The node object's allocation table (a new one past 500,000 allocations, to bound its memory)."""
    hit = _ALLOCATIONS.get(id(node))
    if hit is None or hit.node is not node or len(hit.entries) > 500_000:
        if len(_ALLOCATIONS) > 16:
            _ALLOCATIONS.clear()
        hit = _ALLOCATIONS[id(node)] = AllocationTable(node)
    return hit


class GroupEvaluator:
    """Makespan of one group on the simulated node, memoised by (schedule, ((job, action), ...))."""

    def __init__(self, node: NodeSpec) -> None:
        from env.sim.model import geometry
        from env.sim.world import world_for

        world = world_for(node)  # the node model's jobs and parameters when it has one
        self.node = node
        self.g = geometry(node, world.params)
        self.by_name = world.entries
        self.memo: dict[tuple, float] = {}
        self.allocations = _allocation_table(node)
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




@dataclass(frozen=True)
class Grid:
    """The options a search considers (defaults: the whole action encoding)."""

    schedules: tuple[int, ...] = tuple(range(actions.N_SCHEDULE))
    cores: tuple[Fraction, ...] = actions.CORE_FRACTIONS
    ways: tuple[Fraction, ...] = actions.WAY_FRACTIONS
    bw: tuple[int, ...] = actions.BW_PERCENTS
    splits: tuple[str, ...] = actions.SPLITS

    def action(self, c: Fraction, w: Fraction, b: int, s: str) -> int:
        key = (c, w, b, s)
        a = _ENCODED.get(key)
        if a is None:
            a = _ENCODED[key] = encode(JobAction(c, w, b, s))  # type: ignore[arg-type]
        return a


_ENCODED: dict[tuple, int] = {}

NO_PARTITIONING = Grid(ways=(Fraction(22, 22),), bw=(100,), splits=("balanced",))


_COMBOS: dict[tuple, list[tuple[Fraction, ...]]] = {}


def _core_combos(node: NodeSpec, grid: Grid, k: int) -> list[tuple[Fraction, ...]]:
    n = len(node.cpus)
    key = (n, grid.cores, k)
    if key not in _COMBOS:
        count = {c: core_count(node, c) for c in grid.cores}
        _COMBOS[key] = [c for c in itertools.product(grid.cores, repeat=k) if sum(count[x] for x in c) <= n]
    return _COMBOS[key]


def _optimise_subset(ev: GroupEvaluator, schedule: int, names: list[str], grid: Grid, rounds: int,
                     starts: int = 2, *, fixed: Sequence[tuple[str, int]] = (), free: int | None = None
                     ) -> tuple[float, list[int]]:
    """Actions for ``names`` in one group: the best core split (all ways, no cap) from ``starts`` starting points,
    then ``rounds`` of coordinate descent over the grid. ``fixed``: members already in the group, with their
    actions (they come first); ``free``: the CPUs ``names`` may take together (default: no limit beyond the node).
    (inf, []) when no core split fits."""
    k = len(names)
    w_full, b_full, s0 = max(grid.ways), max(grid.bw), grid.splits[0]
    fixed = list(fixed)
    count = {c: core_count(ev.node, c) for c in grid.cores} if free is not None else {}
    scored = []
    for combo in _core_combos(ev.node, grid, k):
        if free is not None and sum(count[c] for c in combo) > free:
            continue
        acts = [grid.action(c, w_full, b_full, s0) for c in combo]
        scored.append((ev.makespan(schedule, fixed + list(zip(names, acts))), combo))
    scored.sort(key=lambda x: x[0])
    best_t, best_acts = float("inf"), []
    for t0, combo in scored[:starts]:
        cur = [[c, w_full, b_full, s0] for c in combo]
        cur_t = t0
        for _ in range(rounds):
            improved = False
            for i in range(k):
                for dim, options in ((1, grid.ways), (2, grid.bw), (3, grid.splits), (0, grid.cores)):
                    for opt in options:
                        if opt == cur[i][dim]:
                            continue
                        trial = [list(x) for x in cur]
                        trial[i][dim] = opt
                        if free is not None and dim == 0 and sum(count[x[0]] for x in trial) > free:
                            continue
                        t = ev.makespan(schedule, fixed + list(zip(names, [grid.action(*x) for x in trial])))
                        if t < cur_t - 1e-9:
                            cur, cur_t, improved = trial, t, True
            if not improved:
                break
        if cur_t < best_t:
            best_t, best_acts = cur_t, [grid.action(*x) for x in cur]
    return best_t, best_acts


def _exhaustive_subset(ev: GroupEvaluator, schedule: int, names: list[str], grid: Grid) -> tuple[float, list[int]]:
    per_job = [grid.action(c, w, b, s) for c in grid.cores for w in grid.ways for b in grid.bw for s in grid.splits]
    n = len(ev.node.cpus)
    best_t, best_acts = float("inf"), []
    for acts in itertools.product(per_job, repeat=len(names)):
        if sum(core_count(ev.node, actions.decode(a).cores) for a in acts) > n:  # type: ignore[union-attr]
            continue
        t = ev.makespan(schedule, list(zip(names, acts)))
        if t < best_t:
            best_t, best_acts = t, list(acts)
    return best_t, best_acts


def _best_partition(sub: dict[int, tuple[float, list[int]]], full: int) -> tuple[float, dict[int, int]]:
    """DP over subsets: the partition of ``full`` into groups in ``sub`` with the least total makespan (ties: the
    group of the larger bitmask). Walks ``env.planners.partitions.partition_table``'s subset lists, so groups larger than
    ``sub``'s largest are never visited."""
    from env.planners.partitions import partition_table

    n = full.bit_length()
    _, inside = partition_table(n, max((g.bit_count() for g in sub), default=1))
    value = [float("inf")] * (full + 1)
    for g, (t, _) in sub.items():
        if g <= full:
            value[g] = t
    dp = [float("inf")] * (full + 1)
    choice = [0] * (full + 1)
    dp[0] = 0.0
    for m in range(1, full + 1):
        best, grp = dp[m], 0
        for g in reversed(inside[m]):
            t = dp[m ^ g] + value[g]
            if t < best:
                best, grp = t, g
        dp[m], choice[m] = best, grp
    return dp[full], dict(enumerate(choice))


def _refine_order(ranked: Sequence[int], k: int) -> list[int]:
    """The ``k`` schedules to refine: the best of each affinity first, then the next best. Why: the screening
    uses no partitioning, where isolating jobs on separate sockets (compact) often wins, while spreading them
    (distributed) wins only once ways and bandwidth are partitioned; and local-alloc ties with first-touch in
    the model, so the plain top k could be one affinity twice and never try the other."""
    seen: set[str] = set()
    first = []
    for s in ranked:
        aff = actions.decode(s).affinity  # type: ignore[union-attr]
        if aff not in seen:
            seen.add(aff)
            first.append(s)
    out = first[:k]
    out += [s for s in ranked if s not in out][: k - len(out)]
    return out


def search(node: NodeSpec, names: Sequence[str], max_concurrency: int, grid: Grid = Grid(), *,
           exhaustive: bool = False, rounds: int = 3, refine_schedules: int = 2, max_evals: int = 60_000,
           evaluator: GroupEvaluator | None = None) -> Script:
    """The best script found for one chunk.

    Phase 1, every schedule action: each subset of at most Cmax jobs gets its best core combination (all ways,
    no cap), then the best partition (DP). Phase 2, the ``refine_schedules`` best schedules (the best of each
    affinity first: ``_refine_order``): coordinate descent
    per subset from its two best core combinations, then the DP again. ``exhaustive`` enumerates every
    combination of the grid per subset instead (small windows and grids only).
    """
    ev = evaluator if evaluator is not None else GroupEvaluator(node)
    w = len(names)
    full = (1 << w) - 1
    subsets = [m for m in range(1, full + 1) if bin(m).count("1") <= max_concurrency]
    start_evals = ev.evals

    def members(m: int) -> list[str]:
        return [names[i] for i in range(w) if m >> i & 1]

    results = []  # (total, schedule, sub, choice)
    if exhaustive:
        for schedule in grid.schedules:
            sub = {m: _exhaustive_subset(ev, schedule, members(m), grid) for m in subsets}
            results.append((*_best_partition(sub, full), schedule, sub))
    else:
        screened = []
        for schedule in grid.schedules:
            sub = {m: _optimise_subset(ev, schedule, members(m), grid, rounds=0, starts=1) for m in subsets}
            total, choice = _best_partition(sub, full)
            screened.append((total, choice, schedule, sub))
        screened.sort(key=lambda r: r[0])
        results.extend(screened)
        for schedule in _refine_order([r[2] for r in screened], refine_schedules):
            if ev.evals - start_evals > max_evals:
                break
            sub = {}
            for m in subsets:
                over = ev.evals - start_evals > max_evals
                sub[m] = _optimise_subset(ev, schedule, members(m), grid, rounds=0 if over else rounds,
                                          starts=1 if over else 2)
            results.append((*_best_partition(sub, full), schedule, sub))
    total, choice, schedule, sub = min(results, key=lambda r: r[0])
    groups = []
    m = full
    while m:
        grp = choice[m]
        slots = [i for i in range(w) if grp >> i & 1]
        groups.append(list(zip(slots, sub[grp][1])))
        m ^= grp
    script = Script(schedule, groups, predicted_total_s=total).canonical()
    script.predicted_makespans = [sub[sum(1 << s for s, _ in g)][0] for g in script.groups]
    return script


# -- policies ---------------------------------------------------------------------------------------


@dataclass
class PlanContext:
    node: NodeSpec
    provider: JobInfoProvider
    window_size: int = DEFAULT_WINDOW
    seed: int | None = None
    simulated: bool = True  # searches need the simulated node
    pin_runtime: Path | None = None  # the C pinning runtime's library, when the plan should load it


class Policy(Protocol):
    name: str

    def plan(self, window: Window, ctx: PlanContext) -> Plan: ...


class TimeSharing:
    name = "timeshare"

    def plan(self, window: Window, ctx: PlanContext) -> Plan:
        b = PlanBuilder(node=ctx.node, schedule=ScheduleAction("compact", "first-touch"),
                        max_concurrency=window.max_concurrency, window_size=ctx.window_size, pin_runtime=ctx.pin_runtime)
        for job in window.jobs:
            info = ctx.provider.get(job.profile_name)
            if info is None:
                b.exclude(job, ctx.provider.missing_reason(job.profile_name))
            else:
                b.place_whole_node(job)
        solo = [info.solo_s for j in window.jobs if (info := ctx.provider.get(j.profile_name)) is not None]
        return b.build(self.name, predicted_makespans=solo, predicted_throughput=1.0,
                       predictions_source="profiles: each job's solo time")


class _ScriptPolicy:
    """A policy that decides a script per chunk and replays it through the episode."""

    name = "script"
    predicts = False

    def script(self, ep: Episode, ctx: PlanContext) -> Script:
        raise NotImplementedError

    def plan(self, window: Window, ctx: PlanContext) -> Plan:
        policy = self
        scripts: list[Script] = []

        class _Lazy:
            chooser: ScriptChooser | None = None

            def __call__(self, obs, mask, ep):
                if self.chooser is None:
                    s = policy.script(ep, ctx)
                    scripts.append(s)
                    self.chooser = ScriptChooser(s)
                return self.chooser(obs, mask, ep)

        result = plan_window(window, ctx.node, ctx.provider, lambda ci: _Lazy(), policy=self.name,
                             window_size=ctx.window_size, chooser_per_chunk=True, pin_runtime=ctx.pin_runtime)
        plan = result.plan
        if self.predicts and scripts and all(s.predicted_makespans is not None for s in scripts):
            makespans = [t for s in scripts for t in s.predicted_makespans]  # type: ignore[union-attr]
            solo = sum(ep.solo_total_s() for ep in result.episodes)
            for g, t in zip(plan.groups, makespans):
                g.predicted_makespan_s = t
            plan.predicted_throughput_vs_timeshare = solo / sum(makespans)
            plan.predictions_source = f"simulated: {ctx.node.name}"
        return plan


def _nearest_fit(node: NodeSpec, share: float, options: Sequence[Fraction]) -> tuple[Fraction, Fraction]:
    """The pair of core options closest to (share, 1 - share) whose core counts fit the node."""
    n = len(node.cpus)
    pairs = [(a, b) for a in options for b in options if core_count(node, a) + core_count(node, b) <= n]
    return min(pairs, key=lambda p: (abs(float(p[0]) - share) + abs(float(p[1]) - (1 - share)), -(p[0] + p[1])))


class Greedy(_ScriptPolicy):
    name = "greedy"

    def script(self, ep: Episode, ctx: PlanContext) -> Script:
        infos = ep.infos
        have_l3 = all(i.l3_misses_per_s is not None for i in infos)

        def intensity(i: JobInfo) -> float:
            if have_l3:
                return float(i.l3_misses_per_s)  # type: ignore[arg-type]
            return -(i.scale_factor or 1.0)  # no counter: the worse it scales, the more memory-bound we assume

        order = sorted(range(len(infos)), key=lambda s: (-intensity(infos[s]), s))
        full_w, full_bw = max(actions.WAY_FRACTIONS), max(actions.BW_PERCENTS)
        alone = encode(JobAction(max(actions.CORE_FRACTIONS), full_w, full_bw, "balanced"))
        groups: list[list[tuple[int, int]]] = []
        if ep.max_concurrency < 2:
            groups = [[(s, alone)] for s in order]
        else:
            lo, hi = 0, len(order) - 1
            while lo <= hi:
                if lo == hi:
                    groups.append([(order[lo], alone)])
                    break
                a, b = order[lo], order[hi]  # memory-bound, compute-bound
                sa, sb = infos[a].scale_factor or 1.0, infos[b].scale_factor or 1.0
                ca, cb = _nearest_fit(ctx.node, sa / (sa + sb), actions.CORE_FRACTIONS)
                groups.append([(a, encode(JobAction(ca, full_w, full_bw, "balanced"))),
                               (b, encode(JobAction(cb, full_w, full_bw, "balanced")))])
                lo, hi = lo + 1, hi - 1
        return Script(encode(ScheduleAction("compact", "first-touch")), groups).canonical()


class RandomPolicy:
    name = "random"

    def plan(self, window: Window, ctx: PlanContext) -> Plan:
        rng = _random.Random(ctx.seed if ctx.seed is not None else 0)

        def chooser(obs, mask, ep):
            return rng.choice(np.flatnonzero(mask).tolist())

        return plan_window(window, ctx.node, ctx.provider, chooser, policy=self.name, window_size=ctx.window_size,
                           pin_runtime=ctx.pin_runtime).plan


class _SearchPolicy(_ScriptPolicy):
    predicts = True
    grid = Grid()
    cmax: int | None = None

    def __init__(self, max_evals: int = 60_000, rounds: int = 3) -> None:
        self.max_evals = max_evals
        self.rounds = rounds
        self._evaluator: GroupEvaluator | None = None

    def script(self, ep: Episode, ctx: PlanContext) -> Script:
        if not ctx.simulated or not ctx.node.name.startswith("sim:"):
            raise InputError(f"policy {self.name!r} searches on the simulated node: use a sim node (e.g. --node sim:reference)")
        if self._evaluator is None or self._evaluator.node is not ctx.node:
            self._evaluator = GroupEvaluator(ctx.node)
        names = [i.name for i in ep.infos]
        cmax = min(ep.max_concurrency, self.cmax or ep.max_concurrency)
        return search(ctx.node, names, cmax, self.grid, rounds=self.rounds, max_evals=self.max_evals,
                      evaluator=self._evaluator)


class BestFound(_SearchPolicy):
    name = "best-found"


class Pairs(_SearchPolicy):
    name = "pairs"
    grid = NO_PARTITIONING
    cmax = 2


# -- the registry -----------------------------------------------------------------------------------

PolicyFactory = Callable[[], Policy]

POLICIES: dict[str, PolicyFactory] = {
    "timeshare": TimeSharing,
    "greedy": Greedy,
    "random": RandomPolicy,
    "pairs": Pairs,
    "best-found": BestFound,
}
LATER: dict[str, str] = {}
#: Policies that register themselves when their module is imported (lazily: the agent's need a model file).
LAZY: dict[str, str] = {"agent": "training.policies", "fifo": "training.policies", "agent-search": "training.search_policy"}
#: Interfaces.md says the default is the agent; until it exists the default is greedy.
DEFAULT_POLICY = "greedy"


def register_policy(name: str, factory: PolicyFactory) -> None:
    """Add or replace a policy (the agent registers itself here once a model is loaded)."""
    POLICIES[name] = factory
    LATER.pop(name, None)


def policy_names() -> list[str]:
    return list(POLICIES) + [n for n in (*LAZY, *LATER) if n not in POLICIES]


def get_policy(name: str) -> Policy:
    if name not in POLICIES and name in LAZY:
        import importlib

        importlib.import_module(LAZY[name])  # registers the name
    if name in POLICIES:
        return POLICIES[name]()
    if name in LATER:
        raise InputError(LATER[name])
    raise InputError(f"unknown policy {name!r}: choose from {', '.join(policy_names())}")


def parse_policies(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise InputError("--policies is empty: give names separated by commas, e.g. greedy,timeshare")
    for n in names:
        get_policy(n)
    return list(dict.fromkeys(names))
