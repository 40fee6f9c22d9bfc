"""Job streams on the node model (simulated): the stream model, the decision loop and the stream baselines."""

from __future__ import annotations

import random

import pytest

from env.episode.stream import WAIT, Decision, StreamJob, StreamView, check_decision, run_stream
from env.plan import actions
from env.plan.allocate import GroupState, allocate, plain_allocation
from env.planners.streams import GreedyContinuous, Packing, TimeShare, slots
from env.sim.catalogue import catalogue
from env.sim.model import run_group_py
from env.sim.nodes import load_node
from env.sim.stream import StreamNode
from env.sim.world import world_for

NODE = load_node("sim:reference")
WORLD = world_for(NODE)
NAMES = list(WORLD.all_jobs)


def job(k: int, name: str, submit_s: float = 0.0) -> StreamJob:
    return StreamJob(f"{k}-{name}", name, WORLD.entries[name].params, catalogue(NODE)[name].solo_s, submit_s)


def random_group(rng: random.Random) -> list:
    sched = actions.decode(rng.randrange(actions.N_SCHEDULE))
    st, allocs = GroupState(), []
    for _ in range(rng.randint(1, 4)):
        for _ in range(20):
            a = allocate(NODE, sched.affinity, sched.memory, actions.decode(rng.randrange(actions.FIRST_JOB, actions.SKIP)), st)
            if a is not None:
                allocs.append(a)
                break
    return allocs


def test_the_stream_model_is_the_group_run_when_all_start_together() -> None:
    """Every job started at 0, nothing changed: each job's end is the group run's, to the bit (random groups,
    random ways, caps and memory policies), with and without noise factors."""
    rng = random.Random(11)
    for trial in range(150):
        allocs = random_group(rng)
        names = [rng.choice(NAMES) for _ in allocs]
        factors = [rng.uniform(0.8, 1.25) for _ in allocs] if trial % 2 else None
        sim = StreamNode(NODE, WORLD.params)
        for i, (n, a) in enumerate(zip(names, allocs)):
            sim.start(f"j{i}", n, WORLD.entries[n].params, a, factor=factors[i] if factors else 1.0)
        want = run_group_py(sim.g, [r.sim for r in sim.running.values()], factors)
        while sim.running:
            sim.advance()
        assert [sim.ended[f"j{i}"] for i in range(len(allocs))] == want


def test_a_job_joins_with_the_work_left_of_the_others() -> None:
    """A job started at an event slows the one running; the first keeps the work it has done."""
    a, b = plain_allocation(NODE, range(6)), plain_allocation(NODE, range(6, 12))  # one socket: one controller
    sim = StreamNode(NODE, WORLD.params)
    sim.start("mg", "MG", WORLD.entries["MG"].params, a)
    alone = sim.next_end()
    rate = sim.rates()["mg"]
    assert sim.advance(until=alone / 2) == []
    assert sim.now == alone / 2 and sim.running["mg"].left == pytest.approx(0.5)
    sim.start("sp", "SP", WORLD.entries["SP"].params, b)
    assert sim.rates()["mg"] < rate  # the newcomer's memory traffic slows MG's second half
    assert sim.now + sim.running["mg"].left / sim.rates()["mg"] > alone
    with pytest.raises(ValueError, match="taken|hold"):
        sim.start("ep", "EP", WORLD.entries["EP"].params, plain_allocation(NODE, [3]))


def test_changing_ways_and_caps_of_a_running_job_changes_its_rate_not_its_cpus() -> None:
    sim = StreamNode(NODE, WORLD.params)
    a = plain_allocation(NODE, range(12))
    sim.start("mg", "MG", WORLD.entries["MG"].params, a)
    sim.start("ft", "FT", WORLD.entries["FT"].params, plain_allocation(NODE, range(12, 24)))
    before = sim.rates()["mg"]
    capped = type(a)(cpus=a.cpus, numa_nodes=a.numa_nodes, memory=a.memory, l3=a.l3, mem_bw_percent={0: 20})
    sim.change("mg", capped)
    assert sim.rates()["mg"] < before
    with pytest.raises(ValueError, match="only its ways and bandwidth caps"):
        sim.change("mg", plain_allocation(NODE, range(6)))


def test_packing_slots_and_first_come_first_served() -> None:
    """Cmax 3 on 24 CPUs: slots of 8 consecutive CPUs; the queue head takes the lowest free slot as it frees."""
    assert slots(NODE, 3) == [tuple(range(0, 8)), tuple(range(8, 16)), tuple(range(16, 24))]
    assert slots(NODE, 4)[1] == tuple(range(6, 12))
    jobs = [job(0, "EP"), job(1, "IS"), job(2, "MG"), job(3, "CG"), job(4, "FT", submit_s=5000.0)]
    run = run_stream(NODE, jobs, 3, Packing())
    by = {j.id: j for j in run.jobs}
    assert [by[j.id].cpus for j in jobs[:3]] == slots(NODE, 3)
    assert all(by[j.id].start_s == 0.0 for j in jobs[:3])
    first_end = min(by[j.id].end_s for j in jobs[:3])
    freed = next(by[j.id].cpus for j in jobs[:3] if by[j.id].end_s == first_end)
    assert by["3-CG"].start_s == first_end and by["3-CG"].cpus == freed  # the next in line, the freed slot
    assert by["4-FT"].start_s >= 5000.0  # never before it arrives


def test_timeshare_is_one_job_at_a_time_and_its_throughput_is_one() -> None:
    jobs = [job(k, n) for k, n in enumerate(["EP", "MG", "CG", "lu_cb"])]
    run = run_stream(NODE, jobs, 4, TimeShare())
    spans = sorted((j.start_s, j.end_s) for j in run.jobs)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    assert run.metrics()["throughput_vs_timeshare"] == pytest.approx(1.0, rel=1e-9)


class Checking:
    """Wraps a policy: every state it sees holds at most Cmax jobs on disjoint CPUs."""

    def __init__(self, inner) -> None:  # noqa: ANN001
        self.inner, self.name = inner, inner.name

    def reset(self, node, jobs, cmax) -> None:  # noqa: ANN001
        self.inner.reset(node, jobs, cmax)

    def decide(self, view: StreamView) -> Decision:
        held = [c for r in view.running.values() for c in r.alloc.cpus]
        assert len(view.running) <= view.max_concurrency and len(held) == len(set(held))
        return self.inner.decide(view)


@pytest.mark.parametrize("cmax", [1, 2, 3, 4])
def test_decisions_never_oversubscribe_cpus_or_exceed_cmax(cmax: int) -> None:
    rng = random.Random(cmax)
    jobs = [job(k, rng.choice(NAMES), submit_s=rng.choice([0.0, 0.0, rng.uniform(0, 3000)])) for k in range(20)]
    for pol in (Packing(), GreedyContinuous(), TimeShare()):
        run = run_stream(NODE, jobs, cmax, Checking(pol))
        assert all(j.start_s >= j.submit_s and j.end_s > j.start_s for j in run.jobs)


def test_a_bad_decision_is_refused_in_one_line() -> None:
    sim = StreamNode(NODE, WORLD.params)
    sim.start("a", "EP", WORLD.entries["EP"].params, plain_allocation(NODE, range(12)))
    queue = [job(1, "MG"), job(2, "CG")]
    view = StreamView(sim, queue, 2, 0)
    with pytest.raises(ValueError, match="taken"):
        check_decision(view, Decision(starts=(("1-MG", plain_allocation(NODE, range(10, 14))),)))
    with pytest.raises(ValueError, match="above Cmax 2"):
        check_decision(view, Decision(starts=(("1-MG", plain_allocation(NODE, [12])), ("2-CG", plain_allocation(NODE, [13])))))
    with pytest.raises(ValueError, match="not in the queue"):
        check_decision(view, Decision(starts=(("9-EP", plain_allocation(NODE, [12])),)))
    check_decision(view, WAIT)


def test_greedy_continuous_fills_every_free_slot_from_the_window() -> None:
    jobs = [job(k, n) for k, n in enumerate(["MG", "SP", "EP", "lu_cb", "CG", "FT"])]
    run = run_stream(NODE, jobs, 4, GreedyContinuous(window=6))
    assert sum(1 for j in run.jobs if j.start_s == 0.0) == 4
    assert sorted(c for j in run.jobs if j.start_s == 0.0 for c in j.cpus) == list(range(24))


def test_the_memo_changes_no_double_even_when_it_empties(monkeypatch) -> None:
    """Forks share their node's memo of SimJobs and solves: a rollout stream gives the same ends with a memo that
    empties every few solves as with one that never does (a stale entry would change them)."""
    from env.planners.continuous import Rollout
    from env.sim.stream import Memo

    rng = random.Random(5)
    jobs = [job(k, rng.choice(NAMES)) for k in range(10)]
    ends = run_stream(NODE, jobs, 3, Rollout(candidates=3)).jobs
    monkeypatch.setattr(Memo, "LIMIT", 7)
    again = run_stream(NODE, jobs, 3, Rollout(candidates=3)).jobs
    assert [(r.id, r.start_s, r.end_s, r.cpus) for r in again] == [(r.id, r.start_s, r.end_s, r.cpus) for r in ends]
    sim = StreamNode(NODE, WORLD.params)
    assert sim.fork().memo is sim.memo
