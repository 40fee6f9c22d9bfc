"""The search as an expert *from any state* (sim only): DAgger-style labels for the states the agent visits.

A demonstration (``training.demos``) shows the agent the search's plan from the start of a window. Replayed by
the actor, one wrong step leads to states the demonstrations never show, and errors compound (the classic
problem of sequential imitation). DAgger fixes it: run the current policy, ask the expert which action it
would take in *each visited state*, add those (state, action) pairs to the cloning data, repeat.

The expert here is the simulated node's search (``env.planners.baselines``: the ``GroupEvaluator`` and the per-subset
optimiser of ``best-found``, on the teacher's reduced grid) completed from the episode's state:

* step 0 (the schedule-level action): the search's schedule for the window;
* later: the closed groups are fixed; the open group holds fixed members F (their actions fixed too). For every
  set S of remaining jobs that may still join it (``|F| + |S| <= Cmax``), the open group's makespan with S added
  (S's actions optimised with F fixed, in queue order) plus the best partition of the other remaining jobs
  (dynamic programming over per-subset optimised groups, as ``best-found`` does) is the predicted remaining
  time; the expert takes the best S. Its action: the current job's action when the current job is in S, skip
  otherwise (skipping every remaining job is how an open group closes early). With an empty open group the
  expert opens the best partition's group that holds the current job.

The windows it plans are the agent's training windows (training jobs only): never the evaluation windows.
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any

import numpy as np

from env.plan.actions import SKIP
from env.episode.planning import placed_actions

_INF = float("inf")

TEACHER_GRID = dict(schedules=(0, 3), ways=(Fraction(4, 22), Fraction(8, 22), Fraction(22, 22)), bw=(60, 100),
                    splits=("balanced",))


def teacher_grid() -> Any:
    from env.planners.baselines import Grid

    return Grid(**TEACHER_GRID)


def make_expert(setup: Any, cfg: Any) -> Any:
    """The search as an expert from any state (``training.expert``) on the configured grid."""
    return Expert(setup.node, expert_grid(getattr(cfg, "expert_grid", "cores")))


def expert_grid(name: str) -> Any:
    """``cores``: core options only (all ways, no bandwidth cap, balanced; schedules compact and distributed
    first-touch): on the standard evaluation windows the expert plans 1.512 vs best-found's 1.520 (99.5 %) at a
    tenth of the cost, and its labels are far easier to imitate. ``teacher``: ``TEACHER_GRID``."""
    from env.planners.baselines import Grid

    if name == "cores":
        return Grid(schedules=(0, 3), ways=(Fraction(22, 22),), bw=(100,), splits=("balanced",))
    if name == "teacher":
        return teacher_grid()
    raise ValueError(f"unknown expert grid {name!r}: choose cores or teacher")




class Expert:
    """The search's best action from an episode state (one instance per node; memoises per window)."""

    def __init__(self, node: Any, grid: Any | None = None, *, rounds: int = 2, join_tolerance: float = 0.0) -> None:
        from env.planners.baselines import GroupEvaluator
        self.node = node
        self.grid = grid if grid is not None else teacher_grid()
        self.rounds = rounds
        self.join_tolerance = join_tolerance  # take the current job when that is within this fraction of the best
        self.ev = GroupEvaluator(node)
        self.n_cpus = len(node.cpus)
        self._window: tuple | None = None
        self._schedule: int | None = None
        self._sub: dict[tuple, dict[int, tuple[float, list[int]]]] = {}
        self._open: dict[tuple, tuple[float, list[int]]] = {}
        self._groups: dict[tuple, tuple[float, list[int]]] = {}  # (schedule, names sorted) -> best group
        self._schedules: dict[tuple, int] = {}
        #: after ``action`` in a state with an open group: (remaining time when the current job joins it, when it
        #: does not), each completed as well as the expert can; None in other states (``skip_target``)
        self.last_values: tuple[float, float] | None = None

    # ------------------------------------------------------------------------------------------- api
    def action(self, ep: Any) -> int:
        """The expert's action in the episode's current state (always valid in ``ep.action_mask()``)."""
        names = tuple(i.name for i in ep.infos)
        key = (names, ep.max_concurrency)
        if key != self._window:
            self._window, self._schedule = key, self._schedules.get(key)
            self._sub = {}
            if len(self._open) > 200_000:
                self._open = {}
            if len(self.ev.memo) > 400_000:  # bound the memory of a long run
                from env.planners.baselines import GroupEvaluator

                self.ev = GroupEvaluator(self.node)
        mask = ep.action_mask()
        self.last_values = None
        if ep.schedule_index is None:
            if self._schedule is None:

                self._schedule = self._best_schedule(names, ep.max_concurrency)
                self._schedules[key] = self._schedule
            return self._schedule
        a = self._job_action(ep, names)
        if not mask[a]:  # cannot happen for a consistent state; never return a masked action
            a = SKIP if mask[SKIP] else int(np.flatnonzero(mask)[0])
        return a

    # --------------------------------------------------------------------------------------- helpers
    def _best_schedule(self, names: tuple[str, ...], cmax: int) -> int:
        """The grid's schedule action whose best partition (per-subset optimised groups, DP) is the shortest."""
        full = (1 << len(names)) - 1
        best = min(self.grid.schedules, key=lambda sc: (self._dp(self._sub_for(sc, names, cmax), full)[0], sc))
        return int(best)

    def _sub_for(self, schedule: int, names: tuple[str, ...], cmax: int) -> dict[int, tuple[float, list[int]]]:
        """Per subset (bitmask over the window's slots) of at most Cmax jobs: best makespan and actions.
        A subset's optimisation depends only on its jobs (optimised in name order), so it is memoised across
        windows: with a dozen training jobs most windows are planned from the memo."""
        key = (schedule, names, cmax)
        sub = self._sub.get(key)
        if sub is None:
            from env.planners.bestfound import _optimise_subset

            w = len(names)
            sub = {}
            for m in range(1, 1 << w):
                if bin(m).count("1") <= cmax:
                    slots = [i for i in range(w) if m >> i & 1]  # slot order: the order the jobs are placed in (it matters: ~1 % on the evaluation windows)
                    gkey = (schedule, tuple(names[i] for i in slots))
                    hit = self._groups.get(gkey)
                    if hit is None:
                        hit = _optimise_subset(self.ev, schedule, list(gkey[1]), self.grid, rounds=self.rounds, starts=2)
                        self._groups[gkey] = hit
                    t, acts = hit
                    if not acts:  # no core split fits (more jobs than the node has CPUs): never a group
                        continue
                    by_slot = dict(zip(slots, acts))
                    sub[m] = (t, [by_slot[i] for i in range(w) if m >> i & 1])
            self._sub[key] = sub
        return sub

    @staticmethod
    def _dp(sub: dict[int, tuple[float, list[int]]], full: int) -> tuple[float, dict[int, int]]:
        from env.planners.partitions import best_partition

        if full == 0:
            return 0.0, {0: 0}
        return best_partition({g: t for g, (t, _) in sub.items()}, full)

    def _fill_open(self, schedule: int, fixed: list[tuple[str, int]], new: list[str], free: int) -> tuple[float, list[int]]:
        """Best actions for ``new`` jobs joining a group whose first members (and actions) are ``fixed``."""
        key = (schedule, tuple(fixed), tuple(new), free)
        hit = self._open.get(key)
        if hit is not None:
            return hit
        g, ev = self.grid, self.ev
        if not new:
            res = (ev.makespan(schedule, fixed), [])
            self._open[key] = res
            return res
        from env.planners.bestfound import _optimise_subset

        self._open[key] = _optimise_subset(ev, schedule, new, g, self.rounds, starts=2, fixed=fixed, free=free)
        return self._open[key]

    def _job_action(self, ep: Any, names: tuple[str, ...]) -> int:
        schedule = int(ep.schedule_index)
        cmax = ep.max_concurrency
        act_of = placed_actions(ep)
        queue = list(ep.queue)  # current first
        cur = queue[0]
        rem_mask = sum(1 << s for s in queue)
        sub = self._sub_for(schedule, names, cmax)
        if not ep.open_slots:
            _, choice = self._dp(sub, rem_mask)
            # the optimal partition's group holding the current job: open it now
            m = rem_mask
            while m:
                grp = choice[m]
                if grp >> cur & 1:
                    slots = [i for i in range(len(names)) if grp >> i & 1]
                    return sub[grp][1][slots.index(cur)]
                m ^= grp
            return SKIP  # not reached
        fixed = [(names[s], act_of[s]) for s in ep.open_slots]
        free = ep.free_cpus()
        room = cmax - len(ep.open_slots)
        best = (_INF, SKIP)
        best_join = (_INF, SKIP)
        best_skip = _INF
        for k in range(0, min(room, len(queue)) + 1):
            for S in itertools.combinations(queue, k):  # queue order: the order they would be placed
                t_open, acts = self._fill_open(schedule, fixed, [names[s] for s in S], free)
                if t_open == _INF:
                    continue
                rest = rem_mask & ~sum(1 << s for s in S)
                t_rest, _ = self._dp(sub, rest)
                t = t_open + t_rest
                if t < best[0] - 1e-9:
                    a = acts[S.index(cur)] if cur in S else SKIP
                    best = (t, a, S)
                if cur in S and t < best_join[0] - 1e-9:
                    best_join = (t, acts[S.index(cur)], S)
                if cur not in S:
                    best_skip = min(best_skip, t)
        if self.join_tolerance > 0 and best_join[0] <= best[0] * (1.0 + self.join_tolerance):
            best = best_join  # near-optimal and simpler to imitate: take the current job now
        self.last_join = best[2] if len(best) > 2 else None  # the jobs the expert would still add (diagnostics)
        self.last_values = (best_join[0], best_skip)
        return best[1]


def skip_target(values: tuple[float, float] | None, tau: float) -> float:
    """The soft label of *skip* in a join-or-skip state (cost-sensitive imitation, after AggreVaTe: the actor learns
    how much worse the other choice is, not only which is best): ``sigmoid((t_join - t_skip) / (tau * t_best))``,
    t = the expert's predicted remaining time after joining / skipping (``Expert.last_values``). A near tie gives
    about one half (the label says little), a choice a few ``tau`` worse gives about 0 or 1. -1 (use the hard
    label): ``tau`` 0, no open group, or one of the two choices impossible."""
    if tau <= 0 or values is None:
        return -1.0
    t_join, t_skip = values
    if not (t_join < _INF and t_skip < _INF):
        return -1.0
    z = (t_join - t_skip) / (tau * min(t_join, t_skip))
    return float(1.0 / (1.0 + np.exp(-np.clip(z, -50.0, 50.0))))


__all__ = ["Expert", "skip_target"]
