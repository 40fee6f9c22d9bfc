"""Continuous release (cosched slurm run --mode continuous) against the simulated Slurm (service/slurm/simcluster.py)
with the SPANK plugin's records played by test_slurm_once_sim.Plugin: each job's end frees its CPUs for the next
decision on that node, no group waits for another, every job is released once, crashes included."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from test_slurm_once_sim import NODE, HoldingSim, Plugin, held_again

from env.node.cpulist import parse_cpulist
from env.sim.nodes import load_node
from service.slurm import placement
from service.slurm.continuous import expand_nodes
from service.slurm.controller import Controller, ControllerConfig
from service.slurm.journal import Journal
from service.slurm.planner import in_process
from service.slurm.simcluster import SimCluster


def make(tmp_path: Path, sim: SimCluster, log: list[str], cmax: int = 2, policy: str | None = "greedy-continuous",
         journal: Journal | None = None) -> Controller:
    return Controller(ControllerConfig(partition="cosched", placement_dir=tmp_path / "placements", window=8, cmax=cmax,
                                       gather_s=0.0, stale_after_s=30.0, mode="continuous", policy=policy),
                      sim, in_process(NODE, "greedy", None), journal or Journal(tmp_path / "journal.sqlite"),
                      plan_node=lambda: load_node(NODE), log=log.append, clock=sim.clock)


class Watch:
    """Runs the controller and the simulated cluster, and watches what runs at once on each node."""

    def __init__(self, sim: SimCluster, plugin: Plugin, pdir: Path) -> None:
        self.sim, self.plugin, self.pdir = sim, plugin, pdir
        self.most: dict[str, int] = {}
        self.overlap: list[tuple[int, int]] = []
        self.start_t: dict[int, float] = {}
        self.end_t: dict[int, float] = {}
        self.cpus: dict[int, set[int]] = {}

    def run(self, ctl: Controller, seconds: float, dt: float = 0.5) -> None:
        for _ in range(int(seconds / dt)):
            ctl.step()
            self.plugin.advance(dt)
            running: dict[str, list[int]] = {}
            for i, j in self.sim._jobs.items():
                if j.job.state == "RUNNING":
                    running.setdefault(j.node or "?", []).append(i)
                    self.start_t.setdefault(i, self.sim.now)
                elif j.job.state == "COMPLETED":
                    self.end_t.setdefault(i, self.sim.now)
            for node, ids in running.items():
                self.most[node] = max(self.most.get(node, 0), len(ids))
                for i in ids:
                    if i not in self.cpus and placement.path_for(self.pdir, i).exists():
                        self.cpus[i] = set(parse_cpulist(placement.read(placement.path_for(self.pdir, i))["cpus"]))
                cpus = {i: self.cpus[i] for i in ids if i in self.cpus}
                self.overlap += [(a, b) for a in cpus for b in cpus if a < b and cpus[a] & cpus[b]]


def test_a_job_starts_when_another_ends_without_waiting_for_its_group(tmp_path: Path) -> None:
    sim = SimCluster(n_nodes=1, cpus=24)
    long_ = sim.submit("MG", runtime_s=20.0)
    short = [sim.submit(n, runtime_s=2.0) for n in ("EP", "CG", "FT")]
    pdir = tmp_path / "placements"
    plugin, log = Plugin(sim, pdir), []
    ctl = make(tmp_path, sim, log)
    w = Watch(sim, plugin, pdir)
    w.run(ctl, 40.0)
    ids = [long_, *short]
    assert all(plugin.runs.get(i) == 1 for i in ids) and all(sim.started(i) == 1 for i in ids), plugin.runs
    assert w.most["n1"] == 2 and not w.overlap  # Cmax, and no CPU given twice at once
    # no barrier: the short jobs ran one after another beside the long one, all before it ended
    assert all(w.end_t[i] < w.end_t[long_] for i in short), (w.start_t, w.end_t)
    assert any("after" in ln and "ended" in ln for ln in log), log


def test_jobs_spread_over_nodes_and_a_job_without_a_profile_runs_alone(tmp_path: Path) -> None:
    sim = SimCluster(n_nodes=2, cpus=24)
    ids = [sim.submit(n, runtime_s=3.0) for n in ("MG", "EP", "CG")]
    alone = sim.submit("no-such-program", runtime_s=3.0)
    pdir = tmp_path / "placements"
    plugin, log = Plugin(sim, pdir), []
    ctl = make(tmp_path, sim, log)
    w = Watch(sim, plugin, pdir)
    w.run(ctl, 30.0)
    assert all(plugin.runs.get(i) == 1 for i in [*ids, alone]), plugin.runs
    assert not w.overlap
    line = next(ln for ln in log if f"start {alone} (no-such-program)" in ln)
    assert "alone with the whole node" in line
    assert w.cpus[alone] == set(range(24))
    started_alone = w.start_t[alone]
    node = sim._jobs[alone].node
    others = [i for i in ids if sim._jobs[i].node == node]
    assert all(w.end_t[i] <= started_alone or w.start_t[i] >= w.end_t[alone] for i in others)


def watched(tmp_path: Path, sim: SimCluster) -> tuple[Controller, Watch, Plugin, list[str]]:
    """A controller (``make``'s) over ``sim``, the plugin's records played, what runs watched, and its log."""
    pdir = tmp_path / "placements"
    plugin, log = Plugin(sim, pdir), []
    return make(tmp_path, sim, log), Watch(sim, plugin, pdir), plugin, log


def test_a_job_runs_alone_on_a_whole_idle_node_while_nobody_waits_and_shares_once_others_do(tmp_path: Path) -> None:
    # the trace simulation's cosched rule (service/slurm/tracesim_policies.Cosched), in the controller itself
    sim = SimCluster(n_nodes=3, cpus=24)
    first = [sim.submit(n, runtime_s=30.0) for n in ("MG", "EP")]
    ctl, w, plugin, log = watched(tmp_path, sim)
    w.run(ctl, 2.0)
    # three idle nodes, two held jobs: each alone with a whole node of its own
    assert {sim._jobs[i].node for i in first} == {"n1", "n2"}, log
    assert all(w.cpus[i] == set(range(24)) for i in first)
    assert sum("runs alone with the whole node (nobody waits for a node)" in ln for ln in log) == 2, log
    # then four arrive for the one idle node left: they share it (and nothing joins the lone jobs' nodes)
    later = [sim.submit(n, runtime_s=3.0) for n in ("CG", "FT", "SP", "fft")]
    w.run(ctl, 20.0)
    assert all(plugin.runs.get(i) == 1 for i in [*first, *later]), plugin.runs
    assert {sim._jobs[i].node for i in later} == {"n3"} and w.most["n3"] == 2 and not w.overlap, log
    assert all(len(w.cpus[i]) == 12 for i in later)
    assert w.most["n1"] == w.most["n2"] == 1


def test_a_job_whose_program_gains_nothing_from_a_whole_node_shares_while_nodes_are_idle(tmp_path: Path) -> None:
    # DC runs as fast on a slot of 12 CPUs as on 24 (the node model): it leaves the whole idle node to a job that
    # gains from one (the trace simulation's LONE_MIN_GAIN)
    sim = SimCluster(n_nodes=3, cpus=24)
    ids = [sim.submit(n, runtime_s=30.0) for n in ("DC", "MG")]
    ctl, w, _, log = watched(tmp_path, sim)
    w.run(ctl, 2.0)
    assert all(sim.started(i) == 1 for i in ids), log
    assert len(w.cpus[ids[0]]) == 12 and w.cpus[ids[1]] == set(range(24)), (w.cpus, log)
    assert sum("runs alone with the whole node (nobody waits for a node)" in ln for ln in log) == 1, log
    assert not any(f"start {ids[0]} (DC)" in ln and "alone" in ln for ln in log), log


def test_a_lone_job_waits_the_gather_time_for_a_burst_and_then_shares_with_it(tmp_path: Path) -> None:
    sim = SimCluster(n_nodes=2, cpus=24)
    first = sim.submit("MG", runtime_s=30.0)
    pdir = tmp_path / "placements"
    plugin, log = Plugin(sim, pdir), []
    ctl = Controller(ControllerConfig(partition="cosched", placement_dir=pdir, window=8, cmax=2, gather_s=2.0,
                                      stale_after_s=30.0, mode="continuous", policy="greedy-continuous"),
                     sim, in_process(NODE, "greedy", None), Journal(tmp_path / "journal.sqlite"),
                     plan_node=lambda: load_node(NODE), log=log.append, clock=sim.clock)
    w = Watch(sim, plugin, pdir)
    w.run(ctl, 1.0)
    assert sim.started(first) == 0  # alone it would be: it waits for more first
    burst = [sim.submit(n, runtime_s=30.0) for n in ("EP", "CG", "FT")]
    w.run(ctl, 3.0)
    assert all(sim.started(i) == 1 for i in [first, *burst]), log  # four jobs, two nodes: they share
    assert all(len(w.cpus[i]) == 12 for i in [first, *burst]) and not w.overlap
    assert not any("nobody waits" in ln for ln in log), log


@pytest.mark.parametrize("cut", range(1, 7))
def test_a_controller_killed_anywhere_and_restarted_starts_each_job_once(tmp_path: Path, cut: int) -> None:
    sim = SimCluster(n_nodes=2, cpus=24)
    ids = [sim.submit(n, runtime_s=r) for n, r in (("MG", 3.0), ("EP", 1.0), ("CG", 2.0), ("FT", 1.0), ("IS", 2.0))]
    pdir = tmp_path / "placements"
    plugin, log = Plugin(sim, pdir), []
    w = Watch(sim, plugin, pdir)
    w.run(make(tmp_path, sim, log), cut * 0.5)  # the first life, cut after a few cycles (the journal is all that stays)
    w.run(make(tmp_path, sim, log, journal=Journal(tmp_path / "journal.sqlite")), 30.0)
    assert all(plugin.runs.get(i) == 1 for i in ids) and all(sim.started(i) == 1 for i in ids), (plugin.runs, sim.calls)
    assert not w.overlap and max(w.most.values()) <= 2


def test_a_decided_job_held_again_before_it_started_is_decided_again_and_one_that_started_is_not(tmp_path: Path) -> None:
    sim = HoldingSim(n_nodes=1, cpus=24)
    a, b = sim.submit("MG", runtime_s=5.0), sim.submit("EP", runtime_s=5.0)
    pdir = tmp_path / "placements"
    plugin, log = Plugin(sim, pdir), []
    ctl = make(tmp_path, sim, log)
    ctl.step()
    plugin.advance(0.5)  # both released and started
    c = sim.submit("CG", runtime_s=1.0)
    held_again(sim, a)  # slurmctld restarted from state saved before a's release: held, never released again
    w = Watch(sim, plugin, pdir)
    w.run(ctl, 20.0)
    assert plugin.runs == {a: 1, b: 1, c: 1} and sim.started(a) == 1
    assert sim._jobs[a].job.held and any(f"job {a} started" in ln for ln in log)


def test_an_unknown_policy_decides_nothing_and_says_why(tmp_path: Path) -> None:
    sim = SimCluster(n_nodes=1, cpus=24)
    ids = [sim.submit(n, runtime_s=1.0) for n in ("MG", "EP", "CG")]
    pdir = tmp_path / "placements"
    plugin, log = Plugin(sim, pdir), []
    Watch(sim, plugin, pdir).run(make(tmp_path, sim, log, policy="no-such-policy"), 2.0)
    assert not any(plugin.runs.get(i) for i in ids)
    assert sum("no decision" in ln and "no-such-policy" in ln for ln in log) == 1, log


def test_on_a_real_node_without_a_node_model_it_decides_with_packing_and_says_so(tmp_path: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COSCHED_HOME", str(tmp_path / "home"))  # no calibrated node model: rollout cannot decide
    local = load_node("local")
    sim = SimCluster(n_nodes=1, cpus=len(local.cpus))
    ids = [sim.submit("nap", runtime_s=1.0) for _ in range(3)]
    pdir = tmp_path / "placements"
    plugin, log = Plugin(sim, pdir), []
    ctl = Controller(ControllerConfig(partition="cosched", placement_dir=pdir, cmax=4, mode="continuous"), sim,
                     in_process("local", None, None), Journal(tmp_path / "journal.sqlite"), plan_node=lambda: local,
                     log=log.append, clock=sim.clock)
    w = Watch(sim, plugin, pdir)
    w.run(ctl, 10.0)
    assert all(plugin.runs.get(i) == 1 for i in ids) and not w.overlap
    assert w.most["n1"] == min(4, len(local.cpus))
    assert sum("deciding with packing" in ln for ln in log) == 1, log


def test_node_lists_expand() -> None:
    assert expand_nodes("n[1-3,5],m2") == ["n1", "n2", "n3", "n5", "m2"]
    assert expand_nodes("n07") == ["n07"] and expand_nodes("c[08-10]") == ["c08", "c09", "c10"]


def test_nodes_of_another_size_than_the_plan_node_start_nothing_and_it_says_so_once(tmp_path: Path) -> None:
    sim = SimCluster(n_nodes=2, cpus=2)  # the plan node, sim:reference, has 24
    ids = [sim.submit("MG", runtime_s=1.0) for _ in range(2)]
    pdir = tmp_path / "placements"
    plugin, log = Plugin(sim, pdir), []
    Watch(sim, plugin, pdir).run(make(tmp_path, sim, log), 3.0)
    assert not any(plugin.runs.get(i) for i in ids) and all(j.held for j in sim.jobs())
    assert sum("--plan-node" in ln and "nothing starts" in ln for ln in log) == 1, log


def test_a_job_without_a_profile_gets_a_node_drained_for_it_in_a_stream(tmp_path: Path) -> None:
    sim = SimCluster(n_nodes=1, cpus=24)
    first = [sim.submit(n, runtime_s=4.0) for n in ("MG", "EP")]
    pdir = tmp_path / "placements"
    plugin, log = Plugin(sim, pdir), []
    ctl = make(tmp_path, sim, log)
    w = Watch(sim, plugin, pdir)
    w.run(ctl, 1.0)
    alone = sim.submit("no-such-program", runtime_s=2.0)
    later = [sim.submit(n, runtime_s=4.0) for n in ("CG", "FT", "IS", "LU")]  # would keep the node busy for ever
    w.run(ctl, 40.0)
    assert all(plugin.runs.get(i) == 1 for i in [*first, alone, *later]), plugin.runs
    assert w.start_t[alone] < min(w.start_t[i] for i in later), (w.start_t, log)


@pytest.mark.parametrize("mode", ["groups", "continuous"])
def test_a_start_record_older_than_its_job_is_an_earlier_jobs_and_goes_aside(tmp_path: Path, mode: str) -> None:
    # A placement directory outlives a journal, and a slurmctld restarted from older state hands out ids again: a
    # start record of id 1 made before today's job 1 was submitted is the earlier job's. Seen on real daemons: the
    # job was taken for started and stayed held for good.
    sim = SimCluster(n_nodes=2, cpus=24)
    sim.now = 100.0
    pdir = tmp_path / "placements"
    (pdir / "started").mkdir(parents=True)
    (pdir / "ended").mkdir()
    (pdir / "started" / "1.batch.0").write_text("node=n1 time=70.0 pid=9 restarts=0")
    (pdir / "ended" / "1.batch.0").write_text("node=n1 time=80.0 exit=0")
    i = sim.submit("MG", runtime_s=2.0)
    later = sim.submit("EP", runtime_s=2.0)
    (pdir / "started" / f"{later}.batch.0").write_text("node=n1 time=100.5 pid=9 restarts=0")  # its own start
    plugin, log = Plugin(sim, pdir), []
    ctl = make(tmp_path, sim, log) if mode == "continuous" else Controller(
        ControllerConfig(partition="cosched", placement_dir=pdir, window=8, cmax=2, gather_s=0.0, stale_after_s=30.0),
        sim, in_process(NODE, "greedy", None), Journal(tmp_path / "journal.sqlite"), plan_node=lambda: load_node(NODE),
        log=log.append, clock=sim.clock)
    Watch(sim, plugin, pdir).run(ctl, 20.0)
    assert plugin.runs.get(i) == 1 and sim.started(i) == 1, (plugin.runs, log)
    assert sim._jobs[i].node == "n2"  # off the node that ran the earlier job 1 (its slurmd refuses the id a while)
    assert sorted(p.name for p in (pdir / "started").glob("1.batch.0*")) == ["1.batch.0", "1.batch.0~before100"]
    assert sum(f"job {i} (MG) has the id of an earlier job" in ln for ln in log) == 1, log
    # a record made after its job's submission is its own: that job is never released
    assert sim.started(later) == 0 and later not in plugin.runs


def test_a_start_its_policys_guard_decided_as_packing_says_so_in_the_log_and_the_journal(tmp_path: Path) -> None:
    # rollout's guard on these six jobs (sim:reference, Cmax 3, W 6): packing's slots, longest first, are predicted
    # shorter than its own play (408.2 s against 421.4 s), so it decides so; the operator reads why on the start's
    # line and in its decision
    sim = SimCluster(n_nodes=1, cpus=24)
    for name in ("BT", "lu_cb", "lu_ncb", "BT", "ocean_cp", "barnes"):
        sim.submit(name, runtime_s=5.0)
    journal, log = Journal(tmp_path / "journal.sqlite"), []
    ctl = Controller(ControllerConfig(partition="cosched", placement_dir=tmp_path / "placements", window=6, cmax=3,
                                      gather_s=0.0, stale_after_s=30.0, mode="continuous", policy="rollout"),
                     sim, in_process(NODE, "greedy", None), journal, plan_node=lambda: load_node(NODE),
                     log=log.append, clock=sim.clock)
    ctl.step()
    starts = [ln for ln in log if ": start " in ln]
    assert starts and "decided as packing (packing's slots, longest first)" in starts[0], log
    docs = [json.loads(r[0]) for r in sqlite3.connect(tmp_path / "journal.sqlite").execute("SELECT plan FROM windows")]
    assert docs and all("decided as packing" in (d.get("note") or "") for d in docs), docs


@pytest.mark.parametrize("learn", [True, False])
def test_a_programs_length_is_learned_from_its_jobs_that_ended_and_decides_its_next_ones(tmp_path: Path,
                                                                                           learn: bool) -> None:
    # MG's jobs run 30 s here whatever the node model says; one job at a time (Cmax 1), so each is predicted alone.
    # Once the first ended, the next is decided with MG's time alone as the records show it: the time its decision
    # took, times the seconds it ran over the seconds predicted. --no-learn-lengths keeps the profile's. (The last
    # job, with nobody waiting, runs alone with the whole node: no decision.)
    from env.sim.catalogue import catalogue

    sim = SimCluster(n_nodes=1, cpus=24)
    ids = [sim.submit("MG", runtime_s=30.0) for _ in range(3)]
    pdir, log = tmp_path / "placements", []
    plugin = Plugin(sim, pdir)
    ctl = Controller(ControllerConfig(partition="cosched", placement_dir=pdir, window=8, cmax=1, gather_s=0.0,
                                      stale_after_s=30.0, mode="continuous", policy="greedy-continuous",
                                      learn_lengths=learn),
                     sim, in_process(NODE, "greedy", None), Journal(tmp_path / "journal.sqlite"),
                     plan_node=lambda: load_node(NODE), log=log.append, clock=sim.clock)
    Watch(sim, plugin, pdir).run(ctl, 100.0)
    assert all(plugin.runs.get(i) == 1 for i in ids), plugin.runs
    docs = [json.loads(r[0])["starts"][0] for r in
            sqlite3.connect(tmp_path / "journal.sqlite").execute("SELECT plan FROM windows ORDER BY id")]
    assert [d["id"] for d in docs] == ids
    profile = catalogue(load_node(NODE))["MG"].solo_s
    first = docs[0]
    assert first["solo_s"] == pytest.approx(profile, abs=1e-3) and first["predicted_s"] > 0
    ran = placement.ended(pdir, ids[0]).time - placement.started(pdir, ids[0]).time
    learned = first["solo_s"] * ran / first["predicted_s"]
    taken = [ln for ln in log if "alone now taken as" in ln]
    if learn:
        assert abs(learned - profile) > 1.0  # the profile was off; the records say by how much
        assert docs[1]["solo_s"] == pytest.approx(learned, abs=1e-2)
        assert docs[1]["predicted_s"] == pytest.approx(ran, rel=0.02)  # predicted as it then ran
        assert taken and f"job {ids[0]} (MG) ran {ran:.1f} s" in taken[0], log
    else:
        assert [d.get("solo_s") for d in docs[:2]] == pytest.approx([profile] * 2, abs=1e-3) and not taken, docs


def test_a_jobs_own_solo_s_in_its_comment_decides_it_and_teaches_its_program_nothing(tmp_path: Path) -> None:
    # Three MG jobs of 30 s, one at a time (Cmax 1). The second says 'solo_s=500' in its comment: it is decided with
    # 500 s, its end teaches MG nothing, and the third is decided with what the first taught. A fourth job's
    # unreadable solo_s is said once and its program's length taken.
    sim = SimCluster(n_nodes=1, cpus=24)
    ids = [sim.submit("MG", runtime_s=30.0, comment=c) for c in ("", "profile=MG,solo_s=500", "", "solo_s=soon")]
    pdir, log = tmp_path / "placements", []
    plugin = Plugin(sim, pdir)
    ctl = Controller(ControllerConfig(partition="cosched", placement_dir=pdir, window=8, cmax=1, gather_s=0.0,
                                      stale_after_s=30.0, mode="continuous", policy="greedy-continuous"),
                     sim, in_process(NODE, "greedy", None), Journal(tmp_path / "journal.sqlite"),
                     plan_node=lambda: load_node(NODE), log=log.append, clock=sim.clock)
    Watch(sim, plugin, pdir).run(ctl, 140.0)
    assert all(plugin.runs.get(i) == 1 for i in ids), plugin.runs
    docs = {d["id"]: d for r in sqlite3.connect(tmp_path / "journal.sqlite").execute("SELECT plan FROM windows")
            for d in json.loads(r[0])["starts"]}
    assert docs[ids[1]]["solo_s"] == 500.0 and docs[ids[1]]["own_solo_s"] is True
    ran = placement.ended(pdir, ids[0]).time - placement.started(pdir, ids[0]).time
    learned = docs[ids[0]]["solo_s"] * ran / docs[ids[0]]["predicted_s"]
    assert docs[ids[2]]["solo_s"] == pytest.approx(learned, abs=1e-2)  # the first's lesson, not the second's 500 s
    assert not any(f"job {ids[1]} (MG) ran" in ln for ln in log)
    bad = [ln for ln in log if "solo_s='soon'" in ln]
    assert len(bad) == 1 and f"job {ids[3]}" in bad[0] and "own_solo_s" not in docs.get(ids[3], {})
    # a restarted controller learns again from its journal: every decided job that ended, but the one with its own
    again = Controller(ctl.cfg, sim, in_process(NODE, "greedy", None), Journal(tmp_path / "journal.sqlite"),
                       plan_node=lambda: load_node(NODE), log=[].append, clock=sim.clock)
    again._lengths(load_node(NODE), {"MG"})
    taught = [i for i, d in docs.items() if d.get("predicted_s") and not d.get("own_solo_s")]
    assert len(taught) >= 2 and len(again._c["lengths"].seen["MG"]) == len(taught)


def test_learned_lengths_take_the_median_of_a_programs_last_jobs_and_scale_the_programs_not_yet_seen() -> None:
    # the profiles were taken alike (here: each 1/3 of the work the jobs do), so a program none of whose jobs ended
    # yet is scaled by what the others showed, never left at its profile's length beside them
    from env.sim.catalogue import catalogue
    from service.lengths import LEARN_LAST, Lengths

    node = load_node(NODE)
    solo = {p: catalogue(node)[p].solo_s for p in ("MG", "EP", "FT")}
    lengths = Lengths(node)
    assert lengths.solo_s(solo) == {}  # nothing learned: the profiles' own
    lengths.started(1, "MG", (solo["MG"], 50.0))
    assert lengths.ended(1, None) is None and lengths.solo_s(solo) == {}  # a failed job teaches nothing
    for jid, ran in enumerate([150.0, 140.0, 400.0, 160.0, 150.0, 155.0, 145.0], start=2):  # one outlier among 7
        lengths.started(jid, "MG", (solo["MG"], 50.0))
        line = lengths.ended(jid, ran)
    assert line.startswith("job 8 (MG) ran 145.0 s where 50.0 s was predicted: MG alone now taken as")
    got = lengths.solo_s(["MG", "EP", "FT", "no-such-program"])
    assert len(lengths.seen["MG"]) == LEARN_LAST
    assert got["MG"] == pytest.approx(3 * solo["MG"] * 155.0 / 150.0)  # median of the last five: 155 s of 50 predicted
    assert got["EP"] == pytest.approx(solo["EP"] * got["MG"] / solo["MG"])
    assert got["FT"] == pytest.approx(solo["FT"] * got["MG"] / solo["MG"]) and "no-such-program" not in got
    lengths.started(9, "EP", (got["EP"], 10.0))
    lengths.ended(9, 5.0)  # EP ran half what was predicted with its scaled length
    after = lengths.solo_s(["MG", "EP", "FT"])
    assert after["EP"] == pytest.approx(got["EP"] / 2) and after["MG"] == got["MG"]
    k = sorted([got["MG"] / solo["MG"], after["EP"] / solo["EP"]])
    assert after["FT"] == pytest.approx(solo["FT"] * (k[0] + k[1]) / 2)  # the median of the two programs' ratios


def test_a_restarted_controller_learns_the_lengths_again_from_its_journal(tmp_path: Path) -> None:
    # the first controller decides MG's first two jobs and is dropped while the second runs (as a SIGKILL leaves
    # it: only the journal and the plugin's records stay); the next one learns from the first again, waits for the
    # second's end as if it had started it, and decides the third with MG's learned length
    from env.sim.catalogue import catalogue

    sim = SimCluster(n_nodes=1, cpus=24)
    ids = [sim.submit("MG", runtime_s=30.0) for _ in range(4)]
    pdir = tmp_path / "placements"
    plugin = Plugin(sim, pdir)
    w = Watch(sim, plugin, pdir)
    logs: list[list[str]] = [[], []]
    for life, seconds in ((0, 45.0), (1, 100.0)):
        ctl = Controller(ControllerConfig(partition="cosched", placement_dir=pdir, window=8, cmax=1, gather_s=0.0,
                                          stale_after_s=30.0, mode="continuous", policy="greedy-continuous"),
                         sim, in_process(NODE, "greedy", None), Journal(tmp_path / "journal.sqlite"),
                         plan_node=lambda: load_node(NODE), log=logs[life].append, clock=sim.clock)
        w.run(ctl, seconds)
    assert all(plugin.runs.get(i) == 1 for i in ids), plugin.runs
    docs = [json.loads(r[0])["starts"][0] for r in
            sqlite3.connect(tmp_path / "journal.sqlite").execute("SELECT plan FROM windows ORDER BY id")]
    assert [d["id"] for d in docs[:3]] == ids[:3]
    assert any(f"job {ids[0]} (MG) ran" in ln for ln in logs[0]) and not any(f"job {ids[1]} (MG) ran" in ln
                                                                              for ln in logs[0])
    again = [ln for ln in logs[1] if "learned again from the journal" in ln]
    assert again and "(1 of its jobs ended): MG " in again[0], logs[1]  # the first; the second still ran
    assert any(f"job {ids[1]} (MG) ran" in ln for ln in logs[1])  # and was waited for, its start a journaled one
    profile = catalogue(load_node(NODE))["MG"].solo_s
    assert abs(docs[2]["solo_s"] - profile) > 1.0
    assert docs[2]["solo_s"] == pytest.approx(docs[1]["solo_s"], rel=0.03)  # both jobs ran 30 s


def test_a_learned_length_stays_within_what_a_decision_takes() -> None:
    # a job predicted to end at once that ran for hours (or the reverse) must not make the next decision refuse
    from service.lengths import MAX_SOLO_S, MIN_SOLO_S, Lengths

    lengths = Lengths(load_node(NODE))
    lengths.started(1, "MG", (1e6, 1e-6))
    lengths.ended(1, 1e6)
    lengths.started(2, "EP", (1e-6, 1e6))
    lengths.ended(2, 1e-6)
    got = lengths.solo_s(["MG", "EP"])
    assert got == {"MG": MAX_SOLO_S, "EP": MIN_SOLO_S}
    from service.slurm.decider import Queued, decide

    d = decide(load_node(NODE), [], [Queued(3, "MG", 0.0, got["MG"]), Queued(4, "EP", 0.0, got["EP"])], 2, now_s=0.0)
    assert d.starts and {i for i, _ in d.starts} <= {3, 4}  # decided, not refused
