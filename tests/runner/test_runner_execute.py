"""End-to-end: `cosched run PLAN.json` executes real programs on this node; nothing is lost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from env.plan.models import Plan
from runner_support import alive as _alive, make_plan

COSCHED = [sys.executable, "-m", "service.cli"]
PY = sys.executable


def write_plan(tmp: Path, plan: Plan) -> Path:
    p = tmp / "plan.json"
    p.write_text(plan.model_dump_json())
    return p


def cosched(*args: str, home: Path, **kw) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COSCHED_HOME": str(home)}
    return subprocess.run([*COSCHED, *args], capture_output=True, text=True, env=env, **kw)


def journal(run_dir: Path) -> list[dict]:
    return [json.loads(l) for l in (run_dir / "journal.jsonl").read_text().splitlines() if l.strip()]


def test_real_window_of_four_programs(tmp_path: Path) -> None:
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(1 << 20) * 4)
    plan = make_plan(
        [
            [("sysbench-a", ["sysbench", "cpu", "--threads=1", "--events=3000", "--time=0", "run"]),
             ("sysbench-b", ["sysbench", "cpu", "--threads=1", "--events=3000", "--time=0", "run"])],
            [("xz", ["xz", "-T1", "-1", "-k", "-c", str(data)]),
             ("pythreads", [PY, "-c", "import concurrent.futures as f; print(sum(f.ThreadPoolExecutor(2).map(lambda i: sum(range(i * 10000)), range(40))))"])],
        ]
    )
    out = cosched("run", str(write_plan(tmp_path, plan)), "--json", "--runs", str(tmp_path / "runs"), home=tmp_path / "home")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    run_dir = Path(report["run_dir"])
    assigned = {j.id: j.cpus for g in plan.groups for j in g.jobs}
    seen = [j for g in report["groups"] for j in g["jobs"]]
    assert sorted(j["id"] for j in seen) == sorted(assigned)
    for j in seen:
        assert j["exit_code"] == 0
        assert j["observed_cpus"] == assigned[j["id"]], f"{j['id']} ran on {j['observed_cpus']}, planned {assigned[j['id']]}"
    assert "events per second" in (run_dir / "sysbench-a.out").read_text()
    assert (run_dir / "xz.out").stat().st_size > 0
    events = [e["event"] for e in journal(run_dir)]
    assert events[0] == "run_start" and events[-1] == "run_end"
    assert events.count("group_start") == 2 == events.count("group_end") and events.count("job_end") == 4
    assert (run_dir / "schedule.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((run_dir / "report.json").read_text())["total_s"] == report["total_s"]
    assert report["total_s"] == pytest.approx(sum(g["makespan_s"] for g in report["groups"]))
    # No profiles were stored in this fresh home: time sharing is unknown and says why.
    assert report["timeshare_s"] is None and "missing" in report["timeshare_source"]


def _wait_for(pred, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting")


def _started(runs: Path, group: int) -> Path | None:
    for d in runs.glob("*"):
        j = d / "journal.jsonl"
        if j.exists() and any(e["event"] == "job_start" and e["group"] == group for e in journal(d)):
            return d
    return None


def test_sigkill_then_resume_counts_every_job_once(tmp_path: Path) -> None:
    plan = make_plan(
        [
            [("quick-a", [PY, "-c", "print('a')"]), ("quick-b", [PY, "-c", "print('b')"])],
            [("slow-a", [PY, "-c", "import time; time.sleep(1.5); print('slow a')"]), ("slow-b", ["sleep", "1"])],
        ]
    )
    runs, home = tmp_path / "runs", tmp_path / "home"
    env = {**os.environ, "COSCHED_HOME": str(home)}
    proc = subprocess.Popen([*COSCHED, "run", str(write_plan(tmp_path, plan)), "--runs", str(runs)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for(lambda: _started(runs, 1) is not None)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    run_dir = _started(runs, 1)
    assert run_dir is not None
    before = journal(run_dir)
    assert not any(e["event"] == "group_end" and e["group"] == 1 for e in before), "killed in the middle of group 1"
    orphan_pids = [e["pid"] for e in before if e["event"] == "job_start" and e["group"] == 1]
    out = cosched("run", "--resume", str(run_dir), "--json", home=home)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    ids = [j["id"] for g in report["groups"] for j in g["jobs"]]
    assert sorted(ids) == ["quick-a", "quick-b", "slow-a", "slow-b"]
    after = journal(run_dir)[len(before):]
    restarted = [e["job"] for e in after if e["event"] == "job_start"]
    assert sorted(restarted) == ["slow-a", "slow-b"], "finished groups are not run again"
    assert not any(_alive(p) for p in orphan_pids), "the killed runner's jobs were stopped on resume"
    for p in orphan_pids:  # a test process that is a child subreaper (perf's runs make it one) inherits them: reap
        try:
            os.waitpid(p, os.WNOHANG)
        except ChildProcessError:
            pass


def _sigint_default() -> None:
    # A test run launched as a background job of a non-interactive shell (as CI may be) inherits SIGINT ignored,
    # and Python keeps an ignored SIGINT ignored: the runner would never see the signal this test sends.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_sigint_leaves_no_child_and_a_resumable_journal(tmp_path: Path) -> None:
    plan = make_plan([[("sleeper-a", ["sleep", "30"]), ("sleeper-b", [PY, "-c", "import time; time.sleep(30)"])]])
    runs, home = tmp_path / "runs", tmp_path / "home"
    env = {**os.environ, "COSCHED_HOME": str(home)}
    proc = subprocess.Popen([*COSCHED, "run", str(write_plan(tmp_path, plan)), "--runs", str(runs)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_sigint_default)
    _wait_for(lambda: (d := _started(runs, 0)) is not None and sum(e["event"] == "job_start" for e in journal(d)) == 2)
    run_dir = _started(runs, 0)
    pids = [e["pid"] for e in journal(run_dir) if e["event"] == "job_start"]
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=15)
    assert proc.returncode == 130
    assert f"--resume {run_dir}" in err and "Traceback" not in err
    assert not any(_alive(p) for p in pids)
    assert journal(run_dir)[-1]["event"] == "interrupted"


def test_failing_and_timed_out_jobs_are_recorded_and_the_rest_runs(tmp_path: Path) -> None:
    plan = make_plan(
        [
            [("fails", [PY, "-c", "import sys; sys.exit(3)"]), ("hangs", ["sleep", "60"])],
            [("after", [PY, "-c", "print('still ran')"])],
        ]
    )
    out = cosched("run", str(write_plan(tmp_path, plan)), "--json", "--timeout", "1", "--runs", str(tmp_path / "runs"), home=tmp_path / "home")
    assert out.returncode == 1
    report = json.loads(out.stdout)
    jobs = {j["id"]: j for g in report["groups"] for j in g["jobs"]}
    assert jobs["fails"]["exit_code"] == 3 and not jobs["fails"]["timed_out"]
    assert jobs["hangs"]["timed_out"] and jobs["hangs"]["exit_code"] is None and jobs["hangs"]["wall_s"] < 10
    assert jobs["after"]["exit_code"] == 0
    assert sorted(report["failed"]) == ["fails", "hangs"]


def test_fail_fast_stops_after_the_failure(tmp_path: Path) -> None:
    plan = make_plan([[("fails", [PY, "-c", "import sys; sys.exit(1)"]), ("long", ["sleep", "30"])], [("never", ["true"])]])
    out = cosched("run", str(write_plan(tmp_path, plan)), "--json", "--fail-fast", "--runs", str(tmp_path / "runs"), home=tmp_path / "home")
    assert out.returncode == 1
    report = json.loads(out.stdout)
    ids = [j["id"] for g in report["groups"] for j in g["jobs"]]
    assert "never" not in ids and "long" in ids


def _bad_plans(tmp: Path) -> list[tuple[str, str]]:
    base = make_plan([[("a", ["true"]), ("b", ["true"])]])
    cases = []
    doc = base.model_dump()
    doc["groups"][0]["jobs"][0]["command"] = []
    cases.append((doc, "no command"))
    doc = base.model_dump()
    text_file = tmp / "not-a-program.txt"
    text_file.write_text("hello\n")
    text_file.chmod(0o644)
    doc["groups"][0]["jobs"][0]["command"] = [str(text_file)]
    doc["groups"][0]["jobs"][0]["launch"] = doc["groups"][0]["jobs"][0]["launch"][:-1] + [str(text_file)]
    cases.append((doc, "not an executable"))
    doc = base.model_dump()
    doc["groups"][0]["jobs"][0]["command"] = doc["groups"][0]["jobs"][0]["launch"][-1:] = ["no-such-program-xyz"]
    cases.append((doc, "no-such-program-xyz"))
    doc = base.model_dump()
    doc["groups"][0]["jobs"][0]["cpus"] = [512]
    cases.append((doc, "CPUs \\[512\\]"))
    doc = base.model_dump()
    doc["node"]["name"] = "sim:reference"
    cases.append((doc, "sim:reference"))
    out = []
    for n, (d, words) in enumerate(cases):
        p = tmp / f"bad{n}.json"
        p.write_text(json.dumps(d))
        out.append((str(p), words))
    p = tmp / "notjson.json"
    p.write_text("{not json")
    out.append((str(p), "not valid JSON"))
    out.append((str(tmp / "missing.json"), "no such file"))
    return out


def test_bad_input_one_line_nothing_run(tmp_path: Path) -> None:
    import re

    runs = tmp_path / "runs"
    for path, words in _bad_plans(tmp_path):
        out = cosched("run", path, "--runs", str(runs), home=tmp_path / "home")
        assert out.returncode == 2, (path, out.stderr)
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in out.stderr and re.search(words, lines[0]), (words, out.stderr)
        assert not runs.exists() or not any(runs.iterdir()), "nothing half-run left behind"
    out = cosched("run", "--resume", str(tmp_path / "no-such-run"), home=tmp_path / "home")
    assert out.returncode == 2 and "not a directory" in out.stderr


def test_dry_run_prints_argv_and_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    plan = make_plan([[("toucher", ["touch", str(marker)])]])
    out = cosched("run", str(write_plan(tmp_path, plan)), "--dry-run", "--runs", str(tmp_path / "runs"), home=tmp_path / "home")
    assert out.returncode == 0, out.stderr
    assert "numactl --physcpubind=" in out.stdout and f"touch {marker}" in out.stdout
    assert not marker.exists() and not (tmp_path / "runs").exists()
