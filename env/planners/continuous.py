"""Continuous decisions searched on the node model: ``rollout`` (and the pieces ``agent-search`` for streams reuses).
``rollout`` as it ships (``env.planners.streams.DeepRollout``) values a saturated queue's starts one level deeper.

At an event the search builds its decision one start at a time. For each start it weighs a few candidates, each
played forward on the node model (``StreamNode.fork``) to the end of the jobs it knows (the running ones and the
queue; never jobs not yet arrived), and keeps the best:

* the base policy's own next start (``Fill``), so the search is never worse than its base on the model's prediction;
* the best ``candidates`` of ``Proposals``: single starts (a job of the first W, with an allocation cut from the free
  CPUs: every free CPU, an even share over the places left, packing's slot size, half, one NUMA domain's free CPUs;
  compact or spread over the domains, first-touch or interleaved) ranked by the node model's instantaneous work rate
  (sum over the running jobs of solo time / current predicted time);
* stopping here (nothing more starts at this event), when something runs.

Where the node model stands for a real node (``env.calibration.learned.model_uncertainty``: the p90 of its held-out
error as a fraction ``margin``; 0 on a simulated node, which is its own model), the choice allows for the model's
error (``Rollout._robust``): it never stops with a CPU free while a job could start there, and among the starts
within ``margin`` of the best it takes the longest job first (makespan objective).

Each candidate's future is decided by ``Fill``: at every event each place gets an even share of the free CPUs (the
last place all of them), compact, and the job of the first W with the highest instantaneous work rate there (played
in C where the node's kernel is built: ``env.sim.kernel.Playout``). The objective is the stream's: the last known
job's end (saturated streams) or the sum of the
known jobs' ends, i.e. their turnaround, plus the node-seconds they hold, the wait of the next job to come
(streams with arrivals; ``objective_value``). Every figure it makes on a simulated node is
simulated; on a real node it is the calibrated model's prediction.

Why rollouts and not the myopic rule alone: the cost of a decision shows later (a job given the CPUs another job
needed, a poorly scaling job left to the tail). Measured on saturated streams of sim:reference, ranking by the
instantaneous rate alone starts jobs on too many CPUs and loses to packing at Cmax 3 and 4 (docs/continuous.md).
"""

from __future__ import annotations

import math
from typing import Sequence

from env.episode.stream import DEFAULT_STREAM_WINDOW, WAIT, Decision, StreamJob, StreamView
from env.node.spec import NodeSpec
from env.plan.allocate import Allocation, assign_cpus, plain_allocation
from env.sim.model import solve
from env.sim.stream import StreamNode

Start = tuple[StreamJob, Allocation]

#: Fill's choices kept before its memo starts afresh (bounds memory over long runs).
_CHOSEN_MAX = 100_000

#: Candidates beside the base's start that the search plays forward at each start it adds (its work budget).
DEFAULT_CANDIDATES = 8


class _Rates:
    """The node model's instantaneous work rate of the running set with one job added (SimJobs and solves memoised
    by the node, ``StreamNode.memo``)."""

    def __init__(self, solo: dict[str, float]) -> None:
        self.solo = solo

    def with_job(self, sim: StreamNode, job: StreamJob, alloc: Allocation) -> float:
        running = list(sim.running.values())
        trial = [r.sim for r in running] + [sim.sim_job(job.params, alloc)]
        solos = [self.solo[r.name] for r in running] + [job.solo_s]
        return sum(s / t for s, t in zip(solos, sim.memo.solve(sim.g, trial)))


def _distinct(queue: Sequence[StreamJob], window: int) -> list[StreamJob]:
    """The first of each program among the first W queued (two jobs of one program are the same choice)."""
    seen: set[str] = set()
    out = []
    for j in queue[:window]:
        if j.name not in seen:
            seen.add(j.name)
            out.append(j)
    return out


class _Regret(_Rates):
    """The CPU-seconds a job costs started here (its CPUs x its predicted time, plus the slowdown it brings on the
    running jobs over their remaining work, CPU-weighted), less what it costs alone on packing's slot; negated, so
    that higher is better as with rates. It favours the job that fits the CPUs that freed: a poorly scaling job on
    few CPUs, a well scaling one on many."""

    def __init__(self, node: NodeSpec, jobs: Sequence[StreamJob], max_concurrency: int) -> None:
        super().__init__({j.name: j.solo_s for j in jobs})
        alone = StreamNode(node, _params(node))
        slot = plain_allocation(node, assign_cpus(node, max(1, len(node.cpus) // max_concurrency), "compact", set()))
        self.ref = {j.name: len(slot.cpus) * solve(alone.g, [alone.sim_job(j.params, slot)])[0] for j in jobs}

    def with_job(self, sim: StreamNode, job: StreamJob, alloc: Allocation) -> float:
        running = list(sim.running.values())
        now = sim.memo.solve(sim.g, [r.sim for r in running]) if running else []
        times = sim.memo.solve(sim.g, [r.sim for r in running] + [sim.sim_job(job.params, alloc)])
        inflicted = sum(len(r.alloc.cpus) * r.left * (t - t0) for r, t, t0 in zip(running, times, now))
        return -(len(alloc.cpus) * times[-1] + inflicted - self.ref[job.name])


def _params(node: NodeSpec):  # noqa: ANN202 - the node's SimParams
    from env.sim.world import world_for

    return world_for(node).params


def _alone(sim: StreamNode, job: StreamJob, alloc: Allocation) -> float:
    """``job``'s time alone on ``alloc`` (the node model's, memoised with the node's solves)."""
    return sim.memo.solve(sim.g, [sim.sim_job(job.params, alloc)])[0]


def slots(node: NodeSpec, max_concurrency: int) -> list[tuple[int, ...]]:
    """packing's slots: the CPUs listed NUMA domain by domain, cut into Cmax runs of floor(N/Cmax) CPUs."""
    cpus = [c for d in node.numa for c in sorted(d.cpus)]
    size = len(cpus) // max_concurrency
    if size < 1:
        raise ValueError(f"Cmax {max_concurrency} is above this node's {len(cpus)} CPUs")
    return [tuple(cpus[i * size:(i + 1) * size]) for i in range(max_concurrency)]


class PackingBase:
    """packing as a base policy for ``play_out``: the queue's head in the lowest free slot (the search's guard).
    With ``window`` W, packing's slots but the job of the first W that runs longest alone on that slot (longest
    processing time first: what ends a makespan is then a short job, not a long one started last)."""

    def __init__(self, window: int | None = None) -> None:
        self.window = window  # None: queue order

    def reset(self, node: NodeSpec, jobs: Sequence[StreamJob], max_concurrency: int) -> None:
        self.allocs = [plain_allocation(node, s) for s in slots(node, max_concurrency)]

    def next_start(self, sim: StreamNode, queue: Sequence[StreamJob], places: int) -> Start | None:
        if not queue or places < 1:
            return None
        free = sim.free_cpus()
        slot = next((a for a in self.allocs if free.issuperset(a.cpus)), None)
        if slot is None or self.window is None:
            return None if slot is None else (queue[0], slot)
        return max(_distinct(queue, self.window), key=lambda j: _alone(sim, j, slot)), slot  # ties: the earlier job


class Fill:
    """The rollouts' base policy (also usable alone): each place takes an even share of the free CPUs (the last
    place all of them), compact; the job there is the one of the first W with the highest instantaneous work rate."""

    name = "fill"

    def __init__(self, window: int = DEFAULT_STREAM_WINDOW) -> None:
        self.window = window

    def reset(self, node: NodeSpec, jobs: Sequence[StreamJob], max_concurrency: int) -> None:
        self.node = node
        self.rates = _Rates({j.name: j.solo_s for j in jobs})
        # Its choice depends only on the running SimJobs (in order: they fix the free CPUs and the rates), the places
        # left and the window's programs; the play-outs meet the same ones again and again, so it is kept.
        self.chosen: dict[tuple, tuple[int, Allocation]] = {}

    def next_start(self, sim: StreamNode, queue: Sequence[StreamJob], places: int) -> Start | None:
        if not queue or places < 1:
            return None
        window = _distinct(queue, self.window)
        key = (tuple(r.sim for r in sim.running.values()), places, tuple((j.name, j.solo_s) for j in window))
        hit = self.chosen.get(key)
        if hit is None:
            free = sim.free_cpus()
            if not free:
                return None
            n = len(free) if places == 1 else max(1, len(free) // places)
            alloc = plain_allocation(self.node, assign_cpus(self.node, n, "compact", set(self.node.cpus) - free))
            best: tuple[float, int] | None = None
            for k, j in enumerate(window):
                rate = self.rates.with_job(sim, j, alloc)
                if best is None or rate > best[0] + 1e-12:  # ties: the earlier job
                    best = (rate, k)
            assert best is not None
            if len(self.chosen) >= _CHOSEN_MAX:
                self.chosen.clear()
            hit = self.chosen[key] = (best[1], alloc)
        return window[hit[0]], hit[1]

    def play_c(self, sim: StreamNode, queue: Sequence[StreamJob], cmax: int, objective: str, ends: list[float],
               held: float) -> float | None:
        """``play_out`` with this base by ``env.sim.kernel.Playout`` (``sim`` and ``queue`` left as they are), or None
        where only Python can play it."""
        if sim.memo.playout is None:
            from env.sim.kernel import Playout

            sim.memo.playout = Playout(sim.g, sim.node)
        return sim.memo.playout.play(sim, queue, cmax, self.window, self.rates.solo, objective, HOLD_WEIGHT, ends, held)

    def decide(self, view: StreamView) -> Decision:
        sim, queue, starts = view.sim.fork(), list(view.queue), []
        places = view.places()
        while (s := self.next_start(sim, queue, places)) is not None:
            j, alloc = s
            sim.start(j.id, j.name, j.params, alloc)
            queue.remove(j)
            starts.append((j.id, alloc))
            places -= 1
        return Decision(starts=tuple(starts))


class Proposals:
    """Candidate single starts at an event: the best by the instantaneous work rate and the best by CPU-seconds
    against packing's slot (``_Regret``), taken in turn."""

    def __init__(self, window: int = DEFAULT_STREAM_WINDOW) -> None:
        self.window = window

    def reset(self, node: NodeSpec, jobs: Sequence[StreamJob], max_concurrency: int) -> None:
        self.node, self.cmax = node, max_concurrency
        self.rankers: list[_Rates] = [_Rates({j.name: j.solo_s for j in jobs}), _Regret(node, jobs, max_concurrency)]

    def allocations(self, free: set[int], places: int) -> list[Allocation]:
        node = self.node
        taken = set(node.cpus) - free
        f = len(free)
        sizes = {f, f // max(1, places), len(node.cpus) // self.cmax, f // 2}
        sizes |= {len(free & set(d.cpus)) for d in node.numa}
        out, seen = [], set()
        for n in sorted(s for s in sizes if 1 <= s <= f):
            for affinity in ("compact", "distributed"):
                cpus = assign_cpus(node, n, affinity, taken)
                if cpus is None or tuple(cpus) in seen:
                    continue
                seen.add(tuple(cpus))
                out.append(plain_allocation(node, cpus))
                if len({node.numa_of(c) for c in cpus}) > 1:
                    out.append(plain_allocation(node, cpus, "interleave"))
        return out

    def ranked(self, sim: StreamNode, queue: Sequence[StreamJob], places: int) -> list[Start]:
        free = sim.free_cpus()
        if not queue or places < 1 or not free:
            return []
        allocs = self.allocations(free, places)
        pairs = [(j, a) for j in _distinct(queue, self.window) for a in allocs]
        orders = [sorted(range(len(pairs)), key=lambda k: (-r.with_job(sim, *pairs[k]), k)) for r in self.rankers]
        out: list[int] = []
        for ks in zip(*orders):
            out.extend(k for k in ks if k not in out)
        return [pairs[k] for k in out]


def play_out(sim: StreamNode, queue: list[StreamJob], cmax: int, base: Fill | PackingBase, objective: str,
             ends: list[float] | None = None, held: float = 0.0) -> float:
    """The known jobs decided by ``base`` from this state to the last end, on ``sim`` (which it may change, as
    ``queue``): the objective's value (lower is better) over the jobs that end from now on, and ``ends`` (those that
    ended since the search's event); ``held``: the node-seconds the known jobs held since then (``objective_value``)."""
    if type(base) is Fill:  # the same play in C where the node's kernel is built (the same value, to the bit)
        value = base.play_c(sim, queue, cmax, objective, ends or [], held)
        if value is not None:
            return value
    ends = list(ends or [])
    while True:
        places = cmax - len(sim.running)
        while (s := base.next_start(sim, queue, places)) is not None:
            j, alloc = s
            sim.start(j.id, j.name, j.params, alloc)
            queue.remove(j)
            places -= 1
        if not sim.running:
            break
        held += advance(sim, ends)
    return objective_value(ends, held, objective)


def advance(sim: StreamNode, ends: list[float]) -> float:
    """``sim`` to its next end, the ends it brings added to ``ends``: the node-seconds its running jobs held meanwhile
    (their CPUs over the node's, times the time passed)."""
    t0, before = sim.now, len(sim.ended)
    busy = sum(len(r.alloc.cpus) for r in sim.running.values())
    sim.advance()
    ends.extend([sim.now] * (len(sim.ended) - before))
    return busy / len(sim.node.cpus) * (sim.now - t0)


#: With arrivals, the node-seconds the known jobs hold count as the wait of one job not yet arrived: the next job
#: to come finds the node that much later. Without it the known jobs' turnaround alone is minimised, and every
#: start looks best on all the free CPUs, which the next arrival then waits for. Chosen on seeds 1-3 (weights 0,
#: 0.5, 0.75, 1, 1.25, 1.5, 2, 3: the mean turnaround / packing's fell from 0.886 to 0.851 at 1, geometric mean
#: over Cmax 2-4 and 70/90 % load; docs/continuous.md).
HOLD_WEIGHT = 1.0

#: With arrivals, a start is valued by rollout's own play of the jobs known (one level deeper than ``Fill``'s) while
#: they are at most this many: the cost of a decision then stays within tens of milliseconds, since with arrivals
#: few jobs are known at a time. It lowered the mean turnaround / packing's on the design streams (docs/continuous.md);
#: saturated streams (every job known) keep ``Fill``'s play-outs, where one level deeper costs seconds a decision.
DEEP_MAX = 16


def objective_value(ends: list[float], held: float, objective: str) -> float:
    """What the searches minimise: the last end (makespan: saturated streams) or the sum of the ends plus
    ``HOLD_WEIGHT`` x the node-seconds held (turnaround: streams with arrivals)."""
    if not ends:
        return 0.0
    return sum(ends) + HOLD_WEIGHT * held if objective == "turnaround" else max(ends)


class Rollout:
    """The continuous decision by rollouts on the node model (see the module docstring). With ``guard`` (the
    default), at its first decision it plays itself forward over the jobs it knows and compares with packing from
    the same state (under the makespan objective, packing's slots in queue order or longest first, whichever the model
    predicts shorter); when that is predicted better, it decides so for the rest of the stream and says why in every
    decision's note (so it is never below packing's predicted outcome on the model). Otherwise the decisions
    of that play are given again at each later event where the node is where the play had it (same time, running
    jobs and queue: on the node model, always, so the guard costs nothing); elsewhere it searches anew."""

    name = "rollout"

    def __init__(self, window: int = DEFAULT_STREAM_WINDOW, candidates: int = DEFAULT_CANDIDATES,
                 objective: str = "auto", guard: bool = True, margin: float | None = None, deep: bool = True) -> None:
        if objective not in ("auto", "makespan", "turnaround"):
            raise ValueError(f"objective {objective!r}: choose auto, makespan or turnaround")
        if margin is not None and not 0.0 <= margin < 1.0:
            raise ValueError(f"margin {margin}: a fraction in [0, 1)")
        self.window, self.candidates, self.objective, self.guard = window, candidates, objective, guard
        self.margin_given, self.deep = margin, deep

    def reset(self, node: NodeSpec, jobs: Sequence[StreamJob], max_concurrency: int) -> None:
        from env.calibration.learned import model_uncertainty

        self.cmax = max_concurrency
        # On a node model that stands for a real node, decisions allow for its error (_robust); none on a simulated one.
        self.margin = model_uncertainty(node) if self.margin_given is None else self.margin_given
        arrivals = len({j.submit_s for j in jobs}) > 1
        self.goal = self.objective if self.objective != "auto" else ("turnaround" if arrivals else "makespan")
        self.base = Fill(self.window)
        self.base.reset(node, jobs, max_concurrency)
        self.proposals = Proposals(self.window)
        self.proposals.reset(node, jobs, max_concurrency)
        self.packing = PackingBase()
        self.packing.reset(node, jobs, max_concurrency)
        self.longest = PackingBase(self.window)  # packing's slots, longest first: the guard's other reference
        self.longest.reset(node, jobs, max_concurrency)
        self.inner: Rollout | None = None  # the play-outs' policy one level deeper (turnaround: DEEP_MAX)
        if self.deep:
            self.inner = Rollout(self.window, self.candidates, self.goal, guard=False, margin=0.0, deep=False)
            self.inner.reset(node, jobs, max_concurrency)
        self.checked = not self.guard  # the first decision checks against packing
        self.played: list[tuple[float, frozenset[str], frozenset[str], Decision]] = []  # the check's decisions
        self.fallback = ""  # why it decides as packing, once the check said so
        self.fallback_base = self.packing  # and in which order: packing's, or longest first

    def _value(self, sim: StreamNode, queue: list[StreamJob], start: Start | None) -> float:
        if self.inner is not None and self.goal == "turnaround" and len(queue) + len(sim.running) <= DEEP_MAX:
            return self._deep_value(sim, queue, start)
        sim, queue, ended, held = sim.fork(), list(queue), [], 0.0
        if start is None:  # nothing more starts now: the next event comes first
            if not sim.running:
                return math.inf
            held = advance(sim, ended)
        else:
            j, alloc = start
            sim.start(j.id, j.name, j.params, alloc)
            queue.remove(j)
        return play_out(sim, queue, self.cmax, self.base, self.goal, ended, held)

    def _deep_value(self, sim: StreamNode, queue: list[StreamJob], start: Start | None) -> float:
        """``start`` now (None: the next event first), then ``inner`` (rollout) deciding at every event: the
        objective over the jobs known. One level deeper than ``Fill``'s play-out, and the dearer."""
        assert self.inner is not None  # deep=True
        sim, queue, ends, held = sim.fork(), list(queue), [], 0.0
        if start is None:
            if not sim.running:
                return math.inf
            held = advance(sim, ends)
        else:
            j, alloc = start
            sim.start(j.id, j.name, j.params, alloc)
            queue.remove(j)
        while queue or sim.running:
            for jid, alloc in (self.inner.search(StreamView(sim, queue, self.cmax, 0)).starts if queue else ()):
                j = next(x for x in queue if x.id == jid)
                sim.start(jid, j.name, j.params, alloc)
                queue.remove(j)
            if not sim.running:
                break  # nothing started with nothing running: the play cannot go on (the run's own check says so)
            held += advance(sim, ends)
        return objective_value(ends, held, self.goal) if not queue else math.inf

    def decide(self, view: StreamView) -> Decision:
        if not self.checked and view.queue:
            self.checked = True
            self.fallback = self._check(view)
        if self.fallback:
            return Decision(starts=tuple(self._starts(view.sim, list(view.queue), view.places(), self.fallback_base)),
                            note=self.fallback)
        while self.played:  # the check's own play, while the node is where it predicted (the model is deterministic)
            (t, running, queued, d), self.played = self.played[0], self.played[1:]
            if (abs(t - view.now) <= 1e-9 * max(1.0, t) and running == frozenset(view.running)
                    and queued == frozenset(j.id for j in view.queue)):
                return d
            self.played = []
        return self.search(view)

    def search(self, view: StreamView) -> Decision:
        """The decision searched by rollouts (no guard)."""
        sim, queue = view.sim.fork(), list(view.queue)
        places, starts = view.places(), []
        while True:
            base = self.base.next_start(sim, queue, places)
            if base is None:
                break
            options = self._options(sim, queue, places, base)
            values = [self._value(sim, queue, o) for o in options]
            best = min(range(len(options)), key=lambda k: (values[k], k))
            if self.margin > 0:
                best = self._robust(sim, options, values)
            choice = options[best]
            if choice is None:
                break
            j, alloc = choice
            sim.start(j.id, j.name, j.params, alloc)
            queue.remove(j)
            starts.append((j.id, alloc))
            places -= 1
        return Decision(starts=tuple(starts)) if starts else WAIT

    def _options(self, sim: StreamNode, queue: list[StreamJob], places: int, base: Start) -> list[Start | None]:
        """The candidates of one start: the base's, the best ``candidates`` of ``Proposals``, and nothing more now
        (when something runs)."""
        options: list[Start | None] = [base]
        for s in self.proposals.ranked(sim, queue, places):
            if len(options) > self.candidates:
                break
            if s[0].name != base[0].name or s[1] != base[1]:
                options.append(s)
        if sim.running:
            options.append(None)
        return options

    def _robust(self, sim: StreamNode, options: list[Start | None], values: list[float]) -> int:
        """The choice on a model that stands for a real node and may be wrong by ``margin``. It never stops with a
        CPU free while a job could start there: the idle CPU is certain, the predicted gain was not (measured on this
        node: waits predicted to gain more than the model's p90 held-out error lost to packing, docs/continuous.md).
        Among the starts within ``margin`` of the best, under the makespan objective, the longest job first (on its
        allocation, alone), so that what the model mispredicts is not left to the end of the stream."""
        # the search offers starts only while a CPU is free, so stopping (None, the last option) always idles one
        starts = [k for k, o in enumerate(options) if o is not None]
        first = min(starts, key=lambda k: (values[k], k))
        if self.goal != "makespan":
            return first
        near = [k for k in starts if values[k] - sim.now <= (1.0 + self.margin) * (values[first] - sim.now)]
        return max(near, key=lambda k: (_alone(sim, *options[k]), -values[k], -k))  # type: ignore[misc]

    @staticmethod
    def _starts(sim: StreamNode, queue: list[StreamJob], places: int, base: Fill | PackingBase
                ) -> list[tuple[str, Allocation]]:
        sim, out = sim.fork(), []
        while (s := base.next_start(sim, queue, places)) is not None:
            j, alloc = s
            sim.start(j.id, j.name, j.params, alloc)
            queue.remove(j)
            out.append((j.id, alloc))
            places -= 1
        return out

    def _check(self, view: StreamView) -> str:
        """This policy's searched decisions played forward over the jobs it knows, against packing's from the same
        state: a note saying why it falls back to packing, or "" (it decides by search)."""
        sim, queue, ends, played, held = view.sim.fork(), list(view.queue), [], [], 0.0
        while queue or sim.running:
            d = self.search(StreamView(sim, queue, self.cmax, 0))
            played.append((sim.now, frozenset(sim.running), frozenset(j.id for j in queue), d))
            for jid, alloc in d.changes:
                sim.apply(jid, alloc)
            for jid, alloc in d.starts:
                j = next(x for x in queue if x.id == jid)
                sim.start(jid, j.name, j.params, alloc)
                queue.remove(j)
            if not sim.running:
                return ""  # it would start nothing: nothing to compare (the loop's own check says so)
            held += advance(sim, ends)
        own = objective_value(ends, held, self.goal)
        self.played = played
        packed = play_out(view.sim.fork(), list(view.queue), self.cmax, self.packing, self.goal)
        base, name = self.packing, "packing"
        if self.goal == "makespan":  # the same slots, the longest job first, where predicted shorter than queue order
            longest = play_out(view.sim.fork(), list(view.queue), self.cmax, self.longest, self.goal)
            if longest < packed * (1.0 - 1e-9):
                packed, base, name = longest, self.longest, "packing's slots, longest first"
        note = ""
        if packed < own * (1.0 - 1e-9):
            what = "makespan" if self.goal == "makespan" else "sum of ends and node-seconds held"
            note = (f"decided as packing ({name}): its predicted {what} ({packed:.1f} s) beats this policy's "
                    f"({own:.1f} s) on the node model, over the {len(view.queue)} queued jobs it played forward")
        elif self.margin > 0 and self.goal == "makespan" and packed - own <= self.margin * (packed - view.now):
            # a model that stands for a real node may be wrong by its error: a gain within it is no gain (measured on
            # this node, packing ran windows of new programs as well as or better than every plan predicted a few
            # per cent better: docs/real-node.md)
            note = (f"decided as packing ({name}): this policy's predicted makespan ({own - view.now:.1f} s) is not "
                    f"shorter than that ({packed - view.now:.1f} s) by more than the node model's error "
                    f"({self.margin * 100:.0f} %, the p90 of its held-out errors)")
        if note:
            self.fallback_base = base
        return note


__all__ = ["Fill", "PackingBase", "Proposals", "Rollout", "play_out", "advance", "objective_value",
           "HOLD_WEIGHT", "DEEP_MAX", "slots", "DEFAULT_CANDIDATES"]
