"""`cosched schedule`'s table fits an 80-column terminal, and the command plans for this machine by default."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from env.sim.nodes import load_node
from service.commands.schedule import render
from service.planning import plan_window

ROOT = Path(__file__).resolve().parents[2]


def test_the_table_fits_80_columns() -> None:
    from env.plan.models import Window

    window = Window.model_validate({"jobs": [{"id": f"a-rather-long-job-name-{i}", "profile": p} for i, p in
                                             enumerate(["MG", "EP", "CG", "FT", "water_nsquared", "ocean_ncp", "lu_ncb", "SP"])],
                                    "max_concurrency": 4})
    plan = plan_window(window, load_node("sim:reference"), policy="best-found")  # cache ways and bandwidth caps on two domains
    out = io.StringIO()
    render(plan, Console(file=out, width=80, color_system=None))
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "…" not in out.getvalue()  # nothing cut: long names and CPU lists fold onto a second line
    text = out.getvalue().replace("\n", "")
    for job in window.jobs:
        assert job.profile in text
    assert "predicted throughput vs time sharing" in out.getvalue()


def test_schedule_plans_for_this_machine_by_default(tmp_path: Path) -> None:
    """examples/window.json on this node: its jobs have no profile in an empty store, so they are excluded with the
    reason (they are profiled by `make run`), the plan is for 'local', and it says it has no prediction."""
    env = {"COSCHED_HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "COLUMNS": "80"}
    out = subprocess.run([sys.executable, "-m", "service.cli", "schedule", "examples/window.json", "--json"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert plan["node"]["name"] == "local" and len(plan["excluded"]) == 6
    assert all("no profile on this node" in e["reason"] for e in plan["excluded"])
    assert plan["predicted_throughput_vs_timeshare"] is None and "no node model" in plan["no_prediction"]
    table = subprocess.run([sys.executable, "-m", "service.cli", "schedule", "examples/window.json"], cwd=ROOT,
                           capture_output=True, text=True, timeout=120, env=env)
    assert table.returncode == 0 and max(len(x) for x in table.stdout.splitlines()) <= 80
