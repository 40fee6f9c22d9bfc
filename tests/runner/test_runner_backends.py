"""One way to run a plan: ``Backend.run(plan) -> RunReport`` on the simulated node and on this one, and each
backend's ``evaluate`` gives the makespans of its ``run``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from env.real.backend import RealBackend
from env.sim.backend import SimBackend
from env.sim.nodes import load_node
from env.sim.simulate import plan_from_actions, run_report
from runner_support import LOCAL, make_plan


def test_the_simulated_run_is_the_simulated_report() -> None:
    node = load_node("sim:reference")
    plan = plan_from_actions(node, 0, [[("MG", 17), ("EP", 17)], [("CG", 17)]])
    backend = SimBackend(node)
    report = backend.run(plan, seed=3)
    assert report == run_report(plan, node, seed=3)
    assert [g.makespan_s for g in report.groups] == backend.evaluate(plan, seed=3)


def test_the_real_run_writes_its_directory_and_resumes_to_the_same_report(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COSCHED_HOME", str(tmp_path / "home"))
    cmd = [sys.executable, "-c", "import time; time.sleep(0.1)"]
    plan = make_plan([[("a", cmd), ("b", cmd)], [("c", cmd)]])
    seen: list[str] = []
    backend = RealBackend(LOCAL, tmp_path / "runs", timeout_s=60, progress=lambda kind, info: seen.append(kind))
    report = backend.run(plan)
    run_dir = Path(str(report.run_dir))
    assert run_dir.parent == tmp_path / "runs" and report.backend == "real" and not report.simulated
    assert [[j.id for j in g.jobs] for g in report.groups] == [["a", "b"], ["c"]] and report.failed == []
    assert json.loads((run_dir / "report.json").read_text())["total_s"] == report.total_s
    assert (run_dir / "plan.json").exists() and seen[0] == "run_start" and seen.count("group_end") == 2
    assert report.timeshare_source is not None and report.timeshare_source.startswith("predicted from profiles")
    again = backend.resume(run_dir)  # every group is done: its records come from the journal, nothing runs again
    assert [g.makespan_s for g in again.groups] == [g.makespan_s for g in report.groups]
    assert [{j.id: j.wall_s for j in g.jobs} for g in again.groups] == [{j.id: j.wall_s for j in g.jobs} for g in report.groups]
