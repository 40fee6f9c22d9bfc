"""CoScheduleStream-v0: the mask never oversubscribes a CPU nor exceeds Cmax, a random masked policy ends every stream
with each job started once, and the return is exactly minus the metric (over its scale)."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

from env.episode.stream import Decision, StreamJob, run_stream
from env.episode.stream_gym import ENV_ID, N_OPTIONS, OPTIONS, CoScheduleStreamEnv, menu
from env.sim.catalogue import catalogue
from env.sim.world import world_for


def _stream(node, n: int, seed: int, gap: float = 0.0) -> list[StreamJob]:
    world, cat = world_for(node), catalogue(node)
    rng = np.random.default_rng(seed)
    names = [world.all_jobs[int(i)] for i in rng.integers(len(world.all_jobs), size=n)]
    return [StreamJob(f"{k}-{x}", x, world.entries[x].params, cat[x].solo_s, k * gap) for k, x in enumerate(names)]


class Replay:
    """Replays the env's starts, event by event, through ``run_stream`` (the reference loop)."""

    name = "replay"

    def __init__(self, starts: list) -> None:
        self.starts = starts

    def reset(self, node, jobs, cmax) -> None:
        pass

    def decide(self, view) -> Decision:
        now = [(jid, a) for t, jid, a in self.starts if abs(t - view.now) < 1e-6 and jid in {j.id for j in view.queue}]
        return Decision(starts=tuple(now))


def _play(env, rng, jobs, cmax, window=8):
    _, info = env.reset(options={"jobs": jobs, "max_concurrency": cmax, "window": window})
    total, starts, ret = 0, [], 0.0
    while True:
        m = info["action_mask"]
        sim = env.sim
        free, running = sim.free_cpus(), len(sim.running)
        # every valid start is on free CPUs, with a free place; "nothing" only when a job runs
        for a in np.flatnonzero(m[:-1]):
            job, alloc = env.state().start(int(a))
            assert set(alloc.cpus) <= free and running < cmax
        assert bool(m[-1]) == (running > 0)
        assert m.any()
        a = int(rng.choice(np.flatnonzero(m)))
        if a != env.nothing:
            job, alloc = env.state().start(a)
            starts.append((sim.now, job.id, alloc))
        _, r, term, trunc, info = env.step(a)
        assert not trunc
        assert len(env.sim.running) <= cmax
        held = [c for x in env.sim.running.values() for c in x.alloc.cpus]
        assert len(held) == len(set(held))
        ret += r
        total += 1
        if term:
            return ret, info, starts


@pytest.mark.parametrize("cmax,gap", [(1, 0.0), (3, 0.0), (4, 0.0), (2, 40.0)])
def test_random_masked_policy_runs_each_job_once_and_returns_minus_the_metric(ref_node, cmax, gap):
    env = CoScheduleStreamEnv(ref_node, window=8)
    jobs = _stream(ref_node, 16, cmax, gap)
    ret, info, starts = _play(env, np.random.default_rng(cmax), jobs, cmax)
    assert sorted(jid for _, jid, _ in starts) == sorted(j.id for j in jobs)  # each job started once
    run = env.stream_run()
    assert all(math.isfinite(j.end_s) for j in run.jobs)
    metric = sum(j.turnaround_s for j in run.jobs) if gap else run.makespan_s
    assert info["metric"] == pytest.approx(metric)
    assert ret * info["metric_scale"] == pytest.approx(-metric, rel=1e-9)
    # the same starts through the reference loop give the same ends
    ref = run_stream(ref_node, jobs, cmax, Replay(starts))
    assert {j.id: j.end_s for j in ref.jobs} == pytest.approx({j.id: j.end_s for j in run.jobs})


def test_menu_only_free_cpus_and_distinct(ref_node):
    taken = set(ref_node.cpus[:7]) | {15, 16}
    free = set(ref_node.cpus) - taken
    allocs = menu(ref_node, free, 2, 4)
    seen = set()
    for k, a in enumerate(allocs):
        if a is None:
            continue
        assert set(a.cpus) <= free
        key = (a.cpus, a.memory)
        assert key not in seen
        seen.add(key)
        if OPTIONS[k][2] == "interleave":
            assert len(a.numa_nodes) > 1
    assert seen
    assert all(a is None for a in menu(ref_node, free, 0, 4))  # no place: no start


def test_registered_and_masked_action_refused(ref_node):
    env = gym.make(ENV_ID, node=ref_node, window=4).unwrapped
    obs, info = env.reset(seed=3)
    assert env.observation_space.contains(obs)
    assert info["action_mask"].shape == (4 * N_OPTIONS + 1,)
    assert not info["action_mask"][-1]  # nothing runs: "nothing" is masked
    with pytest.raises(ValueError, match="masked"):
        env.step(env.nothing)


def test_seeded_streams_repeat(ref_node):
    env = CoScheduleStreamEnv(ref_node, window=4, n_jobs=6)
    a = [j.id for j in (env.reset(seed=5) and env.jobs)]
    b = [j.id for j in (env.reset(seed=5) and env.jobs)]
    assert a == b
