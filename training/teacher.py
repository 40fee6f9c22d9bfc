"""The teacher of the learner (sim): for a training episode, the expert's labels in the states the actor visited
and the expert's own plan (DAgger, small windows), or a plan searched with the actor (search distillation, larger
windows); made in the learner's process or in worker processes beside it, and delivered a fixed number of episodes
late so that a run is the same whatever the workers' speed."""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Any

import numpy as np

from agent.setnet import SetNetShape, set_logits
from training.setup import Problem, play

Args = Any  # the run's settings: training.set_sac.Args (not imported: set_sac imports this module)


@dataclass(frozen=True)
class Lesson:
    """What the teacher is asked about one training episode: the window, and either the actions the actor took
    (``dagger``: label each state they visit, and play the expert's own plan) or the actor's parameters (search a
    plan with it)."""

    names: tuple[str, ...]
    cmax: int
    dagger: bool
    actions: tuple[int, ...] = ()
    params: dict[str, np.ndarray] | None = None


def searched_plan(problem: Problem, shape: SetNetShape, params: dict[str, np.ndarray], names: list[str], cmax: int,
                  budget: int) -> list[int]:
    """The best plan ``env.planners.search`` finds for this window within ``budget`` rollouts guided by the actor's
    logits (the planner's agent-search, with the actor being trained), as the episode's action sequence."""
    from env.planners.search import FunctionScores, search_chunk

    def scores(mask: np.ndarray, ep: Any) -> np.ndarray:
        s = ep.set_observation()
        return set_logits(shape, params, s.tokens, s.context, s.current)

    if len(problem.ev.memo) > 400_000:  # the evaluator's memo grows with every group scored: bound its memory
        problem.ev.memo.clear()
    return search_chunk(lambda: problem.episode(names, cmax), FunctionScores(scores), problem.ev.makespan,
                        budget).actions


_TEACHING: list[Any] = []  # in a worker process only: its (problem, shape, args, expert), inherited at the fork


def _start_teaching(*state: Any) -> None:
    _TEACHING[:] = state


def teach(lesson: Lesson, problem: Problem | None = None, shape: SetNetShape | None = None, args: Args | None = None,
          expert: Any = None) -> tuple[list[tuple], list[tuple], list[float], float]:
    """(demonstrations as (state, mask, action, soft) labels, the teacher's own transitions for both buffers,
    their soft labels, the teacher's plan's throughput). In a worker the problem comes from ``_TEACHING``."""
    if problem is None:
        problem, shape, args, expert = _TEACHING
    names, labels = list(lesson.names), []
    if lesson.dagger:
        play(problem, shape, None, (names, lesson.cmax), None, replay=list(lesson.actions), labels=labels,
             expert=expert, soft_labels=args.soft_labels)
        own: list[tuple] = []
        ep = play(problem, shape, None, (names, lesson.cmax), None, labels=own, expert=expert, follow_expert=True,
                  soft_labels=args.soft_labels)
        return labels, ep.transitions, [lab[3] for lab in own], ep.throughput
    plan = searched_plan(problem, shape, lesson.params, names, lesson.cmax, args.search_budget)
    ep = play(problem, shape, None, (names, lesson.cmax), None, replay=plan)
    return [], ep.transitions, [-1.0] * len(ep.transitions), ep.throughput


class Teacher:
    """Answers lessons in the order they were asked, ``lag`` lessons late (``Args.teacher_workers``, ``teacher_lag``).
    Because the lag is fixed, what the learner receives at each episode does not depend on how fast the workers
    are: a run is reproducible from its seed with or without workers. The lessons not yet answered are kept in the
    checkpoint and asked again on resume."""

    def __init__(self, problem: Problem, shape: SetNetShape, args: Args, expert: Any) -> None:
        import multiprocessing

        self.local = (problem, shape, args, expert)
        self.lag = args.teacher_lag if args.teacher_workers else 0
        self.pending: collections.deque = collections.deque()  # (lesson, async result or answer)
        self.pool = None
        if args.teacher_workers:  # forked: the workers inherit the problem (its job table, caches) unpickled
            self.pool = multiprocessing.get_context("fork").Pool(args.teacher_workers, initializer=_start_teaching,
                                                                 initargs=self.local)

    def _submit(self, lesson: Lesson) -> None:
        self.pending.append((lesson, teach(lesson, *self.local) if self.pool is None
                             else self.pool.apply_async(teach, (lesson,))))

    def ask(self, lesson: Lesson) -> list[tuple[Lesson, tuple]]:
        """Ask about one episode; returns the (lesson, answer) pairs now due, oldest first."""
        self._submit(lesson)
        due = []
        while len(self.pending) > self.lag:
            lesson_, answer = self.pending.popleft()
            due.append((lesson_, answer if self.pool is None else answer.get()))
        return due

    def resume(self, lessons: list[Lesson]) -> None:
        """Ask again, in order, what a checkpoint left unanswered."""
        for lesson in lessons:
            self._submit(lesson)

    def unanswered(self) -> list[Lesson]:
        return [lesson for lesson, _ in self.pending]

    def close(self) -> None:
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()
