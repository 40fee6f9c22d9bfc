"""`cosched run PLAN.json` of a continuous plan on this node: real programs start at events, each only once its
`after` jobs have really ended, never above Cmax, changes journaled (not applicable here: no resctrl), resumable."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from runner_support import LOCAL
from runner_support import alive as _alive

from env.plan.allocate import plain_allocation
from env.plan.models import WindowJob
from env.plan.stream_plan import ContinuousPlan, build_continuous_plan

COSCHED = [sys.executable, "-m", "service.cli"]
PY = sys.executable
CPU0, CPU1 = [LOCAL.cpus[0]], [LOCAL.cpus[-1]]


def busy(seconds: float, mark: Path | None = None) -> list[str]:
    """A Python busy loop of ``seconds`` (appending one line to ``mark`` when it ends, if given)."""
    tail = f"\nopen({str(mark)!r}, 'a').write('x\\n')" if mark else ""
    return [PY, "-c", f"import time\nt = time.time()\nwhile time.time() - t < {seconds}: pass{tail}"]


def make(launches: list[tuple[str, list[str], list[int], list[str]]], cmax: int = 2, changes=()) -> ContinuousPlan:
    """A plan for this node: (id, command, CPUs, after) in order; ``changes``: (at the end of, job, CPUs)."""
    return build_continuous_plan(
        LOCAL, [(WindowJob(id=i, command=cmd), plain_allocation(LOCAL, cpus), after, None, None, None)
                for i, cmd, cpus, after in launches],
        policy="hand", max_concurrency=cmax, window_size=8,
        changes=[(at, job, plain_allocation(LOCAL, cpus)) for at, job, cpus in changes])


def write(tmp: Path, plan: ContinuousPlan | dict) -> Path:
    p = tmp / "plan.json"
    p.write_text(plan.model_dump_json() if isinstance(plan, ContinuousPlan) else json.dumps(plan))
    return p


def cosched(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*COSCHED, *args], capture_output=True, text=True, check=False, timeout=300,
                          env={**os.environ, "COSCHED_HOME": str(home)})


def journal(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "journal.jsonl").read_text().splitlines() if line.strip()]


def spans(events: list[dict]) -> dict[str, tuple[float, float]]:
    """Each job's start and end by the journal's own clock (the time each line was written)."""
    start = {e["job"]: e["time"] for e in events if e["event"] == "job_start"}
    return {e["job"]: (start[e["job"]], e["time"]) for e in events if e["event"] == "job_end"}


def test_each_launch_starts_after_its_after_jobs_end_never_above_cmax(tmp_path: Path) -> None:
    plan = make([("a", busy(1.0), CPU0, []),
                 ("b", ["sleep", "0.3"], CPU1, []),
                 ("c", busy(0.4), CPU1, ["b"]),
                 ("d", ["sleep", "0.2"], CPU0, ["a"]),
                 ("e", busy(0.3), CPU0 + CPU1 if CPU0 != CPU1 else CPU0, ["c", "d"])],
                changes=[("b", "a", CPU0)])
    out = cosched("run", str(write(tmp_path, plan)), "--json", "--runs", str(tmp_path / "runs"), home=tmp_path / "home")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    run_dir = Path(report["run_dir"])
    events = journal(run_dir)
    t = spans(events)
    assert sorted(t) == ["a", "b", "c", "d", "e"]
    for j in plan.launches:
        for a in j.after:
            assert t[a][1] <= t[j.id][0], f"{j.id} started before {a} ended"
    # never more than Cmax at once, by the journal's order of starts and ends
    running = most = 0
    for e in events:
        running += {"job_start": 1, "job_end": -1}.get(e["event"], 0)
        most = max(most, running)
    assert most <= plan.max_concurrency and report["max_running"] <= plan.max_concurrency
    jobs = {j["id"]: j for j in report["jobs"]}
    assert all(j["exit_code"] == 0 for j in jobs.values())
    if plan.enforcement.cpus:
        assert all(jobs[j.id]["observed_cpus"] == j.cpus for j in plan.launches)
    # the change was due at b's end; this node cannot apply it and says why
    (change,) = report["changes"]
    assert change["at_end_of"] == "b" and change["job"] == "a" and change["applied"] is False
    assert "not enforced" in change["reason"]
    assert any(e["event"] == "change" and e["reason"] == change["reason"] for e in events)
    assert (run_dir / "schedule.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((run_dir / "report.json").read_text())["mode"] == "continuous"


def test_cmax_holds_a_launch_whose_cpus_are_free(tmp_path: Path) -> None:
    """Cmax 1 and no after at all: the second launch waits for the first to end (real end, not a prediction)."""
    plan = make([("a", busy(0.5), CPU0, []), ("b", ["sleep", "0.1"], CPU1, [])], cmax=1)
    out = cosched("run", str(write(tmp_path, plan)), "--json", "--runs", str(tmp_path / "runs"), home=tmp_path / "home")
    assert out.returncode == 0, out.stderr
    t = spans(journal(Path(json.loads(out.stdout)["run_dir"])))
    assert t["a"][1] <= t["b"][0]


def test_a_bad_plan_is_refused_in_one_line_and_nothing_runs(tmp_path: Path) -> None:
    mark = tmp_path / "ran"
    doc = json.loads(make([("a", busy(0.1, mark), CPU0, []), ("b", busy(0.1, mark), CPU1, ["a"])]).model_dump_json())
    doc["launches"][0]["after"] = ["b"]  # a cycle
    out = cosched("run", str(write(tmp_path, doc)), "--runs", str(tmp_path / "runs"), home=tmp_path / "home")
    assert out.returncode == 2 and "cycle" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    doc["launches"][0]["after"] = []
    doc["launches"][1]["after"] = []
    doc["launches"][1]["cpus"] = doc["launches"][0]["cpus"]  # b on a's CPU without waiting for it
    out = cosched("run", str(write(tmp_path, doc)), "--runs", str(tmp_path / "runs"), home=tmp_path / "home")
    assert out.returncode == 2 and "oversubscribe" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert not mark.exists() and not (tmp_path / "runs").exists()


def _run_dir(runs: Path) -> Path | None:
    found = [d for d in runs.glob("*") if (d / "journal.jsonl").exists()]
    return found[0] if found else None


def test_sigkill_then_resume_runs_every_finished_launch_once(tmp_path: Path) -> None:
    marks = {k: tmp_path / f"{k}.mark" for k in "abc"}
    plan = make([("a", busy(0.2, marks["a"]), CPU0, []),
                 ("b", [PY, "-c", f"import time; time.sleep(2.5); open({str(marks['b'])!r}, 'a').write('x\\n')"], CPU0, ["a"]),
                 ("c", busy(0.2, marks["c"]), CPU1, ["b"])])
    runs, home = tmp_path / "runs", tmp_path / "home"
    proc = subprocess.Popen([*COSCHED, "run", str(write(tmp_path, plan)), "--runs", str(runs)],
                            env={**os.environ, "COSCHED_HOME": str(home)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not ((d := _run_dir(runs)) and any(e["event"] == "job_start" and e["job"] == "b" for e in journal(d))):
        assert time.monotonic() < deadline, "b never started"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    run_dir = _run_dir(runs)
    assert run_dir is not None
    before = journal(run_dir)
    assert [e["job"] for e in before if e["event"] == "job_end"] == ["a"]
    orphan = next(e["pid"] for e in before if e["event"] == "job_start" and e["job"] == "b")
    out = cosched("run", "--resume", str(run_dir), "--json", home=home)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert sorted(j["id"] for j in report["jobs"]) == ["a", "b", "c"]
    again = [e["job"] for e in journal(run_dir)[len(before):] if e["event"] == "job_start"]
    assert again == ["b", "c"], "a finished before the kill: it is not run again"
    assert marks["a"].read_text() == "x\n" and marks["b"].read_text() == "x\n" and marks["c"].read_text() == "x\n"
    assert not _alive(orphan)
    t = {j["id"]: (j["start_s"], j["end_s"]) for j in report["jobs"]}
    assert t["a"][1] <= t["b"][0] and t["b"][1] <= t["c"][0]  # the resumed clock goes on from the last end
    try:
        os.waitpid(orphan, os.WNOHANG)
    except ChildProcessError:
        pass
