"""The seven behaviours of docs/design/coscheduler.md §9, each stated with the model's own numbers (all simulated)."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import pytest

from env.plan.actions import CORE_FRACTIONS
from env.sim.catalogue import BY_NAME, catalogue
from env.sim.model import SimJob, geometry, run_group, solo_time
from env.sim.params import DEFAULT_PARAMS
from env.sim.simulate import plan_from_actions, simulate_plan
from env_helpers import job_action, sched_action


def pair(node, a, b, ca, cb, affinity="compact", memory="first-touch", wa=22, wb=22, bwa=100, bwb=100):
    plan = plan_from_actions(node, sched_action(affinity, memory),
                             [[(a, job_action(ca, wa, bwa)), (b, job_action(cb, wb, bwb))]])
    return simulate_plan(plan, node)


def best_pair(node, a, b, affinity):
    best = None
    for ca in CORE_FRACTIONS:
        for cb in CORE_FRACTIONS:
            if ca + cb <= 1:
                r = pair(node, a, b, ca, cb, affinity)
                if best is None or r.throughput_vs_timeshare > best.throughput_vs_timeshare:
                    best = r
    return best


def test_1_compute_bound_with_memory_bound_beats_timesharing(ref_node):
    # EP (compute-bound) next to MG (bandwidth-bound), 12 + 12 cores spread over both sockets:
    # MG keeps both memory controllers, EP gets half the cores: 1.47x time sharing (simulated).
    r = pair(ref_node, "EP", "MG", Fraction(1, 2), Fraction(1, 2), "distributed")
    assert r.throughput_vs_timeshare > 1.35


def test_2_two_bandwidth_bound_jobs_gain_little(ref_node):
    # MG with ocean_cp: both want the memory controllers; the best core split and affinity stay below 1.0.
    best = max(best_pair(ref_node, "MG", "ocean_cp", aff).throughput_vs_timeshare for aff in ("compact", "distributed"))
    assert best < 1.0
    # while the compute/memory pair of behaviour 1 gains clearly more
    assert best_pair(ref_node, "EP", "MG", "distributed").throughput_vs_timeshare > best + 0.4


def test_3_cache_partitioning_helps_cache_sensitive_next_to_streaming(ref_node):
    # water_spatial (cache-sensitive) with MG (streaming) sharing both L3s (distributed 12 + 12):
    shared = pair(ref_node, "water_spatial", "MG", Fraction(1, 2), Fraction(1, 2), "distributed", wa=22, wb=22)
    split = pair(ref_node, "water_spatial", "MG", Fraction(1, 2), Fraction(1, 2), "distributed", wa=16, wb=4)
    ws_shared, ws_split = shared.job_times[0]["water_spatial"], split.job_times[0]["water_spatial"]
    assert ws_split < 0.92 * ws_shared  # 8 private ways per socket: water_spatial ~12 % faster (simulated)
    assert split.throughput_vs_timeshare > shared.throughput_vs_timeshare + 0.1
    # ... and does little for a compute-bound pair (EP with fmm): under 0.5 % either way
    a = pair(ref_node, "EP", "fmm", Fraction(1, 2), Fraction(1, 2), "distributed", wa=22, wb=22)
    b = pair(ref_node, "EP", "fmm", Fraction(1, 2), Fraction(1, 2), "distributed", wa=16, wb=4)
    assert abs(a.total_s - b.total_s) / a.total_s < 0.005


@pytest.mark.parametrize("job", ["CG", "IS"])
def test_4a_compact_beats_distributed_for_communicating_irregular_jobs(ref_node, job):
    # 12 cores: one socket (compact) vs 6 + 6 (distributed); heavy link traffic and remote latency hurt
    compact = pair(ref_node, job, "EP", Fraction(1, 2), Fraction(1, 2), "compact").job_times[0][job]
    spread = pair(ref_node, job, "EP", Fraction(1, 2), Fraction(1, 2), "distributed").job_times[0][job]
    assert compact < 0.9 * spread


@pytest.mark.parametrize("job", ["MG", "ocean_cp"])
def test_4b_distributed_beats_compact_for_regular_bandwidth_hungry_jobs(ref_node, job):
    compact = pair(ref_node, job, "EP", Fraction(1, 2), Fraction(1, 2), "compact").job_times[0][job]
    spread = pair(ref_node, job, "EP", Fraction(1, 2), Fraction(1, 2), "distributed").job_times[0][job]
    assert spread < 0.75 * compact  # two sockets' bandwidth and cache


def test_5_capping_the_streaming_job_speeds_up_its_bandwidth_sensitive_corunner(ref_node):
    times = [pair(ref_node, "ocean_cp", "MG", Fraction(1, 2), Fraction(1, 2), "distributed", bwb=cap).job_times[0]["ocean_cp"]
             for cap in (100, 80, 60, 40, 20)]
    assert all(b < a for a, b in zip(times, times[1:]))  # every tighter cap on MG helps ocean_cp
    assert times[-1] < 0.7 * times[0]


def test_6_time_falls_with_cores_by_own_scaling_and_the_best_split_is_interior(ref_node):
    g = geometry(ref_node)
    for name in ("EP", "lu_cb", "cholesky", "DC"):
        t = [solo_time(ref_node, BY_NAME[name].params, cpus=list(range(n))) for n in (1, 2, 4, 8, 12)]
        assert all(b < a for a, b in zip(t, t[1:])), name
    # Amdahl: cholesky (p 0.80) gains far less from 12 cores than EP (p 0.998)
    s = {n: solo_time(ref_node, BY_NAME[n].params, cpus=[0]) / solo_time(ref_node, BY_NAME[n].params, cpus=list(range(12)))
         for n in ("EP", "cholesky")}
    assert s["EP"] > 10 and s["cholesky"] < 5
    # the best split of 24 cores between lu_cb and water_nsquared is interior (not 1 or 23 cores)
    best = min(range(1, 24), key=lambda k: max(run_group(g, [
        SimJob(g, BY_NAME["lu_cb"].params, list(range(k)), "first-touch"),
        SimJob(g, BY_NAME["water_nsquared"].params, list(range(k, 24)), "first-touch")])))
    assert 6 <= best <= 18


def test_7_deterministic_and_seeded_noise(ref_node):
    plan = plan_from_actions(ref_node, sched_action("distributed"),
                             [[("EP", job_action(Fraction(1, 2))), ("MG", job_action(Fraction(1, 2)))], [("CG", job_action(Fraction(7, 8)))]])
    assert simulate_plan(plan, ref_node) == simulate_plan(plan, ref_node)
    noisy = dataclasses.replace(DEFAULT_PARAMS, noise_sd=0.05)
    a, b = simulate_plan(plan, ref_node, seed=1, params=noisy), simulate_plan(plan, ref_node, seed=1, params=noisy)
    c = simulate_plan(plan, ref_node, seed=2, params=noisy)
    assert a == b and a.makespans != c.makespans
    clean = simulate_plan(plan, ref_node)
    assert all(abs(x - y) / y < 0.25 for x, y in zip(a.makespans, clean.makespans))


def test_catalogue_equals_model_solo_and_one_core(ref_node):
    cat = catalogue(ref_node)
    assert len(cat) == 19
    for name, job in cat.items():
        p = BY_NAME[name].params
        assert job.solo_s == pytest.approx(solo_time(ref_node, p))
        assert job.one_core_s == pytest.approx(solo_time(ref_node, p, cpus=[0]))
        assert 10 <= job.solo_s <= 1000, name
        assert job.scale_factor > 1


def test_a_program_scaled_to_k_times_its_work_takes_k_times_as_long_beside_any_corunner(ref_node):
    # what POST /decide's solo_s rests on: scaling work and traffic keeps every rate, so contention is the same
    from env.plan.allocate import plain_allocation
    from env.sim.stream import StreamNode
    from env.sim.world import world_for

    world = world_for(ref_node)
    mg, ep, ft = (world.entries[n].params for n in ("MG", "EP", "FT"))

    def ends(k):
        sim = StreamNode(ref_node, world.params)
        for jid, p, cpus in (("mg", mg, range(0, 8)), ("ep", ep, range(8, 16)), ("ft", ft, range(16, 24))):
            sim.start(jid, p.name, p.scaled(k), plain_allocation(ref_node, tuple(cpus)))
        while sim.running:
            sim.advance()
        return sim.ended

    one, more = ends(1.0), ends(2.5)
    assert len(set(one.values())) == 3  # three different ends: the contention changes twice on the way
    assert all(more[j] == pytest.approx(2.5 * one[j]) for j in one)
    assert solo_time(ref_node, ft.scaled(0.4)) == pytest.approx(0.4 * solo_time(ref_node, ft))
