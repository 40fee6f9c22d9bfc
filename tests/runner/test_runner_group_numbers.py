"""Groups are numbered for people from 1, alike in `cosched run`'s progress, its table and its dry run (the JSON
documents keep their 0-based ``index``)."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from runner_support import make_plan

COSCHED = [sys.executable, "-m", "service.cli"]
PY = sys.executable


def test_progress_and_table_number_the_groups_alike_from_one(tmp_path: Path) -> None:
    plan = make_plan([[("first-a", [PY, "-c", "pass"]), ("first-b", [PY, "-c", "pass"])], [("second", [PY, "-c", "pass"])]])
    (tmp_path / "plan.json").write_text(plan.model_dump_json())
    env = {**os.environ, "COSCHED_HOME": str(tmp_path / "home"), "COLUMNS": "120"}
    out = subprocess.run([*COSCHED, "run", str(tmp_path / "plan.json"), "--runs", str(tmp_path / "runs")], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    progress = {job: int(n) for n, jobs in re.findall(r"group (\d+)/2: starting (.+)", out.stderr) for job in jobs.split(", ")}
    assert progress == {"first-a": 1, "first-b": 1, "second": 2}
    table, group = {}, None
    for line in out.stdout.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃|]", line)[1:-1]]
        if len(cells) >= 2 and cells[1] in progress:
            group = int(cells[0]) if cells[0] else group
            table[cells[1]] = group
    assert table == progress
    dry = subprocess.run([*COSCHED, "run", str(tmp_path / "plan.json"), "--dry-run"], env=env, capture_output=True,
                         text=True, timeout=120)
    assert re.findall(r"^group (\d+):", dry.stdout, re.M) == ["1", "2"]


def test_the_schedule_table_numbers_groups_from_one() -> None:
    from env.plan.models import Window
    from env.sim.nodes import load_node
    from service.commands.schedule import render
    from service.planning import plan_window

    window = Window.model_validate({"jobs": [{"id": p} for p in ("MG", "EP", "CG")], "max_concurrency": 1})
    plan = plan_window(window, load_node("sim:reference"), policy="timeshare")
    buf = io.StringIO()
    render(plan, Console(file=buf, width=100, color_system=None))
    rows = [ln.split() for ln in buf.getvalue().splitlines() if ln.split()[:1] in (["1"], ["2"], ["3"], ["0"])]
    assert [r[0] for r in rows] == ["1", "2", "3"] and [g.index for g in plan.groups] == [0, 1, 2]
