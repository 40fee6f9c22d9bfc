"""Agent-guided search at planning time (``agent-search``) and the time-sharing guard every plan passes.

The search (a best-first *rollout* search, after Bertsekas' rollout algorithms and limited discrepancy search):

* the agent's own greedy episode is the first rollout, so the search never returns a plan predicted worse than
  the agent alone;
* every state the agent's rollout passed through offers the agent's other valid actions as *branches*; a
  branch's cost is its discrepancy from the agent, ``score(chosen) - score(branch)`` (scores are logits or
  log-probabilities: both give the same differences), so the branches the agent nearly took come first. Branches
  are expanded in order of their discrepancies (one, then two...: limited discrepancy search) and cost; a rollout
  offers branches of its own only when the ones pending cannot fill the budget (at the default budget, only the
  agent's rollout does: the later ones need no scores of every action, only the agent's choices);
* expanding a branch = replaying its prefix, taking the branch's action, and completing the episode with the
  agent's greedy choices (one rollout); the completed plan is scored on the node model (``Scorer``: the sum of
  its groups' makespans; ``env.planners.baselines.GroupEvaluator`` on a simulated node or a node-model file, whose memo
  makes repeated groups free);
* finally the groups every rollout scored are recombined: the best partition of the chunk into already-scored
  groups, plus every pair of the chunk's jobs at its best core split (``pair_groups``, like ``pairs``: a
  fixed amount of work a chunk), per schedule action, by dynamic programming over subsets as ``best-found`` does, so a
  good group found in one rollout and another found in a second make one plan;
* then a local search (``env.planners.localsearch``) from the best plan and each rollout's grouping moves jobs between
  groups (bounded by the members' times alone, so most moves cost no call), and tunes the final groups' options,
  within ``budget x CALLS_PER_ROLLOUT`` node-model calls; the recombination runs again over every group it scored;
* the best plan wins. The budget counts rollouts and node-model calls, not seconds, so the same window gives the
  same plan on any machine. (More budget is not guaranteed to find a better plan: the local search starts from
  different rollouts. It never returns one worse than the agent's.)

The search takes the agent through a small interface, ``ActionScores`` (``env`` does not import ``agent/`` or
``training/``): every action's scores in an episode's state (the actor's logits, or log-probabilities) and the greedy
choice they imply (the first maximal valid index, as the agent's chooser picks). An agent with a cheaper way to its
choice says so (``cheap_choice``): rollouts that cannot be expanded within the budget are then completed by
``choose`` alone; one that can score many states in one pass (``batched``: ``observe`` and ``scores_many``) has a
rollout that offers branches played by ``choose`` and its states scored after it, in one batch (the same scores as
one at a time, up to float32 rounding). The set-encoder model plans any window of up to 32 jobs (SET_MAX_WINDOW) as
one chunk, so the search sees every partition the agent can reach (``env.planners.agent_search`` plans a window so).
Bounded work for a
long chunk: up to RECOMBINE_MAX_JOBS (10) jobs the recombination is the subset DP (3^W steps, 59,049 at 10); above,
a depth-first search over the groups seen, which gives up after RECOMBINE_MAX_STEPS (3^10) groups tried (the best
rollout then stands); pair candidates only up to PAIR_MAX_JOBS (12) jobs (66 pairs). A 32-job window costs the
budget's rollouts plus at most that fixed amount.

The guard (``guard_plan``): a plan predicted below time sharing (throughput < 1 on the node model) is replaced by
the best baseline's plan (predicted), and says which policy asked, which made it, and why.
"""

from __future__ import annotations

import heapq
import itertools
import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from env.episode.window import Episode

from env.episode.planning import group_members, placed_groups
from env.planners.scoring import Scorer
from env.planners.localsearch import CALLS_PER_ROLLOUT, LocalSearch, regroup, tune

#: Rollouts a chunk gets by default (and CALLS_PER_ROLLOUT = 80 local-search calls each: 320), for the W = 8 latency
#: target (<= 50 ms a window, median, one core; bench/search_bench.py: cold evaluator memo, the shared 2-CPU machine,
#: so noisy). Chosen on the development sweep (seed 3131; docs/search.md, 2026-11-26): with branches in order of
#: discrepancies, 4 rollouts x 80 calls plan as well as 8 x 40 (worst cell 98.9 %, mean 99.71 vs 99.81 %), and the
#: local search's calls, not the rollouts, are what the quality needs (1 x 320: worst cell 98.4 %; 4 x 64: 98.1 %).
DEFAULT_BUDGET = 4
MAX_BUDGET = 10_000
#: What --search-budget means, for every command that takes it.
BUDGET_HELP = (f"agent-search: rollouts per window chunk, and {CALLS_PER_ROLLOUT} node-model calls of local search per "
               f"rollout (counts work, not time: the same window gives the same plan; default {DEFAULT_BUDGET})")
#: Branches kept per visited state: the agent's next-best valid actions (more are rarely expanded within a budget).
BRANCHES_PER_STATE = 4

Seen = dict[int, dict[int, tuple[float, list[tuple[int, int]]]]]  # schedule -> slot bitmask -> (makespan, members)


class ActionScores:
    """What the search asks of an agent. Override ``scores``; the rest has defaults."""

    cheap_choice = False  # ``choose`` costs less than ``scores``: unexpandable rollouts are completed by it alone
    batched = False  # ``observe`` and ``scores_many`` score a rollout's states in one pass (needs cheap_choice)

    def scores(self, mask: np.ndarray, ep: Episode) -> np.ndarray:
        """A score per action in ``ep``'s state (higher: the agent prefers it)."""
        raise NotImplementedError

    def choose(self, mask: np.ndarray, ep: Episode) -> int:
        """The agent's greedy action: the first maximal valid index of its scores."""
        return _greedy(np.asarray(self.scores(mask, ep), dtype=np.float64), mask.nonzero()[0])

    def observe(self, ep: Episode) -> object:
        """What ``scores_many`` needs of a state, taken before the rollout moves on."""
        raise NotImplementedError

    def scores_many(self, observed: Sequence[object], masks: Sequence[np.ndarray], chosen: Sequence[int]) -> np.ndarray:
        """``scores`` of several states (rows), from their ``observe`` and the actions the agent chose there."""
        raise NotImplementedError


class FunctionScores(ActionScores):
    """An agent given as a function ``scores(mask, episode)`` (tests, the learner's search distillation)."""

    def __init__(self, fn: Callable[[np.ndarray, Episode], np.ndarray]) -> None:
        self.fn = fn

    def scores(self, mask: np.ndarray, ep: Episode) -> np.ndarray:
        return self.fn(mask, ep)


def check_budget(budget: int) -> int:
    from env.errors import InputError

    if isinstance(budget, bool) or not isinstance(budget, int) or not 1 <= budget <= MAX_BUDGET:
        raise InputError(f"--search-budget must be a whole number of rollouts from 1 to {MAX_BUDGET}, not {budget!r} "
                         f"(default {DEFAULT_BUDGET})")
    return budget


def episode_makespans(ep: Episode, scorer: Scorer) -> list[float]:
    assert ep.schedule_index is not None
    return [scorer(ep.schedule_index, members) for members in group_members(ep)]


@dataclass
class SearchResult:
    """The best action sequence found for one chunk, its predicted group makespans, and what it cost."""

    actions: list[int]
    makespans: list[float]
    agent_total_s: float  # the agent's own plan (the first rollout), predicted
    rollouts: int
    local_calls: int = 0  # node-model calls of the local search (env.planners.localsearch)

    @property
    def total_s(self) -> float:
        return sum(self.makespans)


@dataclass(order=True)
class _Branch:
    depth: int  # discrepancies from the agent's own plan: every branch of the agent's rollout comes first
    cost: float
    seq: int  # ties: first pushed first (deterministic)
    prefix: tuple[int, ...] = field(compare=False)


def _offer(heap: list[_Branch], counter: "itertools.count[int]", s: np.ndarray, a: int, valid: np.ndarray,
           here: tuple[int, ...], depth: int, base_cost: float, branches: int) -> None:
    """Push the ``branches`` best other valid actions of the state after ``here`` (scores ``s``, the agent's choice
    ``a``) as branches of ``depth`` discrepancies, each costing its score gap more than ``base_cost``."""
    others = valid[valid != a]
    for alt in others[np.argsort(-s[others], kind="stable")[:branches]]:
        gap = float(s[a] - s[alt])
        if math.isfinite(gap):
            heapq.heappush(heap, _Branch(depth, base_cost + gap, next(counter), here + (int(alt),)))


def _greedy(scores: np.ndarray, valid: np.ndarray) -> int:
    """The agent's greedy rule: the first maximal valid index."""
    return int(valid[scores[valid].argmax()])


def search_chunk(new_episode: Callable[[], Episode], scores: ActionScores, scorer: Scorer, budget: int = DEFAULT_BUDGET,
                 branches: int = BRANCHES_PER_STATE, pairs: bool = True, local: bool = True) -> SearchResult:
    """Best-first rollout search over one chunk's episodes (``new_episode`` makes a fresh one each call), then
    (``pairs``) every pair of its jobs under the agent's schedule action, then the recombination."""
    ep, best, agent_total, agent_schedule, rollouts, plans, seen = _rollouts(new_episode, scores, scorer, budget, branches)
    result = SearchResult(actions=best[1], makespans=best[2], agent_total_s=agent_total, rollouts=rollouts)
    if pairs and len(ep.jobs) <= PAIR_MAX_JOBS:
        pair_groups(ep, agent_schedule, scorer, seen)  # the agent's schedule: the same for any budget
    result = recombine(result, seen, new_episode, scorer)
    if local:
        done = new_episode()
        for a in result.actions:
            done._apply(a)
        schedule = int(done.schedule_index)  # type: ignore[arg-type]
        starts = [placed_groups(done)] + [g for _, _, g in sorted(plans)]  # the best plan, then the rollouts' groupings
        names = [i.name for i in done.infos]
        total_calls = budget * CALLS_PER_ROLLOUT
        calls = regroup(done.node, names, done.max_concurrency, schedule, starts, scorer, seen.setdefault(schedule, {}),
                        total_calls // 3)
        # the other affinity, the same memory policy, from the best grouping: spreading jobs over the sockets can win
        # where the rollouts never tried it (the agent's choice of schedule is made before any group)
        other = other_affinity(schedule)
        calls += regroup(done.node, names, done.max_concurrency, other, starts[:1], scorer, seen.setdefault(other, {}),
                         total_calls // 3)
        result = recombine(result, seen, new_episode, scorer)
        done = new_episode()
        for a in result.actions:
            done._apply(a)
        schedule = int(done.schedule_index)  # type: ignore[arg-type]
        calls += tune(done.node, names, schedule, placed_groups(done), scorer, seen[schedule], total_calls - calls)
        result = recombine(result, seen, new_episode, scorer)
        result.local_calls = calls
    return result


def _rollouts(new_episode: Callable[[], Episode], scores: ActionScores, scorer: Scorer, budget: int,
              branches: int) -> tuple[Episode, tuple[float, list[int], list[float]], float, int, int,
                                      list[tuple[float, int, list[list[tuple[int, int]]]]], Seen]:
    """The budget's rollouts (see the module's docstring): (the last episode, the best (total, actions, makespans),
    the agent's total, its schedule action, rollouts made, every rollout's (total, index, groups), the groups seen).
    A rollout offers branches only while the heap holds fewer than the budget still needs: then every state's
    scores are computed; otherwise it is completed by the agent's chooser (``scores.choose``, when given: the
    same greedy action, without the scores of every action)."""
    cheap = scores.cheap_choice
    batched = cheap and scores.batched
    heap: list[_Branch] = []
    seen: Seen = {}  # see seen_groups
    counter = itertools.count()
    best: tuple[float, list[int], list[float]] | None = None
    agent_total, agent_schedule = math.inf, 0
    rollouts = 0
    plans: list[tuple[float, int, list[list[tuple[int, int]]]]] = []  # every rollout's (total, index, groups)
    prefix: tuple[int, ...] = ()
    depth, base_cost = 0, 0.0
    while True:
        ep = new_episode()
        for a in prefix:
            ep._apply(a)  # the prefix was valid when it was recorded, in this very sequence of states
        grow = not cheap or len(heap) < budget - rollouts - 1  # its branches may be expanded within the budget
        pending: list[tuple[tuple[int, ...], np.ndarray, int, np.ndarray, object]] = []  # states to score in one pass
        while not ep.done:
            mask = ep.action_mask()
            valid = mask.nonzero()[0]
            if valid.size == 1:
                ep._apply(int(valid[0]))
                continue
            if not grow:
                ep._apply(int(scores.choose(mask, ep)))
                continue
            if batched:  # the agent's choice now, every action's scores after the rollout
                a = int(scores.choose(mask, ep))
                if len(ep.history) >= len(prefix):
                    pending.append((tuple(ep.history), valid, a, mask, scores.observe(ep)))
                ep._apply(a)
                continue
            s = np.asarray(scores.scores(mask, ep), dtype=np.float64)
            a = _greedy(s, valid)
            if len(ep.history) >= len(prefix):
                _offer(heap, counter, s, a, valid, tuple(ep.history), depth + 1, base_cost, branches)
            ep._apply(a)
        if pending:
            rows = scores.scores_many([x[4] for x in pending], [x[3] for x in pending], [x[2] for x in pending])
            for (here, valid, a, _, _), s in zip(pending, np.asarray(rows, dtype=np.float64)):
                _offer(heap, counter, s, a, valid, here, depth + 1, base_cost, branches)
        rollouts += 1
        makespans = episode_makespans(ep, scorer)
        total = sum(makespans)
        if rollouts == 1:
            agent_total, agent_schedule = total, ep.history[0]
        if best is None or total < best[0] - 1e-9:
            best = (total, list(ep.history), makespans)
        seen_groups(ep, makespans, seen)
        plans.append((total, rollouts, placed_groups(ep)))
        if rollouts >= budget or not heap:
            break
        nxt = heapq.heappop(heap)
        prefix, depth, base_cost = nxt.prefix, nxt.depth, nxt.cost
    return ep, best, agent_total, agent_schedule, rollouts, plans, seen


def other_affinity(schedule: int) -> int:
    """The schedule action with the other core affinity and the same memory policy."""
    from env.plan.actions import AFFINITIES, ScheduleAction, decode, encode

    s = decode(schedule)
    return encode(ScheduleAction(next(a for a in AFFINITIES if a != s.affinity), s.memory))  # type: ignore[union-attr]


def seen_groups(ep: Episode, makespans: list[float], seen: Seen) -> None:
    """Record a finished rollout's groups: schedule action -> slot bitmask -> (best makespan, [(slot, action)...] in
    placement order). A group's makespan depends only on the schedule and its members in order, so groups seen in
    different rollouts combine freely into other partitions of the window."""
    per = seen.setdefault(int(ep.schedule_index), {})  # type: ignore[arg-type]
    for members, t in zip(placed_groups(ep), makespans):
        mask = sum(1 << slot for slot, _ in members)
        if mask not in per or t < per[mask][0] - 1e-12:
            per[mask] = (t, members)


def pair_groups(ep: Episode, schedule: int, scorer: Scorer, seen: Seen) -> None:
    """Add every pair of the chunk's jobs as a candidate group (like ``pairs``, the paper's OCRP-ML) under
    ``schedule``, each at its best core split: ``env.planners.localsearch.LocalSearch.cost`` (the maximal splits, all ways,
    no cap; a split whose slower member alone is already no faster than the best found is not simulated). A fixed
    amount of work a chunk (at most 15 pairs x 5 splits for 6 jobs; the evaluator's memo makes repeats free), not
    counted in the budget. Where the agent pairs poorly (Cmax 2) the recombination then finds the good pairing."""
    if ep.max_concurrency < 2:
        return
    names = [i.name for i in ep.infos]
    ls = LocalSearch(ep.node, names, 2, schedule, scorer, seen.setdefault(schedule, {}), calls=UNCOUNTED)
    for i, j in itertools.combinations(range(len(names)), 2):
        ls.cost(1 << i | 1 << j)


#: Recombination by the subset DP enumerates submasks (3^W steps): up to this many jobs a chunk (W = 10: 59,049).
#: A longer chunk (a set-encoder model plans up to 32 jobs as one chunk) is recombined by ``sparse_partition``
#: over the groups seen only, which gives up (the best rollout stands) past RECOMBINE_MAX_STEPS steps.
RECOMBINE_MAX_JOBS = 10
RECOMBINE_MAX_STEPS = 3 ** RECOMBINE_MAX_JOBS
#: Pair candidates only for chunks of at most this many jobs (66 pairs x at most 5 splits): beyond, their
#: simulations would cost more than the budget's rollouts (32 jobs: 2,480).
UNCOUNTED = 10**9  # the pairs' node-model calls: bounded by the pairs, not by the budget
PAIR_MAX_JOBS = 12


def sparse_partition(sub: dict[int, float], full: int, max_steps: int = RECOMBINE_MAX_STEPS) -> tuple[float, list[int]] | None:
    """The partition of ``full`` into groups of ``sub`` (bitmask -> makespan) with the least total, or None when
    there is none or finding it takes more than ``max_steps`` candidate groups tried (bounded work, counted, so
    the same on every machine). Depth first from the lowest job not yet placed, memoised on the jobs left: its
    work grows with the groups seen, not with 3^W."""
    by_low: dict[int, list[int]] = {}
    for m in sorted(sub):
        by_low.setdefault(m & -m, []).append(m)
    memo: dict[int, tuple[float, int]] = {0: (0.0, 0)}
    steps = 0

    def solve(left: int) -> float:
        nonlocal steps
        hit = memo.get(left)
        if hit is not None:
            return hit[0]
        best = (math.inf, 0)
        for g in by_low.get(left & -left, ()):
            steps += 1
            if steps > max_steps:
                raise _GiveUp
            if g & left == g:
                t = sub[g] + solve(left ^ g)
                if t < best[0] - 1e-12:
                    best = (t, g)
        memo[left] = best
        return best[0]

    try:
        total = solve(full)
    except _GiveUp:
        return None
    if not math.isfinite(total):
        return None
    groups, m = [], full
    while m:
        groups.append(memo[m][1])
        m ^= memo[m][1]
    return total, groups


class _GiveUp(Exception):
    pass


def recombine(result: SearchResult, seen: Seen,
              new_episode: Callable[[], Episode], scorer: Scorer) -> SearchResult:
    """The best partition of the chunk into groups the rollouts have scored (any mix of rollouts, per schedule
    action: dynamic programming over subsets, ``env.planners.partitions.best_partition``, up to RECOMBINE_MAX_JOBS jobs;
    ``sparse_partition``, bounded, above), replayed through a fresh episode; the result when it predicts less time
    than the best single rollout. No new group is simulated."""
    from env.planners.partitions import best_partition
    from env.planners.script import Script, ScriptChooser

    probe = new_episode()
    n = len(probe.jobs)
    full = (1 << n) - 1
    best: tuple[float, int, list[int]] | None = None
    for schedule in sorted(seen):
        sub = seen[schedule]
        if n <= RECOMBINE_MAX_JOBS:
            total, choice = best_partition({m: t for m, (t, _) in sub.items()}, full)
            masks, m = [], full
            while m and math.isfinite(total):
                masks.append(choice[m])
                m ^= choice[m]
        else:  # a long chunk: over the groups seen only, bounded
            found = sparse_partition({m: t for m, (t, _) in sub.items()}, full)
            if found is None:
                continue
            total, masks = found
        if best is None or total < best[0] - 1e-9:
            best = (total, schedule, masks)
    if best is None or best[0] >= result.total_s - 1e-9:
        return result
    total, schedule, masks = best
    groups = [list(seen[schedule][m][1]) for m in masks]
    groups.sort(key=lambda g: min(slot for slot, _ in g))  # earlier queue jobs first: fewer skips to replay
    chooser = ScriptChooser(Script(schedule, groups))
    ep = probe
    ep.step_limit = 2 * ep.window_size * ep.window_size + 4  # a scripted replay may skip more than a chooser would
    while not ep.done:
        mask = ep.action_mask()
        a = chooser(None, mask, ep)  # type: ignore[arg-type]
        if not mask[a]:
            return result  # not replayable in this episode (cannot happen for groups it played): keep the rollout's
        ep._apply(a)
    makespans = episode_makespans(ep, scorer)
    if sum(makespans) >= result.total_s - 1e-9:
        return result
    return SearchResult(actions=list(ep.history), makespans=makespans, agent_total_s=result.agent_total_s,
                        rollouts=result.rollouts, local_calls=result.local_calls)


class ReplayChooser:
    """Replays an action sequence through an episode (the plan is then built as the agent's is)."""

    def __init__(self, actions: Sequence[int]) -> None:
        self.actions = list(actions)
        self.i = 0

    def __call__(self, obs: np.ndarray, mask: np.ndarray, ep: Episode) -> int:
        a = self.actions[self.i]
        self.i += 1
        return a


__all__ = ["ActionScores", "FunctionScores", "DEFAULT_BUDGET", "SearchResult", "search_chunk", "sparse_partition", "ReplayChooser", "check_budget"]
