"""Playing window episodes: a chooser through an episode (``run_episode``), the set-encoder's episodes
(``set_episode``), what an episode placed (``placed_groups``), and planning a whole window (``plan_window``): the one
code path by which anything plans a window (``env.episode.window`` is the MDP itself)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

import numpy as np

from env.episode.jobinfo import JobInfo, JobInfoProvider
from env.episode.window import DEFAULT_OBS_LAYOUT, DEFAULT_WINDOW, SET_MAX_CMAX, SET_MAX_WINDOW, Episode, RewardConfig
from env.errors import InputError
from env.node.spec import NodeSpec
from env.plan import actions
from env.plan.actions import SKIP, ScheduleAction
from env.plan.builder import PlanBuilder
from env.plan.models import Plan, Window, WindowJob



def placed_actions(ep: Episode) -> dict[int, int]:
    """slot -> the job-level action it was placed with, in placement order (replayed from the episode's history)."""
    queue = list(range(len(ep.jobs)))
    out: dict[int, int] = {}
    for a in ep.history[1:]:
        if a == SKIP:
            queue.append(queue.pop(0))
        else:
            out[queue.pop(0)] = a
    return out


def placed_groups(ep: Episode) -> list[list[tuple[int, int]]]:
    """Each group's (slot, job action) in placement order, groups in the order they were opened (the plan builder
    places a group's members in this order)."""
    groups: dict[int, list[tuple[int, int]]] = {}
    for slot, a in placed_actions(ep).items():
        groups.setdefault(ep.group_of[slot], []).append((slot, a))
    return [groups[g] for g in sorted(groups)]


def group_members(ep: Episode) -> list[list[tuple[str, int]]]:
    """Each group's (profile name, action) in placement order: what the simulated node scores."""
    return [[(ep.infos[slot].name, a) for slot, a in members] for members in placed_groups(ep)]


def canonical_order(infos: Sequence[JobInfo]) -> list[int]:
    """The jobs' indices sorted by what the planner knows of them (features, then profile name), ties in queue
    order: two windows holding equal jobs in different orders are planned as one."""
    return sorted(range(len(infos)), key=lambda i: (infos[i].features.tobytes(), infos[i].name))


def set_episode(node: NodeSpec, jobs: Sequence[WindowJob], infos: Sequence[JobInfo], max_concurrency: int, *,
                n_features: int, builder: PlanBuilder | None = None) -> Episode:
    """The episode the set-encoder policy plans and trains on (the one factory for both): the jobs in
    ``canonical_order``, a window of up to SET_MAX_WINDOW, and ``plan_window``'s step limit."""
    if not 1 <= max_concurrency <= SET_MAX_CMAX:
        raise InputError(f"max_concurrency {max_concurrency} is outside 1..{SET_MAX_CMAX}")
    order = canonical_order(infos)
    W = SET_MAX_WINDOW
    return Episode(node, [jobs[i] for i in order], [infos[i] for i in order], max_concurrency=max_concurrency,
                   window_size=W, n_features=n_features, builder=builder, step_limit=2 * W * W + 4)


class Chooser(Protocol):
    def __call__(self, obs: np.ndarray, mask: np.ndarray, episode: Episode) -> int: ...


def run_episode(episode: Episode, chooser: Chooser) -> Episode:
    # a chooser that reads the episode itself (the set-encoder policy: ``reads_obs = False``) gets no vector
    reads_obs = getattr(chooser, "reads_obs", True)
    while not episode.done:
        mask = episode.action_mask()
        a = int(chooser(episode.observation() if reads_obs else None, mask, episode))
        if not 0 <= a < actions.N_ACTIONS or not mask[a]:
            raise ValueError(f"the chooser picked {a}, which is masked in this state")
        episode._apply(a)  # checked just above against this very state's mask
    return episode


@dataclass
class WindowPlanning:
    """What planning a window produced: the plan, and the episodes (one per chunk of at most W jobs)."""

    plan: Plan
    episodes: list[Episode]


ChooserFactory = Callable[[Episode], Chooser]  # a chunk's fresh episode -> the chooser that plays it
Finish = Callable[[list[Episode]], dict]  # the played episodes -> the plan's other fields (PlanBuilder.build's)


def plan_window(window: Window, node: NodeSpec, provider: JobInfoProvider, chooser: Chooser | ChooserFactory, *,
                policy: str, window_size: int = DEFAULT_WINDOW, reward: RewardConfig = RewardConfig(),
                chooser_per_chunk: bool = False, pin_runtime=None, obs_layout: str = DEFAULT_OBS_LAYOUT,
                canonical: bool = False, finish: Finish | None = None, **build_kwargs) -> WindowPlanning:
    """Plan a window: unknown jobs go to ``excluded``; the rest are planned W at a time, in queue order.

    Each chunk is its own episode (step 0 included) on one shared PlanBuilder; the plan's
    ``schedule_policy`` is the first chunk's (every job carries its own CPUs and memory policy).
    ``canonical``: the known jobs are first put in ``canonical_order`` and each chunk is a ``set_episode`` (the
    set-encoder policy plans so: the window is a set, its queue order no part of the decision; ``window_size``
    at most SET_MAX_WINDOW).
    ``chooser_per_chunk``: ``chooser`` is a factory called with each chunk's episode before it is played.
    ``finish``: called with the played episodes, returns more of the plan's fields (predictions, what a search did):
    the plan is built once, complete.
    """
    if window.max_concurrency < 1:
        raise InputError("max_concurrency must be at least 1")
    builder = PlanBuilder(node=node, schedule=ScheduleAction("compact", "first-touch"),
                          max_concurrency=window.max_concurrency, window_size=window_size, pin_runtime=pin_runtime)
    known: list[tuple[WindowJob, JobInfo]] = []
    for job in window.jobs:
        info = provider.get(job.profile_name)
        if info is None:
            builder.exclude(job, provider.missing_reason(job.profile_name))
        else:
            known.append((job, info))
    if canonical:  # equal jobs in any queue order make the same episodes, hence the same plan
        known = [known[i] for i in canonical_order([i for _, i in known])]
    episodes = []
    first_schedule = None
    for start in range(0, len(known), window_size):
        chunk = known[start: start + window_size]
        if canonical:  # the set-encoder policy's episodes come from its one factory, as in training
            ep = set_episode(node, [j for j, _ in chunk], [i for _, i in chunk], window.max_concurrency,
                             n_features=provider.n_features, builder=builder)
        else:
            ep = Episode(node, [j for j, _ in chunk], [i for _, i in chunk], max_concurrency=window.max_concurrency,
                         window_size=window_size, n_features=provider.n_features, reward=reward, builder=builder,
                         step_limit=2 * window_size * window_size + 4, obs_layout=obs_layout)
        run_episode(ep, chooser(ep) if chooser_per_chunk else chooser)  # type: ignore[call-arg]
        if first_schedule is None:
            first_schedule = builder.schedule
        episodes.append(ep)
    if first_schedule is not None:
        builder.schedule = first_schedule
    if finish is not None:
        build_kwargs.update(finish(episodes))
    return WindowPlanning(plan=builder.build(policy, **build_kwargs), episodes=episodes)
