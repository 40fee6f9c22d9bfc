"""Exactly once, whatever crashes: the controller against a simulated Slurm (service/slurm/simcluster.py) whose
slurmctld 'restarts from older state' on demand, with the SPANK plugin's records played here (a start record when a
job starts, a refusal when it starts again, an end record when it ends). The same paths run on real daemons in
test_slurm_crash.py; here each is set up exactly."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from env.sim.nodes import load_node
from service.slurm import placement
from service.slurm.controller import Controller, ControllerConfig
from service.slurm.recovery import AVOID_S
from service.slurm.journal import Journal
from service.slurm.planner import in_process
from service.slurm.simcluster import SimCluster

NODE = "sim:reference"


class Plugin:
    """What the SPANK plugin records under the placement directory, as the simulated jobs start and end."""

    def __init__(self, sim: SimCluster, pdir: Path) -> None:
        self.sim, self.pdir = sim, pdir
        self.state = {i: j.job.state for i, j in sim._jobs.items()}
        self.runs: dict[int, int] = {}  # job id -> starts that ran (refused ones excluded)

    def _write(self, kind: str, name: str, text: str) -> None:
        (self.pdir / kind).mkdir(parents=True, exist_ok=True)
        try:
            with open(self.pdir / kind / name, "x") as f:  # O_CREAT|O_EXCL, as native/src/spank/marker.c
                f.write(text)
        except FileExistsError:
            pass  # the plugin says so in slurmd's log; the record stays the first one

    def advance(self, dt: float) -> None:
        self.sim.advance(dt)
        for i, j in self.sim._jobs.items():
            before, now = self.state.get(i), j.job.state
            if now == "RUNNING" and before != "RUNNING":
                if (self.pdir / "started" / f"{i}.batch.0").exists():  # a second start: refused, the task fails
                    self._write("refused", f"{i}.batch.0.{int(self.sim.now * 1e9)}", f"node={j.node} time={self.sim.now}")
                    j.job = replace(j.job, state="FAILED")
                else:
                    self._write("started", f"{i}.batch.0", f"node={j.node} time={self.sim.now} pid=1 restarts=0")
                    self.runs[i] = self.runs.get(i, 0) + 1
            if j.job.state == "COMPLETED" and before != "COMPLETED":
                self._write("ended", f"{i}.batch.0", f"node={j.node} time={self.sim.now} exit=0")
            self.state[i] = j.job.state


def make(tmp_path: Path, sim: SimCluster, log: list[str], gather_s: float = 0.0, mode: str = "groups") -> Controller:
    return Controller(ControllerConfig(partition="cosched", placement_dir=tmp_path / "placements", window=8, cmax=4,
                                       gather_s=gather_s, stale_after_s=30.0, mode=mode),
                      sim, in_process(NODE, "greedy", None), Journal(tmp_path / "journal.sqlite"),
                      plan_node=lambda: load_node(NODE), log=log.append, clock=sim.clock)


def run(ctl: Controller, plugin: Plugin, seconds: float, dt: float = 0.5) -> None:
    for _ in range(int(seconds / dt)):
        ctl.step()
        plugin.advance(dt)


def held_again(sim: SimCluster, i: int) -> None:
    """slurmctld restarted from state saved before the job's release: it is held again, on no node."""
    j = sim._jobs[i]
    j.job = replace(j.job, state="PENDING", priority=0, reason="JobHeldUser", nodes="", start_time=0)
    j.node, j.end_s = None, None


def test_a_job_held_again_after_it_started_is_not_released_again(tmp_path: Path) -> None:
    sim = SimCluster(n_nodes=1, cpus=24)
    ids = [sim.submit(n, runtime_s=3.0) for n in ("MG", "EP")]
    plugin, log = Plugin(sim, tmp_path / "placements"), []
    ctl = make(tmp_path, sim, log)
    run(ctl, plugin, 1.0)
    assert all(plugin.runs.get(i) == 1 for i in ids)
    for i in ids:
        held_again(sim, i)
    run(ctl, plugin, 10.0)
    assert all(sim.started(i) == 1 for i in ids), "never released twice"
    assert all(j.held for j in sim.jobs()), "left held for the operator"
    for i in ids:
        lines = [ln for ln in log if ln.startswith(f"job {i} started on n1") and "brought it back held" in ln]
        assert len(lines) == 1 and f"scancel {i}" in lines[0], log
    assert not ctl.pending_work()
    # A new life of the controller says nothing again.
    ctl.journal.close()
    log2: list[str] = []
    again = make(tmp_path, sim, log2)
    run(again, plugin, 3.0)
    assert not [ln for ln in log2 if "brought it back held" in ln] and all(sim.started(i) == 1 for i in ids)


def test_a_release_lost_before_the_job_started_is_sent_again(tmp_path: Path) -> None:
    sim = SimCluster(n_nodes=1, cpus=24)
    ids = [sim.submit(n, runtime_s=2.0) for n in ("MG", "EP")]
    plugin, log = Plugin(sim, tmp_path / "placements"), []
    ctl = make(tmp_path, sim, log)
    ctl.step()  # released; slurmctld restarts before it starts them
    for i in ids:
        held_again(sim, i)
    run(ctl, plugin, 10.0)
    assert all(sim.started(i) == 2 and plugin.runs[i] == 1 for i in ids)
    assert all(j.state == "COMPLETED" for j in sim.jobs())


def test_jobs_slurm_lost_are_reported_once_with_how_to_resubmit_and_their_ids_reused(tmp_path: Path) -> None:
    sim = SimCluster(n_nodes=2, cpus=24)
    ids = [sim.submit(n, runtime_s=4.0) for n in ("MG", "EP", "CG", "FT", "SP", "fft")]
    for i in ids:
        j = sim._jobs[i]
        j.job = replace(j.job, command=f"/home/u/job{i}.sh", workdir="/home/u")
    plugin, log = Plugin(sim, tmp_path / "placements"), []
    ctl = make(tmp_path, sim, log)
    run(ctl, plugin, 1.0)
    running = [i for i in ids if plugin.runs.get(i)]
    waiting = [i for i in ids if i not in running]
    assert running and waiting, "two nodes: some groups wait"
    # slurmctld restarts from state saved before the last two were submitted: it forgets them (one running, one
    # waiting in the journal) and gives their ids to the next submissions.
    lost = [running[-1], waiting[-1]]
    top = sim._next_id
    fresh = []
    for i in lost:
        del sim._jobs[i]
        sim._next_id = i
        fresh.append(sim.submit("EP", runtime_s=1.0))
        j = sim._jobs[i]
        j.job = replace(j.job, submit_time=j.job.submit_time + 10)
    sim._next_id = top
    assert fresh == lost
    run(ctl, plugin, 40.0)
    for i in lost:
        lines = [ln for ln in log if ln.startswith(f"job {i} (") and "lost by Slurm" in ln]
        assert len(lines) == 1, log
        assert f"-p cosched -J {sim_name(ids, i)} -D /home/u /home/u/job{i}.sh" in lines[0], lines[0]
        assert ("after it started on n" in lines[0]) == (i == running[-1]), lines[0]
        assert "ended" not in lines[0]
    # The new jobs with the lost ids are planned and run as themselves (the old one's start record moved aside).
    assert all(sim._jobs[i].job.state == "COMPLETED" for i in fresh)
    assert any("a new job with the id of a job Slurm lost" in ln for ln in log)
    assert all(j.state == "COMPLETED" for j in sim.jobs())
    statuses = {r.job_id: r.status for r in ctl.journal.all_jobs()}
    assert all(statuses[i] == "done" for i in fresh)
    assert sorted(ctl.journal.db.execute("SELECT job_id FROM retired_jobs")) == sorted((i,) for i in lost)


def test_a_reused_id_keeps_off_the_node_its_old_job_ran_on(tmp_path: Path) -> None:
    # A slurmd that ran a job id refuses it again for a while, and Slurm drains the node (seen on real daemons).
    sim = SimCluster(n_nodes=2, cpus=24)
    i = sim.submit("MG", runtime_s=1.0)
    plugin, log = Plugin(sim, tmp_path / "placements"), []
    ctl = make(tmp_path, sim, log)
    ctl.step()
    for _ in range(4):  # it runs and ends while the controller does not look; then Slurm loses it
        plugin.advance(0.5)
    assert sim._jobs[i].node == "n1" and plugin.runs[i] == 1
    del sim._jobs[i]
    sim._next_id = i
    assert sim.submit("EP", runtime_s=1.0) == i
    j = sim._jobs[i]
    assert j.job.submit_time > 0, "a later submission"
    plugin.state[i] = "PENDING"
    run(ctl, plugin, 5.0)
    assert j.job.state == "COMPLETED" and j.node == "n2" and plugin.runs[i] == 2  # two jobs, each once
    assert (tmp_path / "placements" / "started" / f"{i}.batch.0~0").exists()


def lose_running(sim: SimCluster, plugin: Plugin, i: int, name: str) -> int:
    """slurmctld restarts from state saved before job ``i`` started: it forgets ``i``, which runs on where it started
    (its slurmd still has it), and gives the id to the next submission, ``name``. Returns the lost job's submit time."""
    old_submit = sim._jobs[i].job.submit_time
    del sim._jobs[i]
    top, sim._next_id = sim._next_id, i
    assert sim.submit(name, runtime_s=5.0) == i
    sim._next_id = top
    plugin.state[i] = "PENDING"
    return old_submit


def one_job(tmp_path: Path, n_nodes: int, runtime_s: float, mode: str = "groups"
            ) -> tuple[SimCluster, int, Plugin, list[str], Controller]:
    """A cluster of ``n_nodes``, one MG job of ``runtime_s`` submitted, the plugin and a controller."""
    sim = SimCluster(n_nodes=n_nodes, cpus=24)
    i = sim.submit("MG", runtime_s=runtime_s)
    log: list[str] = []
    plugin = Plugin(sim, tmp_path / "placements")
    return sim, i, plugin, log, make(tmp_path, sim, log, mode=mode)


@pytest.mark.parametrize("mode", ["groups", "continuous"])
def test_a_reused_id_keeps_off_its_old_jobs_node_for_good_and_that_jobs_late_end_goes_aside(
        tmp_path: Path, mode: str) -> None:
    # Seen on real daemons (a fresh-clone CI run): 150 s after the old job of a reused id had ended, its slurmd still
    # refused the id as a duplicate and Slurm drained the node. While another node can take it, the new job waits
    # for that one, however long.
    sim, i, plugin, log, ctl = one_job(tmp_path, 2, 1000.0, mode)
    pdir = tmp_path / "placements"
    run(ctl, plugin, 2.0)
    blocker = sim.submit("CG", runtime_s=250.0)
    run(ctl, plugin, 2.0)
    assert sim._jobs[i].node == "n1" and sim._jobs[blocker].node == "n2", log
    old_submit = lose_running(sim, plugin, i, "EP")
    lost_at, calls_before = sim.now, len(sim.calls)
    for k in range(175):  # 350 s: the old job runs on on n1 unseen until t=100 s, then writes its end there
        if k == 20:  # the controller restarts: what it knew of the id is in the placement directory
            ctl = make(tmp_path, sim, log, mode=mode)
        if sim.now - lost_at >= 100.0 and not (pdir / "ended" / f"{i}.batch.0~{old_submit}").exists():
            plugin._write("ended", f"{i}.batch.0", f"node=n1 time={sim.now} pid=1 restarts=0 exit=0")
        run(ctl, plugin, 2.0, dt=2.0)
    assert ("pin", (i,), "n1") not in sim.calls[calls_before:], log
    j = sim._jobs[i]
    assert j.job.state == "COMPLETED" and j.node == "n2" and plugin.runs[i] == 2, log  # two jobs, each once
    if mode == "groups":  # a group takes a whole idle node: it waited for the blocker's end, past AVOID_S
        assert j.job.start_time >= lost_at + 200.0
    # the old job's late end went aside, so the new job's end is its own
    assert "node=n1" in (pdir / "ended" / f"{i}.batch.0~{old_submit}").read_text()
    assert "node=n2" in (pdir / "ended" / f"{i}.batch.0").read_text()
    assert {r.job_id: r.status for r in ctl.journal.all_jobs()}[i] == "done"


def test_a_reused_id_keeps_off_the_node_its_old_job_was_released_onto_though_no_start_was_recorded(
        tmp_path: Path) -> None:
    # A released job may reach its node's slurmd before slurmctld loses it, with no start recorded yet: the likely
    # cause of one 'Duplicate jobid' drain in 13 runs of bench/slurm_crash.py (2026-11-28), no job run twice
    sim, i, plugin, log, ctl = one_job(tmp_path, 2, 5.0)
    ctl.step()  # released onto n1; Slurm loses it before any start is recorded
    assert sim._jobs[i].node == "n1" and i not in plugin.runs
    sim.now += 5.0  # slurmctld is down a while: the new job is a later submission
    lose_running(sim, plugin, i, "EP")
    run(ctl, plugin, 10.0)
    j = sim._jobs[i]
    assert j.job.state == "COMPLETED" and j.node == "n2" and plugin.runs[i] == 1, log


def test_a_reused_id_every_node_ran_goes_to_one_after_a_while_and_says_so(tmp_path: Path) -> None:
    sim, i, plugin, log, ctl = one_job(tmp_path, 1, 1000.0)
    run(ctl, plugin, 2.0)
    assert sim._jobs[i].node == "n1"
    lose_running(sim, plugin, i, "EP")
    last_seen = sim.now - 0.5
    run(ctl, plugin, 200.0, dt=1.0)
    j = sim._jobs[i]
    assert j.job.state == "COMPLETED" and j.node == "n1" and j.job.start_time >= last_seen + AVOID_S - 1.0, log
    said = [ln for ln in log if ln.startswith(f"job {i}: every usable node of partition cosched ran an earlier job")]
    assert len(said) == 1, log


def sim_name(ids: list[int], i: int) -> str:
    return ("MG", "EP", "CG", "FT", "SP", "fft")[ids.index(i)]


def test_a_job_seen_but_not_yet_planned_that_slurm_lost_is_reported(tmp_path: Path) -> None:
    sim = SimCluster(n_nodes=1, cpus=24)
    i = sim.submit("MG")
    plugin, log = Plugin(sim, tmp_path / "placements"), []
    ctl = make(tmp_path, sim, log, gather_s=60.0)  # the window is still gathering
    run(ctl, plugin, 2.0)
    assert not ctl.journal.all_jobs()
    del sim._jobs[i]
    run(ctl, plugin, 2.0)
    lines = [ln for ln in log if "lost by Slurm before it started" in ln]
    assert len(lines) == 1 and lines[0].startswith(f"job {i} (MG, partition cosched)"), log


def test_a_job_that_ended_and_came_back_running_is_cancelled_not_rerun(tmp_path: Path) -> None:
    sim = SimCluster(n_nodes=1, cpus=24)
    i = sim.submit("MG", runtime_s=1.0)
    plugin, log = Plugin(sim, tmp_path / "placements"), []
    ctl = make(tmp_path, sim, log)
    ctl.step()
    for _ in range(6):  # it runs and ends while the controller does not look
        plugin.advance(0.5)
    assert sim._jobs[i].job.state == "COMPLETED"
    j = sim._jobs[i]  # slurmctld restored from state saved while it ran: RUNNING, and nothing will end it
    j.job, j.end_s = replace(j.job, state="RUNNING"), float("inf")
    plugin.state[i] = "RUNNING"
    run(ctl, plugin, 10.0)
    assert j.job.state == "RUNNING", "not before stale_after_s"
    run(ctl, plugin, 30.0)
    assert j.job.state == "CANCELLED" and plugin.runs[i] == 1
    assert sum(f"job {i} ended on n1" in ln and "cancelled in Slurm" in ln for ln in log) == 1


def test_each_refused_second_start_is_reported_once(tmp_path: Path) -> None:
    sim = SimCluster(n_nodes=1, cpus=24)
    i = sim.submit("MG", runtime_s=1.0)
    plugin, log = Plugin(sim, tmp_path / "placements"), []
    ctl = make(tmp_path, sim, log)
    run(ctl, plugin, 3.0)
    j = sim._jobs[i]  # requeued by Slurm after it ran, pinned to its node: the plugin refuses it
    j.job, j.end_s = replace(j.job, state="PENDING", priority=1, reason="None"), None
    run(ctl, plugin, 3.0)
    assert j.job.state == "FAILED" and plugin.runs[i] == 1
    lines = [ln for ln in log if ln.startswith(f"job {i} came back after it had started on n1")]
    assert len(lines) == 1 and "it did not run twice" in lines[0]
    ctl.journal.close()
    log2: list[str] = []
    run(make(tmp_path, sim, log2), plugin, 2.0)
    assert not [ln for ln in log2 if "came back" in ln]
    assert placement.refusals(tmp_path / "placements")[0].job_id == i


class HoldingSim(SimCluster):
    """The simulated Slurm with 'scontrol hold'."""

    def hold(self, job_id: int) -> None:
        j = self._jobs[job_id]
        if j.job.state != "PENDING":
            from service.slurm.slurmcmd import JobGone

            raise JobGone(f"job {job_id}: Job is no longer pending execution")
        j.job = replace(j.job, priority=0, reason="JobHeldUser")
        self.calls.append(("hold", (job_id,), None))

    def advance_parking(self, dt: float, parked_ids: set[int]) -> None:
        """One step with the jobs ``parked_ids`` off their node for Slurm's pass (none of them starts), pinned
        there again after it."""
        parked = [(j, j.node) for i, j in self._jobs.items() if i in parked_ids]
        for j, _ in parked:
            j.node = None
        super().advance(dt)
        for j, node in parked:
            if j.node is None:
                j.node = node


def test_a_job_brought_back_pending_after_it_started_is_held_before_slurm_starts_it_again(tmp_path: Path) -> None:
    # On real daemons Slurm would schedule it on its node again, whose slurmd refuses the id it ran: node drained.
    sim = HoldingSim(n_nodes=1, cpus=24)
    i = sim.submit("MG", runtime_s=1.0)
    plugin, log = Plugin(sim, tmp_path / "placements"), []
    ctl = make(tmp_path, sim, log)
    run(ctl, plugin, 3.0)
    assert plugin.runs[i] == 1 and sim._jobs[i].job.state == "COMPLETED"
    j = sim._jobs[i]  # restored from state saved after its release, before its start: pending, released, pinned
    j.job, j.end_s = replace(j.job, state="PENDING", priority=1, reason="None", start_time=0), None
    plugin.state[i] = "PENDING"
    run(ctl, plugin, 5.0)
    assert ("hold", (i,), None) in sim.calls and j.job.held and plugin.runs[i] == 1
    assert not placement.refusals(tmp_path / "placements"), "held before it could start again"
    lines = [ln for ln in log if ln.startswith(f"job {i} started on n1") and "back pending: held" in ln]
    assert len(lines) == 1, log
    assert sim.started(i) == 1


def test_a_job_seen_ending_that_comes_back_running_is_cancelled_too(tmp_path: Path) -> None:
    sim = SimCluster(n_nodes=1, cpus=24)
    i = sim.submit("MG", runtime_s=1.0)
    plugin, log = Plugin(sim, tmp_path / "placements"), []
    ctl = make(tmp_path, sim, log)
    run(ctl, plugin, 4.0)
    assert not ctl.pending_work() and [g.status for g in ctl.journal.groups()] == ["done"]
    j = sim._jobs[i]
    j.job, j.end_s = replace(j.job, state="RUNNING"), float("inf")
    plugin.state[i] = "RUNNING"
    run(ctl, plugin, 40.0)
    assert j.job.state == "CANCELLED" and plugin.runs[i] == 1
    assert sum("cancelled in Slurm so that its node frees" in ln for ln in log) == 1


def test_a_job_that_starts_just_after_the_queue_was_read_is_not_held(tmp_path: Path) -> None:
    # The queue said pending (released, not yet running); its start record appears before the controller looks.
    sim = HoldingSim(n_nodes=1, cpus=24)
    i = sim.submit("MG", runtime_s=5.0)
    plugin, log = Plugin(sim, tmp_path / "placements"), []
    ctl = make(tmp_path, sim, log)
    ctl.step()  # released: pending until the next scheduling pass
    real_jobs = sim.jobs

    def jobs_then_start():  # the job starts between the controller's read of the queue and its look at the records
        snapshot = real_jobs()
        plugin._write("started", f"{i}.batch.0", f"node=n1 time={sim.now + 0.01} pid=1 restarts=0")
        return snapshot

    sim.jobs = jobs_then_start  # type: ignore[method-assign]
    ctl.step()
    assert not [c for c in sim.calls if c[0] == "hold"] and not [ln for ln in log if "held" in ln]


class DrainSim(HoldingSim):
    """...whose nodes in ``drained`` Slurm has drained: nothing starts there."""

    drained: set[str] = set()

    def nodes(self):  # type: ignore[no-untyped-def]
        return [replace(n, state=n.state + "+drain") if n.name in self.drained else n for n in super().nodes()]

    def advance(self, dt: float) -> None:
        self.advance_parking(dt, {i for i, j in self._jobs.items() if j.node in self.drained and j.job.state == "PENDING"})


def test_a_group_released_on_a_node_slurm_then_drained_moves_to_another(tmp_path: Path) -> None:
    # Seen on real daemons: a restarted slurmctld gives a plain job back to a slurmd that ran its id; the node is
    # drained, and the jobs pinned there would wait for an operator.
    sim = DrainSim(n_nodes=2, cpus=24)
    sim.drained = set()
    i = sim.submit("MG", runtime_s=1.0)
    plugin, log = Plugin(sim, tmp_path / "placements"), []
    ctl = make(tmp_path, sim, log)
    ctl.step()
    assert sim._jobs[i].node == "n1" and sim._jobs[i].job.state == "PENDING"
    sim.drained = {"n1"}
    run(ctl, plugin, 5.0)
    assert sim._jobs[i].job.state == "COMPLETED" and sim._jobs[i].node == "n2" and plugin.runs[i] == 1
    assert sum("its node n1 is drained or down" in ln for ln in log) == 1


class BusySim(HoldingSim):
    """...whose slurmctld believes the nodes in ``busy`` allocated (a job that ended after its last state save shows
    running there until the node registers again, minutes later): a job pinned there does not start; ``only``, when
    set, limits that to those job ids."""

    busy: frozenset[str] = frozenset()
    only: frozenset[int] | None = None

    def nodes(self):  # type: ignore[no-untyped-def]
        return [replace(n, state="mixed") if n.name in self.busy else n for n in super().nodes()]

    def advance(self, dt: float) -> None:
        self.advance_parking(dt, {i for i, j in self._jobs.items() if j.node in self.busy and j.job.state == "PENDING"
                                  and (self.only is None or i in self.only)})


def test_a_group_slurm_keeps_pending_on_a_node_it_believes_busy_moves_to_another(tmp_path: Path) -> None:
    # The CI flake of the crash test: a released group pinned to a node a restarted slurmctld believes busy waited
    # there, unrun, with the controller silent.
    sim = BusySim(n_nodes=2, cpus=24)
    i = sim.submit("MG", runtime_s=1.0)
    plugin, log = Plugin(sim, tmp_path / "placements"), []
    ctl = make(tmp_path, sim, log)
    ctl.step()
    assert sim._jobs[i].node == "n1" and sim._jobs[i].job.state == "PENDING"
    sim.busy = frozenset({"n1"})
    run(ctl, plugin, 20.0)
    assert sim._jobs[i].job.state == "PENDING", "not moved before stale_after_s"
    run(ctl, plugin, 20.0)
    assert sim._jobs[i].job.state == "COMPLETED" and sim._jobs[i].node == "n2" and plugin.runs[i] == 1
    moved = [ln for ln in log if "none of its jobs started" in ln]
    assert len(moved) == 1 and "pending on n1" in moved[0] and "held, it waits for another node" in moved[0], log


def test_the_unstarted_rest_of_a_group_moves_once_its_started_part_has_ended(tmp_path: Path) -> None:
    sim = BusySim(n_nodes=2, cpus=24)
    a, b = sim.submit("MG", runtime_s=40.0), sim.submit("EP", runtime_s=1.0)
    plugin, log = Plugin(sim, tmp_path / "placements"), []
    ctl = Controller(ControllerConfig(partition="cosched", placement_dir=tmp_path / "placements", window=8, cmax=4,
                                      gather_s=0.0, stale_after_s=30.0),
                     sim, lambda w: pair_plan(w), Journal(tmp_path / "journal.sqlite"),
                     plan_node=lambda: load_node(NODE), log=log.append, clock=sim.clock)
    ctl.step()
    assert sim._jobs[a].node == sim._jobs[b].node == "n1"
    sim.busy, sim.only = frozenset({"n1"}), frozenset({b})
    run(ctl, plugin, 35.0)
    assert plugin.runs.get(a) == 1 and b not in plugin.runs, "b waits beside a while a runs"
    run(ctl, plugin, 45.0)
    assert plugin.runs == {a: 1, b: 1} and sim._jobs[b].node == "n2"
    assert sum("never started while the rest of the group ran and ended" in ln for ln in log) == 1, log


def pair_plan(window):  # type: ignore[no-untyped-def]
    """Both jobs of the window in one group (the in-process planner may split them)."""
    plan = in_process(NODE, "greedy", None)(window)
    jobs = [pj for g in plan.groups for pj in g.jobs]
    return plan.model_copy(update={"groups": [plan.groups[0].model_copy(update={"jobs": jobs})]})


class BeginSim(HoldingSim):
    """...where Slurm requeued jobs in ``begin`` (a slurmd refused them): each waits, reason BeginTime, until its
    begin time (a requeue waits out the job's credential, about two minutes)."""

    begin: dict[int, float] = {}

    def jobs(self):  # type: ignore[no-untyped-def]
        for i, t in self.begin.items():
            j = self._jobs[i]
            if j.job.state == "PENDING" and not j.job.held:
                j.job = replace(j.job, reason="BeginTime" if self.now < t else "None")
        return super().jobs()

    def advance(self, dt: float) -> None:
        self.advance_parking(dt, {i for i in self.begin if self.now < self.begin[i]})


def test_a_job_slurm_requeued_with_a_begin_time_waits_for_it_and_is_not_moved(tmp_path: Path) -> None:
    # Seen on real daemons: the controller took Slurm's own wait for a stuck node and held, moved and released
    # the job every stale_after_s for minutes.
    sim = BeginSim(n_nodes=2, cpus=24)
    sim.begin = {}
    i = sim.submit("MG", runtime_s=1.0)
    plugin, log = Plugin(sim, tmp_path / "placements"), []
    ctl = make(tmp_path, sim, log)
    ctl.step()
    assert sim._jobs[i].node == "n1"
    sim.begin = {i: sim.now + 70.0}  # beyond stale_after_s (30 s)
    run(ctl, plugin, 80.0)
    assert sim._jobs[i].job.state == "COMPLETED" and sim._jobs[i].node == "n1" and plugin.runs[i] == 1
    assert not [c for c in sim.calls if c[0] == "hold"] and not [ln for ln in log if "pending on" in ln], log
