"""A continuous run's jobs as calibration records: each set of jobs that overlapped in time is one record with each
job's start (``RunRecord.start_s``), and the node model predicts each job between the others' measured starts and
ends (``env.sim.probes.timeline_times``)."""

from __future__ import annotations

import pytest

from env.calibration.learned import coruns_in
from env.calibration.runs import online_records
from env.measure.probing import Placement
from env.sim.nodes import load_node
from env.sim.probes import GroupModel, timeline_times
from env.sim.world import world_for
from profiler.interference import PlacementRecord, RunRecord

NODE = load_node("sim:reference")
WORLD = world_for(NODE)
GM = GroupModel(NODE, WORLD.params, {n: e.params for n, e in WORLD.entries.items()}, WORLD.probe)
SOCKET0, SOCKET1 = sorted(NODE.numa[0].cpus), sorted(NODE.numa[1].cpus)


def test_jobs_started_together_whose_ends_are_the_models_own_are_the_group_run() -> None:
    group = [Placement("MG", tuple(SOCKET0[:6])), Placement("CG", tuple(SOCKET0[6:])), Placement("EP", tuple(SOCKET1))]
    together = GM.times(group)[0]
    assert timeline_times(GM, group, [0.0, 0.0, 0.0], together) == pytest.approx(together, rel=1e-9)


def test_a_job_runs_alone_until_its_partner_starts_and_beside_it_after() -> None:
    a, b = Placement("MG", tuple(SOCKET0[:6])), Placement("CG", tuple(SOCKET0[6:]))
    alone, together = GM.times([a])[0][0], GM.times([a, b])[0][0]
    assert together > alone * 1.01  # they contend for the socket's memory
    later = timeline_times(GM, [a, b], [0.0, 10 * alone], [alone, 50.0])
    assert later[0] == pytest.approx(alone, rel=1e-9)  # its partner came after its end
    part = timeline_times(GM, [a, b], [0.0, alone / 2], [alone, 50.0])
    assert alone < part[0] < together  # beside it for its second half only


def test_past_its_measured_end_a_job_loses_the_partner_that_took_its_cpus() -> None:
    a, b = Placement("MG", tuple(SOCKET0[:6])), Placement("CG", tuple(SOCKET0[:6]))
    alone = GM.times([a])[0][0]
    got = timeline_times(GM, [a, b], [0.0, alone / 2], [alone / 2, 10.0])  # measured shorter than the model says
    assert got[0] == pytest.approx(alone, rel=1e-9)  # not slowed by b, which ran on its CPUs after it


def test_a_continuous_runs_jobs_are_split_into_the_sets_that_overlapped() -> None:
    jobs = [("MG", [0], None, 0.0, 5.0), ("CG", [1], "interleave", 1.0, 7.0), ("EP", [0], None, 6.0, 9.0),
            ("FT", [1], None, 12.0, 15.0), ("IS", [0], None, 20.0, 22.0), ("LU", [1], None, 21.0, 24.0)]
    recs = online_records(jobs, simulated=False)
    assert [[p.job for p in r.group] for r in recs] == [["MG", "CG", "EP"], ["FT"], ["IS", "LU"]]
    assert recs[0].start_s == [0.0, 1.0, 6.0] and recs[0].times_s == [5.0, 6.0, 3.0] and recs[0].node_seconds == 9.0
    assert recs[0].group[1].memory == "interleave" and recs[0].makespan_s == 9.0
    assert recs[1].start_s is None and recs[1].times_s == [3.0]  # alone on its CPUs, as a group plan's lone job
    assert recs[2].start_s == [0.0, 1.0]
    # MG and EP never ran at the same time, but each overlapped CG: one co-run each; CG two
    assert [coruns_in(recs[0], n) for n in ("MG", "CG", "EP")] == [1, 1, 1]
    twice = RunRecord(kind="corun", group=[PlacementRecord(job="MG", cpus=[0]), PlacementRecord(job="CG", cpus=[1]),
                                           PlacementRecord(job="MG", cpus=[0])],
                      times_s=[2.0, 5.0, 2.0], start_s=[0.0, 0.0, 2.5], node_seconds=5.0)
    assert coruns_in(twice, "MG") == 2 and coruns_in(twice, "CG") == 1 and coruns_in(recs[1], "FT") == 0


def test_a_record_needs_one_start_per_placement() -> None:
    with pytest.raises(ValueError, match="one start"):
        RunRecord(kind="corun", group=[PlacementRecord(job="MG", cpus=[0]), PlacementRecord(job="CG", cpus=[1])],
                  times_s=[1.0, 1.0], start_s=[0.0], node_seconds=1.0)


def test_a_subset_of_jobs_is_predicted_as_in_the_whole_and_says_which_rates_it_used() -> None:
    """What a fit relies on to predict once what a program's parameters cannot move: ``which`` predicts only some jobs
    (the same times as the whole), ``sets`` names every job whose rate each prediction used, and a memo of solves
    shared between models gives the same doubles as none."""
    group = [Placement("MG", tuple(SOCKET0[:6])), Placement("CG", tuple(SOCKET0[6:])),
             Placement("EP", tuple(SOCKET0[:6])), Placement("FT", tuple(SOCKET1))]
    # as measured: MG and CG side by side, EP on MG's CPUs after it, FT long after all of them (times of 100-250 s)
    starts, measured = [0.0, 50.0, 230.0, 2000.0], [220.0, 260.0, 200.0, 100.0]
    sets: list[set[int]] = []
    whole = timeline_times(GM, group, starts, measured, sets=sets)
    assert all(t is not None for t in whole) and len(sets) == 4
    assert sets[0] >= {0, 1} and 3 not in sets[0] and sets[3] == {3}  # FT ran beside no one
    assert sets[2] == {1, 2} and sets[1] >= {0, 1, 2}  # EP took MG's CPUs after it ended, beside CG until its end
    part = timeline_times(GM, group, starts, measured, which=[2, 0])
    assert part[1] is None and part[3] is None and (part[0], part[2]) == (whole[0], whole[2])
    memo: dict = {}
    cached = GroupModel(NODE, WORLD.params, GM.jobs, WORLD.probe, memo=memo)
    assert timeline_times(cached, group, starts, measured) == whole and memo
    assert timeline_times(cached, group, starts, measured) == whole  # now from the memo
