"""The trace-driven cluster simulation (service/slurm/swf.py, tracesim.py, tracesim_policies.py): pure simulation, no
daemons.

SWF reading and the trace-to-cluster rule, EASY backfilling's reservation on a hand-made case, the bulk-synchronous
pace of a multi-node job on shared nodes, cosched's node choice against a brute-force score, a lone job giving back
CPUs played against the node model by hand, and invariants of every policy on a small random trace."""

from __future__ import annotations

import gzip
import math
import random

import pytest

from env.errors import InputError
from env.plan.allocate import plain_allocation
from env.planners.streams import LONE_MIN_GAIN, slot_slowdown, slots
from env.sim.model import solo_time, solve
from env.sim.nodes import load_node
from env.sim.world import world_for
from service.slurm.swf import SwfJob, Trace, TraceJob, map_jobs, read_swf
from service.slurm.tracesim import simulate
from service.slurm.tracesim_policies import TRACE_POLICIES, _work_rate, trace_policy

NODE = load_node("sim:reference")
WORLD = world_for(NODE)

SWF = """; Version: 2.2
; MaxNodes: 10
; MaxProcs: 40
    1        0     -1    100    8     -1    -1    8    200    -1  1  3  -1  7 -1  1 -1 -1
    2       10     -1     -1    4     -1    -1    4     -1    -1  0  3  -1  7 -1  1 -1 -1
    3       20     -1     50   -1     -1    -1   12     40    -1  1  5  -1 -1 -1  1 -1 -1
"""


def test_read_swf_plain_and_gz(tmp_path) -> None:
    plain = tmp_path / "t.swf"
    plain.write_text(SWF)
    gz = tmp_path / "t.swf.gz"
    with gzip.open(gz, "wt") as f:
        f.write(SWF)
    for p in (plain, gz):
        tr = read_swf(p)
        assert (tr.max_nodes, tr.max_procs, tr.dropped) == (10, 40, 1)
        assert [(j.id, j.submit_s, j.run_s, j.procs, j.req_s, j.user, j.app) for j in tr.jobs] == [
            (1, 0.0, 100.0, 8, 200.0, 3, 7), (3, 20.0, 50.0, 12, 40.0, 5, -1)]  # procs from field 8 where 5 is -1
    assert [j.id for j in read_swf(plain, skip=1).jobs] == [3]
    assert [j.id for j in read_swf(plain, limit=1).jobs] == [1]


def test_read_swf_bad_input_one_line(tmp_path) -> None:
    with pytest.raises(InputError, match="no such trace file"):
        read_swf(tmp_path / "missing.swf")
    bad = tmp_path / "bad.swf"
    bad.write_text("1 0 5\n")
    with pytest.raises(InputError, match=r"bad.swf:1: 3 fields"):
        read_swf(bad)


def test_map_jobs_rule() -> None:
    jobs = [SwfJob(i, 100.0 + i, 60.0, 9 if i == 0 else 4, 30.0 if i == 1 else 600.0, i % 3, i % 30) for i in range(60)]
    tr = Trace("x", 100, 400, jobs, 0)
    a = map_jobs(tr, WORLD.all_jobs, 1000, seed=1)
    assert a[0].nodes == 30 and a[1].nodes == 10  # ceil(9/4)=3 trace nodes -> 30 of 1000; 4 procs -> 1 -> 10
    assert a[0].submit_s == 0.0 and a[5].submit_s == 5.0
    assert a[1].est_s == 60.0 and a[2].est_s == 600.0  # a request below the runtime gives way to the runtime
    assert all(x.program == y.program for x, y in zip(a[:30], a[30:]))  # one program an executable
    b = map_jobs(tr, WORLD.all_jobs, 1000, seed=2)
    assert [x.program for x in a] != [x.program for x in b]
    assert [x.program for x in a] == [x.program for x in map_jobs(tr, WORLD.all_jobs, 1000, seed=1)]
    assert map_jobs(tr, WORLD.all_jobs, 1000, seed=1, load=2.0)[5].submit_s == 2.5
    assert map_jobs(Trace("x", 100, 400, jobs[:1], 0), WORLD.all_jobs, 20, 1)[0].nodes == 1  # at least one
    with pytest.raises(InputError, match="--load"):
        map_jobs(tr, WORLD.all_jobs, 1000, seed=1, load=0)


def _job(jid: str, submit: float, nodes: int, run: float, program: str = "EP", est: float | None = None,
         adapts: bool = False) -> TraceJob:
    return TraceJob(jid, submit, nodes, run, est if est is not None else run, program, adapts)


def _by_id(run) -> dict:
    return {j.id: j for j in run.jobs}


def test_easy_backfills_only_what_keeps_the_reservation() -> None:
    jobs = [_job("A", 0, 2, 100), _job("B", 1, 4, 50), _job("C", 2, 2, 90), _job("D", 3, 1, 500),
            _job("E", 4, 2, 60, est=200)]
    r = _by_id(simulate(jobs, trace_policy("easy"), NODE, 4))
    got = {k: (round(v.start_s, 6), round(v.end_s, 6)) for k, v in r.items()}
    # B (the head) waits for A (100); C ends by then and is backfilled at once; D (500 s) and E (its estimate 200 s)
    # would delay B: they wait, D starts after B, E beside D
    assert got == {"A": (0, 100), "B": (100, 150), "C": (2, 92), "D": (150, 650), "E": (150, 210)}


def test_alone_on_whole_nodes_a_job_takes_its_trace_runtime() -> None:
    for prog in ("EP", "ocean_cp", "cholesky"):
        r = simulate([_job("x", 5, 3, 1234.5, prog)], trace_policy("easy"), NODE, 3)
        assert r.jobs[0].end_s - r.jobs[0].start_s == pytest.approx(1234.5, rel=1e-9)


def test_multi_node_job_runs_at_its_slowest_node() -> None:
    """packing, Cmax 4: Y (ocean_cp, long) holds node 0's first slot; X spans nodes 0 and 1, so it co-runs with Y on
    node 0 only (the next slot, the same socket), and ends at the pace of that slower node."""
    jobs = [_job("Y", 0, 1, 10_000, "ocean_cp"), _job("X", 1, 2, 100, "fft")]
    r = _by_id(simulate(jobs, trace_policy("packing", 4), NODE, 2))
    s0, s1 = (plain_allocation(NODE, s) for s in slots(NODE, 4)[:2])
    from env.sim.stream import StreamNode

    sim = StreamNode(NODE, WORLD.params)
    y, x0, x1 = (sim.sim_job(WORLD.entries[p].params, a) for p, a in (("ocean_cp", s0), ("fft", s1), ("fft", s0)))
    t_shared = solve(sim.g, [y, x0])[1]
    t_alone = solve(sim.g, [x1])[0]
    assert t_shared > t_alone * 1.01  # the co-runner matters: the test can tell the nodes apart
    solo = {n: c.solo_s for n, c in __import__("env.sim.catalogue", fromlist=["catalogue"]).catalogue(NODE).items()}
    expect = max(t_shared, t_alone) * 100 / solo["fft"]
    assert r["X"].end_s - r["X"].start_s == pytest.approx(expect, rel=1e-9)


def test_cosched_shared_puts_a_job_where_the_node_model_gains_most() -> None:
    """Two nodes, Cmax 4: a bandwidth-bound and a compute-bound job start first (idle nodes: one each); MG then goes
    to the node where the node model's work rate gains most, which a brute-force score over both nodes names."""
    jobs = [_job("m", 0, 1, 5000, "ocean_cp"), _job("c", 1, 1, 5000, "EP"), _job("new", 2, 1, 100, "MG")]
    r = _by_id(simulate(jobs, trace_policy("cosched-shared", 4), NODE, 2))
    assert r["m"].ranks != r["c"].ranks and r["new"].start_s == 2
    from env.sim.catalogue import catalogue
    from env.sim.stream import StreamNode

    sim = StreamNode(NODE, WORLD.params)
    s0, s1 = (plain_allocation(NODE, s) for s in slots(NODE, 4)[:2])
    solo = {n: c.solo_s for n, c in catalogue(NODE).items()}

    def gain(other: str) -> float:
        base = [(sim.sim_job(WORLD.entries[other].params, s0), solo[other])]
        return _work_rate(sim.g, base + [(sim.sim_job(WORLD.entries["MG"].params, s1), solo["MG"])]) - _work_rate(sim.g, base)

    assert abs(gain("EP") - gain("ocean_cp")) > 1e-3 * abs(gain("EP"))  # the choice matters
    best = "c" if gain("EP") > gain("ocean_cp") else "m"
    assert r["new"].ranks == r[best].ranks
    t_new = solve(sim.g, [sim.sim_job(WORLD.entries[r[best].program].params, s0),
                          sim.sim_job(WORLD.entries["MG"].params, s1)])[1] * 100 / solo["MG"]
    assert r["new"].end_s - r["new"].start_s == pytest.approx(t_new, rel=1e-6)  # beside it, on the next slot


def test_cosched_runs_a_job_alone_on_whole_nodes_when_nobody_waits() -> None:
    r = simulate([_job("a", 0, 2, 300, "fft"), _job("b", 10, 1, 200, "MG")], trace_policy("cosched", 4), NODE, 4)
    assert [round(j.end_s - j.start_s, 6) for j in r.jobs] == [300, 200]
    # two jobs at once on one node: the first would leave the second waiting, so both share it (one socket each)
    jobs = [_job("a", 0, 1, 300, "cholesky"), _job("b", 0, 1, 300, "cholesky")]
    shared = _by_id(simulate(jobs, trace_policy("cosched", 2), NODE, 1))
    assert shared["a"].start_s == shared["b"].start_s == 0
    assert _by_id(simulate(jobs, trace_policy("easy"), NODE, 1))["b"].start_s == pytest.approx(300)


def test_a_job_whose_program_gains_nothing_from_a_whole_node_shares_even_when_nodes_are_idle() -> None:
    # DC runs as fast on one of the Cmax 2 slots (a socket) as on the whole node (the node model); FT twice as slow
    gain = {p: slot_slowdown(NODE, WORLD.entries[p].params, 2) for p in ("DC", "FT")}
    assert gain["DC"] < LONE_MIN_GAIN <= gain["FT"]
    slot = list(slots(NODE, 2)[0])
    for program, alone in (("DC", False), ("FT", True)):  # a job of 100 s alone on a whole node, three idle nodes
        r = simulate([_job("a", 0, 1, 100, program)], trace_policy("cosched", 2), NODE, 3).jobs[0]
        params = WORLD.entries[program].params
        on_slot = 100 * solo_time(NODE, params, slot, sp=WORLD.params) / solo_time(NODE, params, sp=WORLD.params)
        assert r.end_s - r.start_s == pytest.approx(100 if alone else on_slot, rel=1e-9), program


def _random_jobs(n: int, nodes: int, seed: int) -> list[TraceJob]:
    rng = random.Random(seed)
    t, out = 0.0, []
    for i in range(n):
        t += rng.expovariate(1 / 40)
        run = rng.choice([5, 60, 300, 900])
        out.append(_job(f"j{i}", t, rng.choice([1, 1, 1, 2, nodes]), run, rng.choice(WORLD.all_jobs),
                        est=run * rng.choice([1, 1.5, 3])))
    return out


@pytest.mark.parametrize("name", TRACE_POLICIES + ("cosched:packing", "cosched:rollout"))
def test_every_policy_runs_every_job_once(name: str) -> None:
    jobs = _random_jobs(70, 5, seed=3)
    r = simulate(jobs, trace_policy(name, 2), NODE, 5)
    assert [j.id for j in r.jobs] == [j.id for j in jobs]
    for j, t in zip(r.jobs, jobs):
        assert j.start_s >= t.submit_s and math.isfinite(j.end_s)
        assert j.end_s > j.start_s
        if name == "easy":  # alone on whole nodes: the trace's runtime (a shared slot can be faster for a job that
            assert j.end_s - j.start_s == pytest.approx(t.run_s, rel=1e-9)  # scales badly across sockets, e.g. DC)
    m = r.metrics()
    assert 0 < m["node_utilisation"] <= 1 and m["decisions"] > 0
    if name == "easy":
        assert m["work_utilisation"] == pytest.approx(m["node_utilisation"])


def test_policies_by_name() -> None:
    with pytest.raises(InputError, match="unknown trace policy 'slurm'"):
        trace_policy("slurm")
    with pytest.raises(InputError, match="choose from"):
        trace_policy("cosched:agent")  # the stream registry's own line
    with pytest.raises(InputError, match="--cmax"):
        trace_policy("packing", 0)
    with pytest.raises(InputError, match="more than the cluster"):
        simulate([_job("big", 0, 3, 10)], trace_policy("easy"), NODE, 2)


def test_a_lone_job_that_adapts_gives_back_cpus_to_a_job_that_has_waited() -> None:
    """One node, Cmax 2: L (its program adapts) starts alone on the whole node (nobody waits); W arrives and, once it
    has waited GIVE_BACK_WAIT_S with no end or arrival to wake the scheduler, L keeps half its CPUs dealt over both
    sockets and W starts on the rest. Both ends follow the node model played by hand. The same L not adapting keeps
    its node to its end under cosched, and gives back under cosched-adapting (every job taken to adapt)."""
    from env.sim.catalogue import catalogue
    from env.sim.stream import StreamNode
    from service.slurm.tracesim_policies import GIVE_BACK_WAIT_S

    jobs = [_job("L", 0, 1, 5000, "ocean_cp", adapts=True), _job("W", 100, 1, 300, "EP")]
    run = simulate(jobs, trace_policy("cosched", 2), NODE, 1)
    r = _by_id(run)
    assert run.give_backs == 1 and run.metrics()["give_backs"] == 1
    assert r["W"].start_s == pytest.approx(100 + GIVE_BACK_WAIT_S)
    solo = {n: c.solo_s for n, c in catalogue(NODE).items()}
    kept = plain_allocation(NODE, sorted(c for d in NODE.numa for c in d.cpus[:6]))  # dealt over both sockets, 6 each
    rest = plain_allocation(NODE, sorted(set(NODE.cpus) - set(kept.cpus)))
    sim = StreamNode(NODE, WORLD.params)
    sim.start("L", "ocean_cp", WORLD.entries["ocean_cp"].params, plain_allocation(NODE, NODE.cpus),
              factor=5000 / solo["ocean_cp"])
    sim.advance(100 + GIVE_BACK_WAIT_S)
    sim.give_back("L", kept)
    sim.start("W", "EP", WORLD.entries["EP"].params, rest, factor=300 / solo["EP"])
    while sim.running:
        sim.advance()
    assert r["W"].end_s == pytest.approx(sim.ended["W"], rel=1e-9)
    assert r["L"].end_s == pytest.approx(sim.ended["L"], rel=1e-9)
    assert r["L"].end_s > 5000 * 1.01  # giving back cost L time: the test tells the two runs apart
    fixed = [_job("L", 0, 1, 5000, "ocean_cp"), _job("W", 100, 1, 300, "EP")]
    kept_run = simulate(fixed, trace_policy("cosched", 2), NODE, 1)
    kept = _by_id(kept_run)
    assert kept_run.give_backs == 0
    assert kept["L"].end_s == pytest.approx(5000) and kept["W"].start_s == pytest.approx(5000)
    what_if = _by_id(simulate(fixed, trace_policy("cosched-adapting", 2), NODE, 1))
    assert what_if["W"].start_s == pytest.approx(r["W"].start_s) and what_if["L"].end_s == pytest.approx(r["L"].end_s)


def test_no_give_back_before_the_wait_or_with_room() -> None:
    # W ends its wait after L has ended: nothing to give back
    early = simulate([_job("L", 0, 1, 400, "ocean_cp", adapts=True), _job("W", 100, 1, 300, "EP")],
                     trace_policy("cosched", 2), NODE, 1)
    assert early.give_backs == 0 and _by_id(early)["W"].start_s == pytest.approx(400)
    # a second node is idle when W comes: W takes it, L keeps its node
    roomy = simulate([_job("L", 0, 1, 5000, "ocean_cp", adapts=True), _job("W", 100, 1, 300, "EP")],
                     trace_policy("cosched", 2), NODE, 2)
    assert roomy.give_backs == 0 and _by_id(roomy)["W"].start_s == pytest.approx(100)


def test_stream_node_gives_back_only_cpus_it_holds() -> None:
    from env.sim.stream import StreamNode

    sim = StreamNode(NODE, WORLD.params)
    whole = plain_allocation(NODE, NODE.cpus)
    sim.start("a", "EP", WORLD.entries["EP"].params, plain_allocation(NODE, NODE.cpus[:12]))
    with pytest.raises(ValueError, match="can give back CPUs, not take new ones"):
        sim.give_back("a", whole)
    with pytest.raises(ValueError, match="can give back CPUs, not take new ones"):
        sim.give_back("a", plain_allocation(NODE, NODE.cpus[:12]))  # the same CPUs: nothing given back
    t_before = 1 / sim.rates()["a"]
    sim.advance(t_before / 2)
    sim.give_back("a", plain_allocation(NODE, NODE.cpus[:6]))
    assert sim.running["a"].left == pytest.approx(0.5)  # its work left carried on
    t_after = solve(sim.g, [sim.sim_job(WORLD.entries["EP"].params, plain_allocation(NODE, NODE.cpus[:6]))])[0]
    assert 1 / sim.rates()["a"] == pytest.approx(t_after) and t_after > 1.5 * t_before  # EP scales
