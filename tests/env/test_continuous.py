"""Continuous decisions searched by rollouts on the node model (``env.planners.continuous``), simulated."""

from __future__ import annotations

import random

import pytest

from env.episode.stream import StreamJob, StreamView, run_stream, sim_stream
from env.plan.models import WindowJob
from env.planners.continuous import Fill, PackingBase, Proposals, Rollout, slots
from env.planners.streams import BestFound, Packing, stream_registry
from env.sim.nodes import load_node
from env.sim.world import world_for

NODE = load_node("sim:reference")


def _stream(n: int, seed: int, arrivals: float = 0.0) -> list[StreamJob]:
    rng = random.Random(seed)
    names = list(world_for(NODE).all_jobs)
    t, jobs = 0.0, []
    for k in range(n):
        jobs.append(WindowJob(id=f"j{k}", profile=rng.choice(names), submit_s=t))
        t += rng.expovariate(1.0 / arrivals) if arrivals else 0.0
    return sim_stream(NODE, jobs)


def _overlaps(run) -> int:  # noqa: ANN001 - StreamRun
    """The most jobs running at one moment, and no CPU held by two of them at once (else an AssertionError)."""
    most = 0
    for a in run.jobs:
        at = [b for b in run.jobs if b.start_s <= a.start_s < b.end_s]
        most = max(most, len(at))
        held = [c for b in at for c in b.cpus]
        assert len(held) == len(set(held)), f"a CPU held twice at {a.start_s}"
    return most


def test_a_fork_is_independent_of_its_node() -> None:
    jobs = _stream(3, 1)
    pol = Fill()
    pol.reset(NODE, jobs, 3)
    from env.sim.stream import StreamNode

    sim = StreamNode(NODE, world_for(NODE).params)
    view = StreamView(sim, list(jobs), 3, 0)
    for jid, alloc in pol.decide(view).starts:
        j = next(x for x in jobs if x.id == jid)
        sim.start(jid, j.name, j.params, alloc)
    left = {k: r.left for k, r in sim.running.items()}
    other = sim.fork()
    other.advance()
    assert other.now > 0 and sim.now == 0 and {k: r.left for k, r in sim.running.items()} == left
    assert other.ended and not sim.ended


@pytest.mark.parametrize("cmax", [1, 2, 3, 4])
def test_rollout_runs_every_job_once_within_cmax_and_free_cpus(cmax: int) -> None:
    jobs = _stream(10, cmax)
    run = run_stream(NODE, jobs, cmax, Rollout(window=4, candidates=3))
    assert sorted(j.id for j in run.jobs) == sorted(j.id for j in jobs)
    assert all(j.end_s > j.start_s >= j.submit_s for j in run.jobs)
    assert _overlaps(run) <= cmax


def test_rollout_with_arrivals_starts_no_job_before_it_arrives() -> None:
    jobs = _stream(10, 7, arrivals=30.0)
    run = run_stream(NODE, jobs, 3, Rollout(window=4, candidates=3))
    assert all(j.start_s >= j.submit_s for j in run.jobs)
    assert _overlaps(run) <= 3


@pytest.mark.parametrize("seed", [3, 4])
def test_rollout_is_never_worse_than_its_base_on_the_model(seed: int) -> None:
    # the base's own start is always one of the candidates, played forward by the base itself: on a deterministic
    # model the search can only keep it or find better (the rollout improvement property)
    jobs = _stream(12, seed)
    base = run_stream(NODE, jobs, 3, Fill(window=6)).makespan_s
    search = run_stream(NODE, jobs, 3, Rollout(window=6, candidates=4)).makespan_s
    assert search <= base * (1 + 1e-9)


@pytest.mark.parametrize(("seed", "cmax"), [(3, 3), (5, 2)])
def test_best_found_is_never_worse_than_rollout_on_the_model(seed: int, cmax: int) -> None:
    # best-found plays each candidate forward by rollout itself, rollout's own choice among them: continued by rollout
    # that is rollout's own play, so on a deterministic model it can only keep it or find better
    jobs = _stream(10, seed)
    rollout = run_stream(NODE, jobs, cmax, Rollout(window=6, candidates=4, guard=False))
    deep = run_stream(NODE, jobs, cmax, BestFound(window=6, candidates=4))
    assert deep.makespan_s <= rollout.makespan_s * (1 + 1e-9)
    assert sorted(j.id for j in deep.jobs) == sorted(j.id for j in jobs) and _overlaps(deep) <= cmax


class _FillAfresh(Fill):
    """Fill deciding every start anew (its memo emptied first)."""

    def next_start(self, sim, queue, places):  # noqa: ANN001, ANN201
        self.chosen.clear()
        return super().next_start(sim, queue, places)


@pytest.mark.parametrize("arrivals", [0.0, 40.0])
def test_fills_kept_choices_decide_as_deciding_afresh(arrivals: float) -> None:
    """Fill keeps its choices by running set, places and window: rollout over it plays exactly as over a Fill that
    decides every start anew (same starts, same allocations, same ends)."""
    jobs = _stream(16, seed=5, arrivals=arrivals)
    kept, fresh = Rollout(), Rollout()
    fresh_reset = fresh.reset

    def reset(node, jobs, cmax):  # noqa: ANN001, ANN202
        fresh_reset(node, jobs, cmax)
        fresh.base = _FillAfresh(fresh.window)
        fresh.base.reset(node, jobs, cmax)

    fresh.reset = reset  # type: ignore[method-assign]
    a, b = run_stream(NODE, jobs, 3, kept), run_stream(NODE, jobs, 3, fresh)
    assert [(j.id, j.start_s, j.end_s, j.cpus) for j in a.jobs] == [(j.id, j.start_s, j.end_s, j.cpus) for j in b.jobs]
    assert kept.base.chosen and len(kept.base.chosen) > len(fresh.base.chosen)  # choices were kept and reused


def test_proposals_cut_allocations_only_from_free_cpus() -> None:
    jobs = _stream(6, 2)
    props = Proposals(window=6)
    props.reset(NODE, jobs, 4)
    from env.sim.stream import StreamNode

    sim = StreamNode(NODE, world_for(NODE).params)
    j = jobs[0]
    sim.start(j.id, j.name, j.params, _plain(list(range(0, 10))))
    ranked = props.ranked(sim, jobs[1:], 3)
    free = sim.free_cpus()
    assert ranked and all(set(a.cpus) <= free for _, a in ranked)
    # spread and interleaved placements are among them, and every size from one CPU to all free ones is possible
    assert any(a.memory == "interleave" for _, a in ranked)
    assert max(len(a.cpus) for _, a in ranked) == len(free)
    # no program twice with the same allocation
    keys = [(jb.name, a.cpus, a.memory) for jb, a in ranked]
    assert len(keys) == len(set(keys))


def _plain(cpus: list[int]):  # noqa: ANN202
    from env.plan.allocate import plain_allocation

    return plain_allocation(NODE, cpus)


def test_rollout_is_a_stream_policy_by_name() -> None:
    reg = stream_registry()
    assert isinstance(reg.get("rollout"), Rollout)
    with pytest.raises(ValueError, match="objective 'x'"):
        Rollout(objective="x")


def test_stopping_here_counts_the_jobs_that_end_before_the_next_decision() -> None:
    # one job running, one queued: starting nothing now must be worth the running job's end plus the queued job's
    # (it used to drop the end that the next event itself brings, so waiting looked free and jobs waited in turn)
    from env.sim.stream import StreamNode

    jobs = _stream(2, 5, arrivals=1.0)
    pol = Rollout(window=2, candidates=2, objective="turnaround")
    pol.reset(NODE, jobs, 2)
    sim = StreamNode(NODE, world_for(NODE).params)
    a = jobs[0]
    sim.start(a.id, a.name, a.params, _plain(list(range(12))))
    first_end = sim.next_end()
    wait = pol._value(sim, [jobs[1]], None)
    start_now = pol._value(sim, [jobs[1]], (jobs[1], _plain(list(range(12, 24)))))
    assert wait > first_end * 2  # both ends, the queued one after the running one
    assert start_now < wait


class _OneCpuAtATime(Rollout):
    """A deliberately poor search (one job at a time on one CPU) behind rollout's guard."""

    def search(self, view):  # noqa: ANN001, ANN201
        from env.episode.stream import WAIT, Decision

        if view.running or not view.queue:
            return WAIT
        return Decision(starts=((view.queue[0].id, _plain([0])),))


def test_packing_longest_first_keeps_packings_slots_and_starts_the_longest_of_the_window() -> None:
    from env.sim.stream import StreamNode

    sim = StreamNode(NODE, world_for(NODE).params)
    jobs = _stream(8, 4)
    first = PackingBase()
    first.reset(NODE, jobs, 2)
    on_slot = {k.id: sim.memo.solve(sim.g, [sim.sim_job(k.params, first.allocs[0])])[0] for k in jobs}
    queue = sorted(jobs, key=lambda k: on_slot[k.id])  # shortest first: queue order is the worst order here
    lpt, one = PackingBase(window=4), PackingBase(window=1)
    for p in (lpt, one):
        p.reset(NODE, queue, 2)
    j, alloc = lpt.next_start(sim, queue, 2)
    assert alloc.cpus == slots(NODE, 2)[0]
    assert on_slot[j.id] == on_slot[queue[3].id] > on_slot[queue[0].id]
    assert first.next_start(sim, queue, 2)[0] is queue[0]
    assert one.next_start(sim, queue, 2)[0] is queue[0]  # a window of one is queue order


def test_the_guard_decides_as_packing_when_packing_is_predicted_better_and_says_why() -> None:
    jobs = _stream(8, 4)
    guarded = run_stream(NODE, jobs, 2, _OneCpuAtATime())
    packed = run_stream(NODE, jobs, 2, Packing())
    # packing's slots, in the order the model predicts shorter: here the longest job of the window first
    assert guarded.makespan_s < packed.makespan_s
    assert {j.cpus for j in guarded.jobs} <= set(slots(NODE, 2)) and _overlaps(guarded) <= 2
    assert guarded.notes and all("decided as packing (packing's slots, longest first)" in n
                                 and "beats this policy's" in n for _, n in guarded.notes)
    assert [j.id for j in sorted(guarded.jobs, key=lambda j: j.start_s)] != [j.id for j in jobs]
    bare = run_stream(NODE, jobs, 2, _OneCpuAtATime(guard=False))
    assert bare.makespan_s > 2 * packed.makespan_s and not bare.notes
    # a search better than packing keeps its own decisions, and says nothing
    good = run_stream(NODE, jobs, 2, Rollout())
    assert not good.notes and good.makespan_s <= packed.makespan_s


class _Counted(Rollout):
    def reset(self, node, jobs, max_concurrency):  # noqa: ANN001, ANN201
        super().reset(node, jobs, max_concurrency)
        self.searches = 0

    def search(self, view):  # noqa: ANN001, ANN201
        self.searches += 1
        return super().search(view)


def test_the_guard_replays_its_own_play_where_the_node_is_where_it_predicted() -> None:
    jobs = _stream(9, 6)
    bare = run_stream(NODE, jobs, 3, Rollout(guard=False))
    pol = _Counted()
    guarded = run_stream(NODE, jobs, 3, pol)
    # the same decisions, and each searched once: by the first decision's play, replayed at every later event
    assert [(j.id, j.start_s, j.cpus) for j in guarded.jobs] == [(j.id, j.start_s, j.cpus) for j in bare.jobs]
    assert pol.searches == guarded.decisions
    # where the node is not where the play had it (noise on the jobs' times), it searches anew at each event
    factors = {j.id: 1.0 + 0.07 * (k % 3) for k, j in enumerate(jobs)}
    bare = run_stream(NODE, jobs, 3, Rollout(guard=False), factors=factors)
    pol = _Counted()
    noisy = run_stream(NODE, jobs, 3, pol, factors=factors)
    assert [(j.id, j.start_s, j.cpus) for j in noisy.jobs] == [(j.id, j.start_s, j.cpus) for j in bare.jobs]
    assert pol.searches > noisy.decisions


def _idle_cpu_s_with_a_queue(run, cmax: int) -> float:  # noqa: ANN001 - StreamRun
    """CPU-seconds left idle while a job waited and a place was free."""
    times = sorted({j.start_s for j in run.jobs} | {j.end_s for j in run.jobs})
    idle = 0.0
    for a, b in zip(times, times[1:]):
        running = [j for j in run.jobs if j.start_s <= a < j.end_s]
        busy = sum(len(j.cpus) for j in running)
        if any(j.submit_s <= a < j.start_s for j in run.jobs) and busy < len(NODE.cpus) and len(running) < cmax:
            idle += (b - a) * (len(NODE.cpus) - busy)
    return idle


def test_a_margin_keeps_cpus_busy_unless_waiting_wins_by_more() -> None:
    # the exact model (margin 0) leaves CPUs idle in this stream because waiting is predicted to gain; a margin as
    # large as any gain (a model that may be 99 % wrong) never waits while a job could start
    jobs = _stream(10, 2)
    exact = run_stream(NODE, jobs, 3, Rollout(window=4, candidates=3, guard=False, margin=0.0))
    doubting = run_stream(NODE, jobs, 3, Rollout(window=4, candidates=3, guard=False, margin=0.99))
    assert _idle_cpu_s_with_a_queue(exact, 3) > 100.0
    assert _idle_cpu_s_with_a_queue(doubting, 3) == 0.0
    pol = Rollout()
    pol.reset(NODE, jobs, 3)
    assert pol.margin == 0.0  # a simulated node is its own model: nothing to allow for
    with pytest.raises(ValueError, match="margin"):
        Rollout(margin=1.0)


def test_with_a_margin_a_gain_within_it_decides_as_packing_in_the_order_predicted_better() -> None:
    # on a model that may be wrong by its margin, rollout keeps its play only where it is predicted shorter than
    # packing's by more than that, packing's slots in queue order or longest first, whichever the model predicts
    # shorter: in this stream its play is kept under a 4 % margin; under 6 %, packing's slots, longest first
    jobs = _stream(10, 7)
    packing = run_stream(NODE, jobs, 3, Packing())
    sure = run_stream(NODE, jobs, 3, Rollout(window=4, candidates=3, margin=0.04))
    doubting = run_stream(NODE, jobs, 3, Rollout(window=4, candidates=3, margin=0.06))
    assert not sure.notes and sure.makespan_s < doubting.makespan_s / 1.04
    assert doubting.makespan_s < packing.makespan_s and {j.cpus for j in doubting.jobs} <= set(slots(NODE, 3))
    assert doubting.notes and all("decided as packing (packing's slots, longest first)" in n and "(6 %" in n
                                  for _, n in doubting.notes)
    # where queue order is predicted no longer than longest first, packing's own decisions
    jobs = _stream(10, 11)
    packing = run_stream(NODE, jobs, 3, Packing())
    doubting = run_stream(NODE, jobs, 3, Rollout(window=4, candidates=3, margin=0.02))
    assert [(j.id, j.start_s, j.cpus) for j in doubting.jobs] == [(j.id, j.start_s, j.cpus) for j in packing.jobs]
    assert doubting.notes and all("decided as packing (packing)" in n for _, n in doubting.notes)


def test_with_a_margin_equal_starts_go_longest_first() -> None:
    # one job at a time: every order has the same makespan, so every start is within any margin of the best; a model
    # that may be wrong then runs the longest job first (what it mispredicts is not left to the end)
    jobs = _stream(6, 5)
    doubting = run_stream(NODE, jobs, 1, Rollout(window=8, candidates=8, guard=False, margin=0.02))
    order = [j.id for j in sorted(doubting.jobs, key=lambda j: j.start_s)]
    solo = {j.id: j.solo_s for j in jobs}
    assert all(solo[a] >= solo[b] * 0.98 for a, b in zip(order, order[1:])), [(k, round(solo[k])) for k in order]
    exact = run_stream(NODE, jobs, 1, Rollout(window=8, candidates=8, guard=False, margin=0.0))
    assert [j.id for j in sorted(exact.jobs, key=lambda j: j.start_s)] != order  # the exact model breaks ties otherwise


def test_with_arrivals_the_node_seconds_a_start_holds_count_as_one_more_jobs_wait() -> None:
    # one job known, the next far off: minimising its own turnaround alone takes every CPU; counting the node-seconds
    # it holds (the next arrival finds the node that much later) takes fewer for a program that scales poorly
    import env.planners.continuous as continuous
    from env.sim.stream import StreamNode

    jobs = sim_stream(NODE, [WindowJob(id="a", profile="cholesky", submit_s=0.0),
                             WindowJob(id="b", profile="cholesky", submit_s=1e5)])
    pol = Rollout(window=8, objective="turnaround")
    pol.reset(NODE, jobs, 2)
    for cpus in (list(range(24)), list(range(12))):
        alone = StreamNode(NODE, world_for(NODE).params)
        alone.start("a", "cholesky", jobs[0].params, _plain(cpus))
        end = alone.next_end()
        assert pol._value(StreamNode(NODE, world_for(NODE).params), [jobs[0]], (jobs[0], _plain(cpus))) == \
            pytest.approx(end + continuous.HOLD_WEIGHT * len(cpus) / 24 * end)
    assert len(run_stream(NODE, jobs, 2, Rollout(8)).jobs[0].cpus) < 24
    try:
        weight, continuous.HOLD_WEIGHT = continuous.HOLD_WEIGHT, 0.0
        assert len(run_stream(NODE, jobs, 2, Rollout(8)).jobs[0].cpus) == 24
    finally:
        continuous.HOLD_WEIGHT = weight


def test_with_arrivals_few_known_jobs_are_valued_one_level_deeper(monkeypatch: pytest.MonkeyPatch) -> None:
    # with arrivals a start is valued by rollout's own play of the known jobs while at most DEEP_MAX are known;
    # a saturated stream (every job known) keeps Fill's play-outs, and so does agent-search (deep=False)
    import env.planners.continuous as continuous

    known: list[int] = []
    deep = Rollout._deep_value

    def spy(self, sim, queue, start):  # noqa: ANN001, ANN202
        known.append(len(queue) + len(sim.running))
        return deep(self, sim, queue, start)

    monkeypatch.setattr(Rollout, "_deep_value", spy)
    arriving = _stream(10, 3, arrivals=150.0)
    run_stream(NODE, arriving, 2, Rollout(window=4, candidates=3))
    assert known and max(known) <= continuous.DEEP_MAX
    known.clear()
    run_stream(NODE, _stream(10, 3), 2, Rollout(window=4, candidates=3))
    assert not known  # saturated
    run_stream(NODE, arriving, 2, Rollout(window=4, candidates=3, deep=False))
    assert not known
    monkeypatch.setattr(continuous, "DEEP_MAX", 1)
    run_stream(NODE, arriving, 2, Rollout(window=4, candidates=3))
    assert known and max(known) <= 1


@pytest.mark.parametrize(("seed", "cmax"), [(3, 3), (5, 2)])
def test_the_shipped_rollout_chooses_as_best_found_on_a_saturated_queue(seed: int, cmax: int, monkeypatch) -> None:
    """``rollout`` as it ships (DeepRollout) values each start of a saturated queue by rollout's own play, as
    best-found does: the same play where its guard keeps its own, never after the shallower search's makespan; above
    DEEP_MAX_MAKESPAN known jobs it decides as the shallower search; with arrivals it is that search."""
    from env.episode.stream import StreamJob
    from env.planners import streams
    from env.planners.streams import DeepRollout

    jobs = _stream(10, seed)
    shipped = run_stream(NODE, jobs, cmax, stream_registry().get("rollout"))
    assert isinstance(stream_registry().get("rollout"), DeepRollout)
    deep = run_stream(NODE, jobs, cmax, BestFound())
    shallow = run_stream(NODE, jobs, cmax, Rollout())
    assert shipped.makespan_s == deep.makespan_s <= shallow.makespan_s * (1 + 1e-9)
    assert sorted(j.id for j in shipped.jobs) == sorted(j.id for j in jobs) and _overlaps(shipped) <= cmax
    monkeypatch.setattr(streams, "DEEP_MAX_MAKESPAN", 3)  # the deeper search only for the last jobs
    capped = run_stream(NODE, jobs, cmax, DeepRollout())
    assert shallow.makespan_s * (1 + 1e-9) >= capped.makespan_s and capped.jobs != shipped.jobs
    arriving = [StreamJob(j.id, j.name, j.params, j.solo_s, submit_s=30.0 * k) for k, j in enumerate(jobs)]
    assert run_stream(NODE, arriving, cmax, DeepRollout()).jobs == run_stream(NODE, arriving, cmax, Rollout()).jobs
