"""Rollout's decisions as actions of ``CoScheduleStream-v0``: the demonstrations of the behaviour-cloning warm start
and of its DAgger rounds (rollout labels the states the actor visits).

``teach(env, jobs, cmax, window)`` plays one stream through the env with ``rollout`` (``env.planners.continuous``)
deciding: at every state where a start is possible, rollout's decision at this event (asked once per event) is
taken start by start, each start mapped to the env's action (the slot of the first queued job of its program, the
option whose allocation is the same CPUs and memory policy); once its starts are taken, "nothing". A start that no
option of the menu gives (rollout also tries each NUMA domain's free CPUs) is replaced by the option of the same
program with the closest size and memory policy, and counted (``unmatched``). Returns the transitions (as the
replay stores them) and the counts. Deterministic: the same stream gives the same demonstrations.
"""

from __future__ import annotations

from typing import Any, Callable

from env.episode.stream import StreamView
from env.episode.stream_gym import N_OPTIONS, CoScheduleStreamEnv
from env.planners.continuous import Rollout


def _action(obs: Any, job_name: str, alloc: Any) -> tuple[int, bool]:
    """(the env action nearest to starting a job of ``job_name`` on ``alloc``, whether it is exact)."""
    slot = next(i for i, j in enumerate(obs.slots) if j.name == job_name)
    best, exact = None, False
    for k, a in enumerate(obs.allocs):
        if a is None or not obs.mask[slot * N_OPTIONS + k]:
            continue
        if a.cpus == alloc.cpus and a.memory == alloc.memory:
            return slot * N_OPTIONS + k, True
        d = (abs(len(a.cpus) - len(alloc.cpus)), a.memory != alloc.memory, len(set(a.cpus) ^ set(alloc.cpus)))
        if best is None or d < best[0]:
            best = (d, slot * N_OPTIONS + k)
    assert best is not None
    return best[1], exact


def teach(env: CoScheduleStreamEnv, jobs: list, cmax: int, window: int, actor: Callable[[Any], int] | None = None
          ) -> tuple[list[tuple], list[tuple], dict[str, int]]:
    """One stream through ``env``: [(state, action (the state's own index), reward, next state, done)], the
    demonstrations [(state, rollout's action there)] and {starts, unmatched}. Without ``actor`` rollout decides
    (asked once per event, its starts taken one by one, then "nothing"); with ``actor`` (state -> action) the actor
    decides and rollout labels every state it visits (DAgger: rollout's decision from that state, its first start or
    "nothing")."""
    teacher = Rollout(window)
    env.reset(options={"jobs": jobs, "max_concurrency": cmax, "window": window})
    teacher.reset(env.node, env.pending + env.queue, cmax)
    decide = getattr(teacher, "search", teacher.decide)  # the searched decision itself, without a guard
    out, labels, counts, todo, at = [], [], {"starts": 0, "unmatched": 0}, [], None
    while True:
        obs = env.state()
        if actor is not None or at != (env.sim.now, len(env.sim.ended)):  # rollout decides from this state
            at = (env.sim.now, len(env.sim.ended))
            d = decide(StreamView(env.sim.fork(), list(env.queue), cmax, len(env.pending)))
            by_id = {j.id: j for j in env.queue}
            todo = [(by_id[jid].name, alloc) for jid, alloc in d.starts]
        if todo:
            name, alloc = todo.pop(0)
            label, exact = _action(obs, name, alloc)
            counts["starts"] += 1
            counts["unmatched"] += not exact
        else:
            label = len(obs.slots) * N_OPTIONS
        labels.append((obs, label))
        a = label if actor is None else actor(obs)
        _, r, done, _, _ = env.step(env.to_env_action(a))
        out.append((obs, a, r, None if done else env.state(), done))
        if done:
            return out, labels, counts

__all__ = ["teach"]
