"""`cosched run --resume` of a runner killed with SIGKILL: the processes it left running are stopped, said in one
line on stderr and journaled (``orphans_stopped``) before the cut-off group runs again whole."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from runner_support import alive as _alive, make_plan

COSCHED = [sys.executable, "-m", "service.cli"]
PY = sys.executable
# Sleeps a minute the first time it runs (the run that is killed), returns at once when run again (the resume).
FIRST_SLOW = "import os, sys, time; m = sys.argv[1]; first = not os.path.exists(m); open(m, 'a').close(); time.sleep(60 if first else 0)"


def _journal(run_dir: Path) -> list[dict]:
    return [json.loads(ln) for ln in (run_dir / "journal.jsonl").read_text().splitlines() if ln.strip()]


def test_resume_says_it_stopped_the_killed_runs_leftovers_and_journals_it(tmp_path: Path) -> None:
    plan = make_plan([[("quick", [PY, "-c", "print('q')"])],
                      [("leftover", [PY, "-c", FIRST_SLOW, str(tmp_path / "mark")])]])
    (tmp_path / "plan.json").write_text(plan.model_dump_json())
    runs, env = tmp_path / "runs", {**os.environ, "COSCHED_HOME": str(tmp_path / "home")}
    proc = subprocess.Popen([*COSCHED, "run", str(tmp_path / "plan.json"), "--runs", str(runs)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline, run_dir, pid = time.monotonic() + 30, None, None
    while pid is None and time.monotonic() < deadline:
        for d in runs.glob("*"):
            if (d / "journal.jsonl").exists():
                starts = [e for e in _journal(d) if e["event"] == "job_start" and e["job"] == "leftover"]
                if starts and (tmp_path / "mark").exists():
                    run_dir, pid = d, starts[0]["pid"]
        time.sleep(0.05)
    assert run_dir is not None and pid is not None, "the second group never started"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert _alive(pid), "the killed runner's job runs on"
    out = subprocess.run([*COSCHED, "run", "--resume", str(run_dir), "--json"], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    said = [ln for ln in out.stderr.splitlines() if "stopped" in ln]
    assert len(said) == 1 and "leftover" in said[0] and f"pid {pid}" in said[0] and "group 2" in said[0]
    assert not _alive(pid)
    try:  # a test process that is a child subreaper (perf's runs make it one) inherits the stopped job: reap it
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    events = _journal(run_dir)
    stopped = [e for e in events if e["event"] == "orphans_stopped"]
    assert len(stopped) == 1 and stopped[0]["jobs"] == [{"job": "leftover", "group": 1, "pid": pid}]
    resumed = events.index(stopped[0])
    assert [e["event"] for e in events[resumed + 1:]][:1] == ["run_start"]  # journaled before anything runs again
    assert json.loads(out.stdout)["failed"] == []


def test_resume_with_nothing_left_running_says_nothing(tmp_path: Path) -> None:
    plan = make_plan([[("quick", [PY, "-c", "print('q')"])]])
    (tmp_path / "plan.json").write_text(plan.model_dump_json())
    env = {**os.environ, "COSCHED_HOME": str(tmp_path / "home")}
    done = subprocess.run([*COSCHED, "run", str(tmp_path / "plan.json"), "--runs", str(tmp_path / "runs"), "--json"],
                          env=env, capture_output=True, text=True, timeout=120)
    run_dir = Path(json.loads(done.stdout)["run_dir"])
    out = subprocess.run([*COSCHED, "run", "--resume", str(run_dir), "--json"], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and "stopped" not in out.stderr
    assert not any(e["event"] == "orphans_stopped" for e in _journal(run_dir))
