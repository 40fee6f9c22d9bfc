"""The window controller's decisions against a simulated Slurm (service/slurm/simcluster.py; no daemons):
the cases real daemons cannot time: a job cancelled between planning and start, a crash between two Slurm
calls, a release slurmctld lost, an unreachable planner. Plans come from the sim:reference node (24 CPUs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from env.plan.models import Plan, Window
from env.sim.nodes import load_node
from service.slurm import placement
from service.slurm.controller import Controller, ControllerConfig, PlannerUnavailable
from service.slurm.journal import Journal
from service.slurm.planner import in_process
from service.slurm.simcluster import SimCluster

NODE = "sim:reference"
JOBS = ["MG", "EP", "CG", "FT", "SP", "fft", "lu_cb", "ocean_cp"]


class Crash(Exception):
    """Stands for SIGKILL at a chosen point of the controller."""


def make(tmp_path: Path, sim: SimCluster, planner=None, log: list[str] | None = None, window: int = 8) -> Controller:
    lines = log if log is not None else []
    return Controller(ControllerConfig(partition="cosched", placement_dir=tmp_path / "placements", window=window,
                                       cmax=4, gather_s=0.0),
                      sim, planner or in_process(NODE, "greedy", None), Journal(tmp_path / "journal.sqlite"),
                      plan_node=lambda: load_node(NODE), log=lines.append, clock=sim.clock)


def drain(ctl: Controller, sim: SimCluster, steps: int = 200) -> None:
    for _ in range(steps):
        ctl.step()
        sim.advance(0.5)
        if not ctl.pending_work() and all(j.finished for j in sim.jobs() if j.managed):
            return
    raise AssertionError("the window did not drain")


def groups_of(journal: Journal) -> dict[tuple[int, int], list[int]]:
    out: dict[tuple[int, int], list[int]] = {}
    for r in journal.all_jobs():
        out.setdefault((r.window_id, r.group_idx), []).append(r.job_id)
    return out


def test_a_window_is_planned_and_each_group_released_together_on_one_node(tmp_path: Path) -> None:
    sim = SimCluster(n_nodes=2, cpus=24)
    ids = [sim.submit(name, runtime_s=3.0) for name in JOBS]
    unknown = sim.submit("no-such-profile", runtime_s=1.0)
    plain = sim.submit("MG", cosched=None)  # not submitted with --cosched: never touched
    log: list[str] = []
    ctl = make(tmp_path, sim, log=log, window=9)
    drain(ctl, sim)
    groups = groups_of(ctl.journal)
    assert sorted(j for g in groups.values() for j in g) == sorted(ids + [unknown])
    releases = [c for c in sim.calls if c[0] == "release"]
    assert sorted(tuple(sorted(ids)) for _, ids, _ in releases) == sorted(tuple(sorted(g)) for g in groups.values()), \
        "each group's jobs are released in one request"
    for g in groups.values():
        nodes = {node for verb, jids, node in sim.calls if verb == "pin" and jids[0] in g}
        assert len(nodes) == 1 and len(g) <= 4
    assert [g for g in groups.values() if unknown in g] == [[unknown]], "a job without a profile goes alone"
    assert any("no-such-profile" in line and "alone" in line for line in log)
    assert all(plain not in jids for _, jids, _ in sim.calls)
    # Each co-scheduled job's placement is the plan's allocation (the plan is journaled with its window).
    plan = Plan.model_validate_json(ctl.journal.windows()[0][2])
    for g in plan.groups:
        for pj in g.jobs:
            row = next(r for r in ctl.journal.all_jobs() if r.job_id == int(pj.id))
            assert row.placement == placement.placement_lines(pj, load_node(NODE), pinrt=False)


def test_a_job_cancelled_between_planning_and_start_leaves_its_group(tmp_path: Path) -> None:
    sim = SimCluster(n_nodes=1, cpus=24)
    ids = [sim.submit(name, runtime_s=5.0) for name in JOBS]
    log: list[str] = []
    ctl = make(tmp_path, sim, log=log)
    ctl.step()
    waiting = ctl.journal.groups(("waiting",))
    assert waiting, "one node: later groups wait"
    victim = ctl.journal.jobs_of(waiting[0].window_id, waiting[0].idx)[0].job_id
    sim.cancel(victim)
    drain(ctl, sim)
    assert sim.started(victim) == 0
    assert all(sim.started(i) == 1 for i in ids if i != victim)
    assert sum(f"job {victim} was cancelled before its group started" in line for line in log) == 1


@pytest.mark.parametrize("crash_on", ["pin", "release"])
def test_a_controller_killed_between_slurm_calls_loses_and_duplicates_nothing(tmp_path: Path, crash_on: str) -> None:
    sim = SimCluster(n_nodes=1, cpus=24)
    ids = [sim.submit(name, runtime_s=2.0) for name in JOBS]
    real = getattr(sim, crash_on)
    state = {"armed": True}

    def crashing(*args, **kwargs):  # the first call of the second group dies after Slurm did it
        real(*args, **kwargs)
        if state["armed"] and any(c[0] == "release" for c in sim.calls[:-1]):
            state["armed"] = False
            raise Crash()

    setattr(sim, crash_on, crashing)
    ctl = make(tmp_path, sim)
    with pytest.raises(Crash):
        for _ in range(100):
            ctl.step()
            sim.advance(0.5)
    ctl.journal.close()
    again = make(tmp_path, sim)  # a new process: the journal is all it knows
    drain(again, sim)
    jobs = {j.job_id: j for j in sim.jobs()}
    assert all(jobs[i].state == "COMPLETED" for i in ids)
    rows = again.journal.all_jobs()
    assert sorted(r.job_id for r in rows) == sorted(ids), "each job journaled once, in one group"
    assert len(again.journal.windows()) == 1, "nothing planned twice"


def test_a_release_lost_by_a_restarted_slurmctld_is_sent_again(tmp_path: Path) -> None:
    sim = SimCluster(n_nodes=4, cpus=24)
    ids = [sim.submit(name, runtime_s=2.0) for name in JOBS[:2]]
    log: list[str] = []
    ctl = make(tmp_path, sim, log=log)
    ctl.step()
    for i in ids:  # slurmctld restarted from a state saved before the release
        j = sim._jobs[i]
        j.job = j.job.__class__(**{**j.job.__dict__, "priority": 0, "reason": "JobHeldUser"})
    drain(ctl, sim)
    assert all(j.state == "COMPLETED" for j in sim.jobs())
    assert any("held again after a slurmctld restart before any of it started" in line for line in log)
    assert all(sim.started(i) == 2 for i in ids), "released again, once"


def test_an_unreachable_planner_keeps_jobs_held_and_is_retried(tmp_path: Path) -> None:
    sim = SimCluster(n_nodes=2, cpus=24)
    ids = [sim.submit(name) for name in JOBS[:4]]
    up = {"ok": False}
    real = in_process(NODE, "greedy", None)

    def planner(window: Window) -> Plan:
        if not up["ok"]:
            raise PlannerUnavailable("http://127.0.0.1:9/schedule: ConnectError")
        return real(window)

    log: list[str] = []
    ctl = make(tmp_path, sim, planner=planner, log=log)
    for _ in range(5):
        ctl.step()
        sim.advance(0.5)
    assert not sim.calls and all(j.held for j in sim.jobs())
    assert sum("planner unreachable" in line for line in log) == 1
    up["ok"] = True
    drain(ctl, sim)
    assert all(sim.started(i) == 1 for i in ids)


def test_the_scale_bench_runs_and_prints_its_figures() -> None:
    import json
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, str(root / "bench" / "slurm_scale.py"), "--nodes", "10", "--repeats", "1",
                        "--duration", "5", "--rate", "5", "--json"], capture_output=True, text=True, timeout=300, cwd=root)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["burst"]["windows"] == 10 and doc["burst"]["windows_per_s"]["median"] > 0
    assert doc["steady"]["jobs_released"]["median"] > 0 and "simulated" in doc["label"]


def test_plans_from_the_http_service_are_the_in_process_plans(tmp_path: Path) -> None:
    """--service URL: the controller's windows go to a real 'cosched serve' through httpx."""
    import os
    import socket
    import subprocess
    import sys
    import time

    import httpx

    from service.slurm.planner import over_http

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k != "COSCHED_TOKEN"}
    env["COSCHED_HOME"] = str(tmp_path / "home")
    proc = subprocess.Popen([sys.executable, "-m", "service.cli", "serve", "--port", str(port), "--node", NODE],
                            cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "cosched serve did not start"
            time.sleep(0.1)
        sim = SimCluster(n_nodes=2, cpus=24)
        ids = [sim.submit(name, runtime_s=2.0) for name in JOBS[:6]]
        ctl = make(tmp_path, sim, planner=over_http(url))
        drain(ctl, sim)
        assert all(sim.started(i) == 1 for i in ids)
        served = Plan.model_validate_json(ctl.journal.windows()[0][2])
        window = Window(jobs=[{"id": str(i), "profile": n} for i, n in zip(ids, JOBS[:6])], max_concurrency=4)
        local = in_process(NODE, None, None)(window)  # the service's default policy for the node, in process
        assert [[j.id for j in g.jobs] for g in served.groups] == [[j.id for j in g.jobs] for g in local.groups]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
