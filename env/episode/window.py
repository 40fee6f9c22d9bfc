"""The episode (docs/design/coscheduler.md §3-5): the one code path by which anything plans a window.

The agent, every baseline, ``cosched schedule``, the service and training all drive an ``Episode`` with a
*chooser* ``(obs, mask, episode) -> action``; allocation decisions become a ``Plan`` only through
``env.plan.builder.PlanBuilder``.

Rules, decided here once:

* Step 0 takes a schedule-level action (0-5): affinity and memory policy for the window.
* Each later step concerns the *current* job (the head of the remaining queue): a job-level action places it
  in the open group; skip (256) moves it to the end of the queue.
* The open group closes when it holds Cmax jobs, when no remaining job fits any allocation (fewer free CPUs
  than the smallest core option), or when every remaining job has been skipped since the last allocation.
* Masks: at step 0 only the six schedule actions are open. Afterwards a job-level action is open when it fits
  the open group (``PlanBuilder.fits``); skip is open unless the open group is empty and skipping would have
  skipped every remaining job (that would close an empty group: a loop). After ``step_limit`` steps skip
  closes too, so a chooser always finishes. At least one action is always open.
* The episode terminates when every job is placed. ``truncated`` (gymnasium) is the env's business (its
  limit is 4W + 4 steps); ``plan_window`` allows 2W^2 + 4 steps, enough for any scripted replay.
* Jobs beyond W: ``plan_window`` plans them W at a time in queue order, one episode per chunk on one
  ``PlanBuilder``; jobs without a profile (``provider.get`` is None) go to ``excluded`` with the reason.

State (§4), float32, clipped to [-5, 5]: W slots x (f features from ``profiler.features`` + k = 9 status values
``STATUS_NAMES``), then the node values ``NODE_VALUES`` (free core / way / bandwidth fractions of the open
group, its size / Cmax, whether the schedule action is still to come, the schedule action one-hot, groups
closed / W, jobs remaining / W). Empty slots (windows shorter than W) have zeros and ``empty`` = 1.

Rewards (§5), weighted by ``RewardConfig`` (defaults: the paper's "lightly weighted" guide):

* after each allocation: ``intermediate_weight * rw_i`` with
  ``rw_i = CoreAllocRatio * (ScaleFactorRatio^2 + DurationRatio^2) + (CacheAllocRatio + BWAllocRatio) * L3MissRatio^2``,
  AllocRatios = the job's share of the node's CPUs / ways / bandwidth, feature Ratios = the job's value over the
  window's mean (1 where the figure is missing);
* at termination: ``final_weight * rw_f``, ``rw_f = (SoloRunTime / CoRunTime - 1) * 100``.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Sequence

import numpy as np

from env.plan import actions
from env.plan.actions import SKIP, ScheduleAction
from env.plan.allocate import Allocation, core_count
from env.episode.jobinfo import JobInfo
from env.plan.models import WindowJob
from env.node.spec import NodeSpec
from env.plan.builder import PlanBuilder

N_STATUS = 9  # per-slot status values (k)
STATUS_NAMES = (
    "empty", "current", "in_open_group", "in_earlier_group", "cores_fraction", "ways_fraction",
    "bw_fraction", "skips", "queue_position",
)
NODE_VALUES = (
    "free_cores", "free_ways", "free_bw", "group_size_over_cmax", "needs_schedule",
    "sched_0", "sched_1", "sched_2", "sched_3", "sched_4", "sched_5", "groups_closed", "jobs_remaining",
)
OBS_CLIP = 5.0
DEFAULT_WINDOW = 6
#: Observation layouts. ``slots-v1``: the slot rows in window order, then NODE_VALUES. ``queue-v2``: the same rows
#: in *queue order* (the current job first, then the rest of the queue, the open group's members in placement
#: order, earlier groups' members, empty slots), then NODE_VALUES, then the sum of the open group's features and
#: the mean of the remaining jobs' features (f each). Same information, placed where an MLP finds it: the current
#: job always in the first row, the open group as one aggregate. A model's layout follows from its input size.
OBS_LAYOUTS = ("slots-v1", "queue-v2")
DEFAULT_OBS_LAYOUT = "slots-v1"
_MIN_CORES = min(actions.CORE_FRACTIONS)


#: Layout ``set-v1`` (``Episode.set_observation``): a token a job in play, and context values. The network built
#: on it (agent.setnet) takes any window of 1..SET_MAX_WINDOW jobs and any Cmax of 1..SET_MAX_CMAX.
SET_TOKEN_NAMES = ("current", "in_open_group", "cores_fraction", "ways_fraction", "bw_fraction", "skipped_now", "skips")
SET_MAX_WINDOW = 32
SET_MAX_CMAX = 4
SET_CONTEXT_NAMES = ("free_cores", "free_ways", "free_bw", "group_size_over_cmax", "free_places", "cmax",
                     *(f"cmax_is_{c}" for c in range(1, SET_MAX_CMAX + 1)), "needs_schedule",
                     *(f"sched_{i}" for i in range(actions.N_SCHEDULE)), "log_remaining", "log_open")


@dataclass(frozen=True)
class SetObservation:
    """``Episode.set_observation``: tokens (n, f + len(SET_TOKEN_NAMES)), context (len(SET_CONTEXT_NAMES),), and
    the current job's token index (-1 at the schedule step)."""

    tokens: np.ndarray
    context: np.ndarray
    current: int


@dataclass(frozen=True)
class RewardConfig:
    """How the two rewards are weighted. The paper guides lightly with rw_i and learns from rw_f."""

    intermediate_weight: float = 0.1
    final_weight: float = 1.0
    invalid_action_penalty: float = -1.0  # added when a masked action reaches the gym env's step()


def obs_size(window_size: int, n_features: int, layout: str = DEFAULT_OBS_LAYOUT) -> int:
    base = window_size * (n_features + N_STATUS) + len(NODE_VALUES)
    if layout == "slots-v1":
        return base
    if layout == "queue-v2":
        return base + 2 * n_features
    raise ValueError(f"unknown observation layout {layout!r}: choose from {', '.join(OBS_LAYOUTS)}")


def window_means(window: Sequence[JobInfo]) -> tuple[float | None, float | None, float | None]:
    """The window's mean scale factor, solo time and L3 miss rate over the jobs that have them (None: none has)."""
    def mean(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return sum(known) / len(known) if known else None

    return (mean([j.scale_factor for j in window]), mean([j.solo_s for j in window]),
            mean([j.l3_misses_per_s for j in window]))


def rw_intermediate(info: JobInfo, window: Sequence[JobInfo], alloc: Allocation, node: NodeSpec,
                    means: tuple[float | None, float | None, float | None] | None = None) -> float:
    """``means``: ``window_means(window)``, when the caller has it (an episode computes it once, not per step)."""
    def ratio(value: float | None, mean: float | None) -> float:
        if value is None or mean is None:
            return 1.0
        return value / mean if mean > 0 else 1.0

    sf_mean, dur_mean, l3_mean = means if means is not None else window_means(window)
    sf = ratio(info.scale_factor, sf_mean)
    dur = ratio(info.solo_s, dur_mean)
    l3 = ratio(info.l3_misses_per_s, l3_mean)
    core_r = len(alloc.cpus) / len(node.cpus)
    cache_r = sum(w for w, _ in alloc.l3.values()) / node.total_ways
    bw_r = sum(alloc.mem_bw_percent.values()) / (100.0 * len(node.numa))
    return core_r * (sf**2 + dur**2) + (cache_r + bw_r) * l3**2


def rw_final(solo_total_s: float, corun_total_s: float) -> float:
    return (solo_total_s / corun_total_s - 1.0) * 100.0


class Episode:
    """One window of at most ``window_size`` jobs with known infos, planned step by step."""

    def __init__(self, node: NodeSpec, jobs: Sequence[WindowJob], infos: Sequence[JobInfo], *,
                 max_concurrency: int = 4, window_size: int = DEFAULT_WINDOW, n_features: int | None = None,
                 reward: RewardConfig = RewardConfig(), builder: PlanBuilder | None = None,
                 step_limit: int | None = None, obs_layout: str = DEFAULT_OBS_LAYOUT) -> None:
        if obs_layout not in OBS_LAYOUTS:
            raise ValueError(f"unknown observation layout {obs_layout!r}: choose from {', '.join(OBS_LAYOUTS)}")
        self.obs_layout = obs_layout
        if not jobs:
            raise ValueError("an episode needs at least one job")
        if len(jobs) > window_size:
            raise ValueError(f"{len(jobs)} jobs do not fit a window of {window_size}")
        self.node = node
        self.jobs = list(jobs)
        self.infos = list(infos)
        self.window_size = window_size
        self.max_concurrency = max_concurrency
        self.n_features = n_features if n_features is not None else (len(infos[0].features) if infos else 0)
        self.reward = reward
        self.step_limit = step_limit if step_limit is not None else 4 * window_size + 4
        self.builder = builder if builder is not None else PlanBuilder(
            node=node, schedule=ScheduleAction("compact", "first-touch"), max_concurrency=max_concurrency,
            window_size=window_size)
        self.schedule_index: int | None = None
        self.queue: list[int] = list(range(len(self.jobs)))  # slots not yet placed, current first
        self.skipped: set[int] = set()  # skipped since the last allocation
        self.group_of = [-1] * len(self.jobs)  # -1 unplaced; else the episode's group number
        self.open_group_index = 0
        self.open_slots: list[int] = []
        self.alloc: list[Allocation | None] = [None] * len(self.jobs)
        self.skips = [0] * len(self.jobs)
        self.steps = 0
        self.groups_closed = 0
        self.done = False
        self.history: list[int] = []
        self._min_cores = core_count(node, _MIN_CORES)
        # Constant for the episode, so computed once (the planner's hot path builds an observation every step):
        # the feature rows (float32, as each observation had them) and the window's means for rw_intermediate.
        self._slot_rows: np.ndarray | None = None  # features and status values a slot; on the first observation
        self._blank: np.ndarray | None = None  # an empty observation of this layout
        self._window_means = window_means(self.infos)
        self._alloc_fracs: dict[int, tuple[Allocation, tuple[float, float, float]]] = {}

    # -- state --------------------------------------------------------------------------------------

    @property
    def current(self) -> int | None:
        return self.queue[0] if (self.queue and self.schedule_index is not None and not self.done) else None

    def free_cpus(self) -> int:
        return len(self.node.cpus) - len(self.builder.state.taken_cpus)

    def skip_allowed(self) -> bool:
        if self.schedule_index is None or self.done or not self.queue:
            return False
        if self.steps >= self.step_limit:
            return False
        if not self.open_slots and self.skipped | {self.queue[0]} >= set(self.queue):
            return False
        return True

    def action_mask(self) -> np.ndarray:
        if self.done:
            return np.zeros(actions.N_ACTIONS, dtype=np.int8)
        if self.schedule_index is None:
            return _SCHEDULE_MASK.copy()
        free = self.free_cpus() if len(self.open_slots) < self.max_concurrency else -1
        return _job_mask(len(self.node.cpus), free, self.skip_allowed()).copy()

    def observation(self) -> np.ndarray:
        """The state vector in this episode's layout (``obs_layout``)."""
        f, k, W = self.n_features, N_STATUS, self.window_size
        slots, node_values = self._parts()
        n = len(slots)
        if self._blank is None:  # zeros, every slot marked empty: each observation starts as a copy of it
            self._blank = np.zeros(obs_size(W, f, self.obs_layout), dtype=np.float32)
            self._blank[: W * (f + k)].reshape(W, f + k)[:, f] = 1.0
        obs = self._blank.copy()
        rows = obs[: W * (f + k)].reshape(W, f + k)
        tail = W * (f + k)
        obs[tail: tail + len(NODE_VALUES)] = node_values
        if self.obs_layout == "slots-v1":
            rows[:n] = slots
            return _clip(obs)
        # queue-v2: the current job first, then the rest of the queue, the open group's members in placement
        # order, earlier groups' members (by group, then slot); every slot once, so the first n rows.
        order = self.queue + self.open_slots
        if len(order) < n:
            placed = set(order)
            order = order + sorted((s for s in range(n) if s not in placed), key=lambda s: (self.group_of[s], s))
        np.take(slots, order, axis=0, out=rows[:n])
        # The open group's feature sum and the queue's feature mean, over their rows just written (the queue's
        # first, then the open group's): the same values in the same order as indexing the feature rows again.
        agg = obs[tail + len(NODE_VALUES):]
        q, o = len(self.queue), len(self.open_slots)
        if o:
            np.add.reduce(rows[q: q + o, :f], axis=0, out=agg[:f])  # clipped with the rest, below
        if q:
            # ndarray.mean(axis=0) as numpy computes it (a float32 sum, divided by the count in place), without
            # its per-call overhead: bit for bit the same values
            np.add.reduce(rows[:q, :f], axis=0, out=agg[f:])
            np.true_divide(agg[f:], np.intp(q), out=agg[f:], casting="unsafe")
        return _clip(obs)

    def set_observation(self) -> "SetObservation":
        """The state as a *set* (layout ``set-v1``, for the set-encoder policy): one token a job still in play
        (the remaining queue and the open group's members, in slot order; jobs of closed groups no longer matter
        to any decision), plus context values. Nothing depends on W, on slot positions or on the queue order
        beyond which job is current, so one network reads windows of any size.

        Token (``SET_TOKEN_NAMES`` after the f features): is the current job, is in the open group, its CPU /
        way / bandwidth fractions (0 until placed), skipped since the last allocation, its skip count / 4.
        Context (``SET_CONTEXT_NAMES``): the open group's free fractions, its size / Cmax, its free places / 4,
        Cmax / 4 and one-hot, whether the schedule action is to come, the schedule one-hot, and log-scaled
        counts of remaining and open-group jobs."""
        f = self.n_features
        slots = self._feature_rows()
        in_play = [s for s in range(len(self.infos)) if self.group_of[s] < 0 or self.group_of[s] == self.open_group_index]
        cur = self.current
        tokens = np.zeros((len(in_play), f + len(SET_TOKEN_NAMES)), dtype=np.float32)
        current = -1
        for i, s in enumerate(in_play):
            tokens[i, :f] = slots[s, :f]
            fr = self._fractions_of(s, self.alloc[s]) if self.alloc[s] is not None else (0.0, 0.0, 0.0)
            tokens[i, f:] = (1.0 if s == cur else 0.0, 1.0 if s in self.open_slots else 0.0, *fr,
                             1.0 if s in self.skipped else 0.0, min(self.skips[s] / 4.0, OBS_CLIP))
            if s == cur:
                current = i
        node = self.node
        used_ways = sum(bin(m).count("1") for m in self._open_masks().values())
        used_bw = sum(sum(self.alloc[s].mem_bw_percent.values()) for s in self.open_slots) / (100.0 * len(node.numa))  # type: ignore[union-attr]
        cmax, o = self.max_concurrency, len(self.open_slots)
        sched = [0.0] * actions.N_SCHEDULE
        if self.schedule_index is not None:
            sched[self.schedule_index] = 1.0
        cmax_hot = [1.0 if cmax == c else 0.0 for c in range(1, SET_MAX_CMAX + 1)]
        context = np.array((self.free_cpus() / len(node.cpus), 1.0 - used_ways / node.total_ways, 1.0 - used_bw,
                            o / cmax, max(cmax - o, 0) / SET_MAX_CMAX, cmax / SET_MAX_CMAX, *cmax_hot,
                            1.0 if self.schedule_index is None else 0.0, *sched,
                            np.log1p(len(self.queue)) / np.log1p(SET_MAX_WINDOW), np.log1p(o) / np.log1p(SET_MAX_CMAX)),
                           dtype=np.float32)
        return SetObservation(tokens, context, current)

    def _parts(self) -> tuple[np.ndarray, tuple[float, ...]]:
        """The pieces of an observation: the slots' rows in slot order (float32: the features, clipped once an
        episode, as the queue-v2 sums and means are of clipped rows; then the status values) and the node values
        (unclipped). The rows live in one array an episode, rewritten here: the caller copies them out."""
        f, W = self.n_features, self.window_size
        node = self.node
        self._feature_rows()
        cur = self.current
        pos = {s: i for i, s in enumerate(self.queue)}
        open_group = self.open_group_index
        # Python floats, cast to float32 in one assignment (numpy's per-element writes were most of the time).
        status = []
        for s in range(len(self.infos)):
            g = self.group_of[s]
            a = self.alloc[s]
            fracs = self._fractions_of(s, a) if a is not None else (0.0, 0.0, 0.0)
            status.append((0.0, 1.0 if s == cur else 0.0, 1.0 if g == open_group and g >= 0 else 0.0,
                           1.0 if 0 <= g < open_group else 0.0, *fracs, self.skips[s] / W,
                           (pos[s] + 1) / W if s in pos else 0.0))
        used_ways = sum(bin(m).count("1") for m in self._open_masks().values())
        used_bw = sum(sum(self.alloc[s].mem_bw_percent.values()) for s in self.open_slots) / (100.0 * len(node.numa))  # type: ignore[union-attr]
        sched = [0.0] * 6
        if self.schedule_index is not None:
            sched[self.schedule_index] = 1.0
        values = (self.free_cpus() / len(node.cpus), 1.0 - used_ways / node.total_ways, 1.0 - used_bw,
                  len(self.open_slots) / self.max_concurrency, 1.0 if self.schedule_index is None else 0.0,
                  *sched, self.groups_closed / W, len(self.queue) / W)
        if status:
            self._slot_rows[:, f:] = status
        return self._slot_rows, values

    def _feature_rows(self) -> np.ndarray:
        """The slots' rows (made once an episode): the f features clipped, then room for the status values."""
        if self._slot_rows is None:
            f = self.n_features
            rows = np.zeros((len(self.infos), f + N_STATUS), dtype=np.float32)
            for s, info in enumerate(self.infos):
                rows[s, :f] = info.features[:f]
            np.clip(rows[:, :f], -OBS_CLIP, OBS_CLIP, out=rows[:, :f])
            self._slot_rows = rows
        return self._slot_rows

    def _fractions_of(self, slot: int, a: Allocation) -> tuple[float, float, float]:
        """The slot's share of the node's CPUs, ways and bandwidth (cached per allocation object)."""
        hit = self._alloc_fracs.get(slot)
        if hit is None or hit[0] is not a:
            node = self.node
            hit = self._alloc_fracs[slot] = (a, (len(a.cpus) / len(node.cpus), sum(w for w, _ in a.l3.values()) / node.total_ways,
                                                 sum(a.mem_bw_percent.values()) / (100.0 * len(node.numa))))
        return hit[1]

    def _open_masks(self) -> dict[int, int]:
        union: dict[int, int] = {}
        for s in self.open_slots:
            for d, (_, m) in self.alloc[s].l3.items():  # type: ignore[union-attr]
                union[d] = union.get(d, 0) | m
        return union

    # -- transitions --------------------------------------------------------------------------------

    def step(self, action: int) -> float:
        """Apply a valid action; returns the intermediate reward (weighted). Raises ValueError when masked."""
        if self.done:
            raise ValueError("the episode is over")
        if not self.action_mask()[action]:
            raise ValueError(f"action {action} ({actions.describe(action)}) is masked in this state")
        return self._apply(action)

    def _apply(self, action: int) -> float:
        """``step`` for an action the caller has checked against this state's mask (run_episode has the mask)."""
        self.steps += 1
        self.history.append(action)
        if self.schedule_index is None:
            self.schedule_index = action
            self.builder.schedule = actions.decode(action)  # type: ignore[assignment]
            return 0.0
        slot = self.queue[0]
        if action == SKIP:
            self.skips[slot] += 1
            self.skipped.add(slot)
            self.queue.append(self.queue.pop(0))
            if self.skipped >= set(self.queue):
                self._close_group()
            return 0.0
        alloc = self.builder.place(self.jobs[slot], action)
        assert alloc is not None, "a masked-open job action must fit"
        self.alloc[slot] = alloc
        self.group_of[slot] = self.open_group_index
        self.open_slots.append(slot)
        self.queue.pop(0)
        self.skipped.clear()
        reward = self.reward.intermediate_weight * rw_intermediate(self.infos[slot], self.infos, alloc, self.node,
                                                                   self._window_means)
        if not self.queue:
            self._close_group()
            self.done = True
        elif len(self.open_slots) >= self.max_concurrency or self.free_cpus() < self._min_cores:
            self._close_group()
        return reward

    def _close_group(self) -> None:
        if self.open_slots:
            self.builder.close_group()
            self.open_slots = []
            self.open_group_index += 1
            self.groups_closed += 1
        self.skipped.clear()

    def solo_total_s(self) -> float:
        return sum(i.solo_s for i in self.infos)


class _CoresNeeded(dict):
    """node CPU count -> the CPUs each job-level action needs (``allocate.core_count``; cached: masks are
    computed every step)."""

    def __missing__(self, n: int) -> np.ndarray:
        out = np.array([_core_count_of(n, actions.decode(a).cores) for a in range(actions.FIRST_JOB, SKIP)])  # type: ignore[union-attr]
        self[n] = out
        return out


def _core_count_of(n_cpus: int, fraction: Fraction) -> int:
    """``env.plan.allocate.core_count`` for a node of ``n_cpus`` CPUs (the same half-up rounding)."""
    from env.plan.allocate import half_up

    return max(1, half_up(fraction * n_cpus))


_CORES_NEEDED = _CoresNeeded()

def _clip(obs: np.ndarray) -> np.ndarray:
    """np.clip(obs, -OBS_CLIP, OBS_CLIP, out=obs) (the same values, NaN included) as two ufunc calls: np.clip's
    Python wrappers cost more than the clipping of a few hundred values, once a step."""
    np.minimum(obs, OBS_CLIP, out=obs)
    np.maximum(obs, -OBS_CLIP, out=obs)
    return obs


_SCHEDULE_MASK = np.zeros(actions.N_ACTIONS, dtype=np.int8)
_SCHEDULE_MASK[: actions.N_SCHEDULE] = 1


@lru_cache(maxsize=1024)
def _job_mask(n_cpus: int, free_cpus: int, skip: bool) -> np.ndarray:
    """The mask after step 0 (copied by action_mask, never handed out): the job-level actions whose CPUs fit
    in ``free_cpus`` (-1: the open group is full), and skip."""
    mask = np.zeros(actions.N_ACTIONS, dtype=np.int8)
    if free_cpus >= 0:
        mask[actions.FIRST_JOB: SKIP] = _CORES_NEEDED[n_cpus] <= free_cpus
    mask[SKIP] = int(skip)
    mask.flags.writeable = False
    return mask
