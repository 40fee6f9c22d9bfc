"""`cosched run --measure-timeshare`: every job alone on the whole node, launched like every job (the
time-sharing plan's numactl argv) and run by the executor (journal, process groups, the run's timeout)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from env.node.cpulist import format_cpulist
from runner_support import LOCAL, make_plan
from env.real.run import timeshare_plan

COSCHED = [sys.executable, "-m", "service.cli"]


def test_timeshare_plan_is_each_job_alone_on_the_whole_node() -> None:
    plan = make_plan([[("a", ["true"]), ("b", ["sleep", "0"])], [("c", ["true"])]])
    ts = timeshare_plan(plan, LOCAL)
    assert [[j.id for j in g.jobs] for g in ts.groups] == [["a"], ["b"], ["c"]]
    for g in ts.groups:
        (job,) = g.jobs
        assert job.cpus == LOCAL.cpus
        assert job.launch[:3] == ["numactl", f"--physcpubind={format_cpulist(LOCAL.cpus)}", "--"]


def test_measure_timeshare_runs_through_the_executor(tmp_path: Path) -> None:
    show = ["sh", "-c", "grep Cpus_allowed_list /proc/self/status; echo $COSCHED_TS_MARK"]
    plan = make_plan([[("a", show), ("b", ["sleep", "0.1"])]])
    plan = plan.model_copy(update={"groups": [g.model_copy(update={"jobs": [g.jobs[0].model_copy(update={"env": {"COSCHED_TS_MARK": "kept"}}), g.jobs[1]]}) for g in plan.groups]})
    ppath = tmp_path / "plan.json"
    ppath.write_text(plan.model_dump_json())
    out = subprocess.run([*COSCHED, "run", str(ppath), "--measure-timeshare", "--timeout", "60", "--json", "--runs", str(tmp_path / "runs")],
                         capture_output=True, text=True, env={**os.environ, "COSCHED_HOME": str(tmp_path / "home")})
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["timeshare_source"] == "measured in this run: each job alone" and report["timeshare_s"] > 0.1
    ts_dir = Path(report["run_dir"]) / "timeshare"
    events = [json.loads(line) for line in (ts_dir / "journal.jsonl").read_text().splitlines()]
    starts = [e for e in events if e["event"] == "job_start"]
    assert [e["job"] for e in starts] == ["a", "b"] and all(e["argv"][0] == "numactl" for e in starts)
    assert [e["group"] for e in events if e["event"] == "group_end"] == [0, 1]
    text = (ts_dir / "a.out").read_text().split()
    assert text[-2] == format_cpulist(LOCAL.cpus) and text[-1] == "kept"  # the whole node, the job's env
