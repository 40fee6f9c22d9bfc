"""The online runner (``cosched run WINDOW.json --mode continuous``, ``env.real.online``): real programs decided at
every real event on this node; a runner killed with SIGKILL and resumed never starts a job twice, every job ends and
never more than Cmax run at once, counted from the programs' own output files (their start and end marks)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runner_support import LOCAL

from env.calibration.store import model_path
from env.node.discover import local_node_id

ROOT = Path(__file__).resolve().parents[2]
COSCHED = [str(ROOT / ".venv" / "bin" / "cosched")]
CMAX = 2

PROGRAM = """
import os, sys, time
marks, name, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
with open(os.path.join(marks, name), "a") as f:
    f.write(f"start {time.time()}\\n")
t = time.time()
while time.time() - t < secs / 2:  # busy half, sleeping half
    pass
time.sleep(secs / 2)
with open(os.path.join(marks, name), "a") as f:
    f.write(f"end {time.time()}\\n")
"""


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A $COSCHED_HOME whose node model of this node knows EP and MG (fitted to a simulated node, this node's
    shape), so the default policy, rollout, decides on it."""
    home = tmp_path_factory.mktemp("online-home")
    env = {**os.environ, "COSCHED_HOME": str(home)}
    out = subprocess.run([*COSCHED, "calibrate", "--backend", "sim", "--node", "sim:variant-a", "--jobs", "EP,MG",
                          "--probes", "2", "--heldout", "3", "--json"], check=False, capture_output=True, text=True, env=env,
                         timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    doc = json.loads(Path(json.loads(out.stdout)["out"]).read_text())
    doc["node"] = json.loads(LOCAL.model_dump_json())
    path = home / "node-models" / model_path(local_node_id()).name
    path.write_text(json.dumps(doc))
    return home


def stream(tmp: Path, secs: list[float], cmax: int = CMAX) -> tuple[Path, Path]:
    marks = tmp / "marks"
    marks.mkdir()
    prog = tmp / "prog.py"
    prog.write_text(PROGRAM)
    jobs = [{"id": f"j{i}", "profile": "MG" if i % 2 else "EP",
             "command": [sys.executable, str(prog), str(marks), f"j{i}", str(s)]} for i, s in enumerate(secs)]
    window = tmp / "stream.json"
    window.write_text(json.dumps({"jobs": jobs, "max_concurrency": cmax}))
    return window, marks


def marks_of(marks: Path) -> dict[str, list[tuple[str, float]]]:
    out = {}
    for f in marks.iterdir():
        out[f.name] = [(w, float(t)) for w, t in (line.split() for line in f.read_text().splitlines())]
    return out


def most_at_once(spans: list[tuple[float, float]]) -> int:
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    most = cur = 0
    for _, d in events:
        cur += d
        most = max(most, cur)
    return most


def run(args: list[str], home: Path, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*COSCHED, "run", *args], check=False, capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={**os.environ, "COSCHED_HOME": str(home)}, **kw)


def killed_mid_stream(window: Path, marks: Path, runs: Path, home: Path) -> dict[str, list[tuple[str, float]]]:
    """An online run SIGKILLed once a job has ended and others run (three starts at Cmax 2); the marks then."""
    proc = subprocess.Popen([*COSCHED, "run", str(window), "--mode", "continuous", "--runs", str(runs), "--json"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT,
                            env={**os.environ, "COSCHED_HOME": str(home)})
    deadline = time.monotonic() + 60
    while sum(w == "start" for m in marks_of(marks).values() for w, _ in m) < 3:
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return marks_of(marks)


def test_a_runner_killed_mid_stream_resumes_without_starting_a_job_twice(home: Path, tmp_path: Path) -> None:
    secs = [0.6, 1.2, 0.8, 1.6, 0.5, 2.0]
    window, marks = stream(tmp_path, secs)
    runs = tmp_path / "runs"
    before = killed_mid_stream(window, marks, runs, home)
    assert sum(any(w == "end" for w, _ in m) for m in before.values()) < len(secs)  # killed before the stream's end
    (run_dir,) = runs.iterdir()

    out = run(["--resume", str(run_dir), "--json"], home)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    journal = [json.loads(line) for line in (run_dir / "journal.jsonl").read_text().splitlines()]
    launched_only = {r["job"] for r in journal if r["event"] == "launch"} - {
        r["job"] for r in journal if r["event"] == "job_start"}
    got = marks_of(marks)
    for i in range(len(secs)):
        jid = f"j{i}"
        words = [w for w, _ in got.get(jid, [])]
        if jid in launched_only and not words:  # the kill fell between the launch and its start record
            note = next(j["note"] for j in report["jobs"] if j["id"] == jid)
            assert "may have run; not started again" in note
            continue
        assert words == ["start", "end"], (jid, words)  # started exactly once, and ended
    spans = [(m[0][1], m[1][1]) for m in got.values() if len(m) == 2]
    assert most_at_once(spans) <= CMAX
    assert all(j["end_s"] is not None and j["start_s"] is not None for j in report["jobs"])
    assert report["policy"] == "rollout" and report["mode"] == "continuous" and not report["simulated"]
    still = [jid for jid, m in before.items() if [w for w, _ in m] == ["start"]]  # running at the kill
    assert still and all(any(n.startswith((f"{jid} ", f"{jid}:")) for n in report["notes"]) for jid in still)
    resumes = [r for r in journal if r["event"] == "online_resume"]
    assert len(resumes) == 1 and journal[-1]["event"] == "run_end"


def test_a_job_the_journal_proves_never_launched_is_decided_again_and_a_lost_one_is_not(home: Path, tmp_path: Path) -> None:
    """A journal cut after a decision: j0 launched with no start record and no process (reported lost in one line,
    never started), j1 only decided (started on resume), the others never decided."""
    window, marks = stream(tmp_path, [0.3, 0.3, 0.3])
    runs = tmp_path / "runs"
    run_dir = runs / "cut"
    run_dir.mkdir(parents=True)
    (run_dir / "stream.json").write_text(json.dumps({"window": json.loads(window.read_text()), "policy": "packing",
                                                     "window_size": None}))
    alloc = {"cpus": [0], "numa_nodes": [0], "memory": "first-touch", "l3": {}, "mem_bw_percent": {}}
    lines = [{"event": "online_start", "t0": time.time(), "token": "cut-1", "jobs": 3, "max_concurrency": CMAX},
             {"event": "decision", "n": 1, "at_s": 0.0, "starts": [{"job": "j0", **alloc}, {"job": "j1", **alloc}]},
             {"event": "launch", "job": "j0", "at_s": 0.0, "argv": ["true"], "alloc": alloc, "group": None}]
    (run_dir / "journal.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    out = run(["--resume", str(run_dir), "--json"], home)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    got = marks_of(marks)
    assert "j0" not in got  # never started: the journal cannot prove it did not run
    assert [w for w, _ in got["j1"]] == ["start", "end"] and [w for w, _ in got["j2"]] == ["start", "end"]
    lost = [n for n in report["notes"] if n.startswith("j0:")]
    assert len(lost) == 1 and "not started again" in lost[0] and "\n" not in lost[0]
    assert "j0: its launch was journaled but not its start" in out.stderr


def test_bad_online_input_is_one_line(home: Path, tmp_path: Path) -> None:
    window, _ = stream(tmp_path, [0.1])
    out = run([str(window), "--mode", "continuous", "--policy", "groups", "--runs", str(tmp_path / "r")], home)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and "choose rollout" in out.stderr
    empty = tmp_path / "empty-home"
    empty.mkdir()
    out = run([str(window), "--mode", "continuous", "--runs", str(tmp_path / "r")], empty)
    assert out.returncode == 2 and "run 'cosched calibrate', or choose packing or timeshare" in out.stderr
    out = run([str(window), "--mode", "continuous", "--dry-run"], home)
    assert out.returncode == 2 and "--dry-run is not for online runs" in out.stderr


def test_a_decisions_note_reaches_the_runs_notes_once(tmp_path: Path) -> None:
    # e.g. rollout's guard deciding as packing says so at every decision: the run's report says it once
    from env.episode.stream import Decision
    from env.plan.allocate import plain_allocation
    from env.real.online import OnlineJob, OnlineRunner

    jobs = [OnlineJob(id=f"j{i}", profile="EP", command=[sys.executable, "-c", "pass"]) for i in range(3)]
    cpu = [LOCAL.cpus[0]]

    def decide(held, queue, pending, now):  # noqa: ANN001, ANN202 - the runner's Decide
        if held or not queue:
            return Decision()
        return Decision(starts=((queue[0].id, plain_allocation(LOCAL, cpu)),), note="decided as packing: a test")

    (tmp_path / "run").mkdir()
    result = OnlineRunner(jobs, LOCAL, tmp_path / "run", 1, decide).run()
    assert result.notes.count("decided as packing: a test") == 1
    assert all(r.exit_code == 0 for r in result.jobs)


def test_a_window_whose_mode_is_continuous_runs_online_with_time_sharing_measured(home: Path, tmp_path: Path) -> None:
    # no --mode: a stream-only policy makes the mode continuous, and a window in that mode is decided online at every
    # real event (as --mode continuous), not run from the plan's predicted launches; --measure-timeshare then runs
    # every job alone after the stream, in the same run
    secs = [0.4, 0.3, 0.5, 0.3]
    window, marks = stream(tmp_path, secs)
    out = run([str(window), "--policy", "packing", "--measure-timeshare", "--runs", str(tmp_path / "runs"), "--json"], home)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["mode"] == "continuous" and report["policy"] == "packing" and report["decisions"] >= 1
    assert report["notes"][0].startswith("mode continuous: policy 'packing'")
    assert report["timeshare_source"].startswith("measured in this run") and report["timeshare_s"] > sum(secs) * 0.9
    assert report["throughput_vs_timeshare"] == pytest.approx(report["timeshare_s"] / report["total_s"], abs=1e-3)
    assert report["total_s"] == report["metrics"]["makespan_s"]
    got = marks_of(marks)
    assert all([w for w, _ in got[f"j{i}"]] == ["start", "end", "start", "end"] for i in range(len(secs)))  # +alone
    stream_spans = [(m[0][1], m[1][1]) for m in got.values()]
    assert most_at_once(stream_spans) == CMAX  # packing ran two at once
    assert (Path(report["run_dir"]) / "timeshare" / "plan.json").exists()


def lengths_lines(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "lengths.jsonl").read_text().splitlines()]


def test_each_programs_length_is_learned_from_its_jobs_that_ended(home: Path, tmp_path: Path) -> None:
    # The node model's EP and MG run for minutes alone (their profiles); these jobs run under a second. The first
    # decision takes the profiles' lengths; every start after a job ended takes the lengths learned from the jobs
    # that ended (the other program's too: its profile's time times the learned ratio), and the report says so.
    # --no-learn-lengths keeps the profiles' lengths throughout.
    secs = [0.4, 0.5, 0.4, 0.5, 0.4, 0.5]
    window, _ = stream(tmp_path, secs)
    out = run([str(window), "--mode", "continuous", "--runs", str(tmp_path / "runs"), "--json"], home)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    lines = lengths_lines(Path(report["run_dir"]))
    assert sorted(s["job"] for s in lines) == sorted(f"j{i}" for i in range(len(secs)))  # each start, once
    first = min(report["jobs"], key=lambda j: j["start_s"])["start_s"]
    at_first = [s for s in lines if next(j for j in report["jobs"] if j["id"] == s["job"])["start_s"] < first + 0.2]
    later = [s for s in lines if s not in at_first]
    profiles = min(s["solo_s"] for s in at_first)
    assert at_first and later and profiles > 5 and all(s["solo_s"] < profiles / 5 for s in later)
    assert any(n.startswith("lengths learned from the jobs that ended") for n in report["notes"])

    out = run([str(window), "--mode", "continuous", "--no-learn-lengths", "--runs", str(tmp_path / "runs2"), "--json"],
              home)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert not (Path(report["run_dir"]) / "lengths.jsonl").exists()
    assert not any(n.startswith("lengths learned") for n in report["notes"])


def test_a_job_that_gives_its_own_length_keeps_it_and_teaches_nothing(home: Path, tmp_path: Path) -> None:
    # j1 says it runs 50 s alone (a window job's solo_s; that decisions take it is tested on the node model in
    # tests/service/test_job_lengths.py): its start waits for no lesson and its end teaches MG nothing (its length
    # is its own, not its program's), while every other job's start is recorded to teach
    window, _ = stream(tmp_path, [0.4, 0.5, 0.4, 0.5, 0.4, 0.5])
    doc = json.loads(window.read_text())
    doc["jobs"][1]["solo_s"] = 50.0
    window.write_text(json.dumps(doc))
    out = run([str(window), "--mode", "continuous", "--runs", str(tmp_path / "runs"), "--json"], home)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    lines = lengths_lines(Path(report["run_dir"]))
    assert sorted(s["job"] for s in lines) == ["j0", "j2", "j3", "j4", "j5"]


def test_a_resumed_run_decides_with_the_lengths_the_killed_run_had_learned(home: Path, tmp_path: Path) -> None:
    secs = [0.5, 1.5, 0.5, 1.5, 0.5, 0.5, 0.5, 0.5]
    window, marks = stream(tmp_path, secs)
    runs = tmp_path / "runs"
    killed_mid_stream(window, marks, runs, home)  # a job ended before the kill: lengths were learned
    (run_dir,) = runs.iterdir()
    before = lengths_lines(run_dir)
    out = run(["--resume", str(run_dir), "--json"], home)
    assert out.returncode == 0, out.stderr
    after = lengths_lines(run_dir)[len(before):]
    profiles = min(s["solo_s"] for s in before[:2])  # the first decision's: the profiles' own
    assert profiles > 5 and after and all(s["solo_s"] < profiles / 5 for s in after)
    assert all([w for w, _ in m] == ["start", "end"] for m in marks_of(marks).values())


def test_only_a_job_that_ended_well_on_its_cpus_teaches_a_length() -> None:
    from service.lengths import ran_well

    ok = {"exit_code": 0, "signal": None, "timed_out": False, "end_seen": True, "note": None, "gave_back": [],
          "start_s": 1.0, "end_s": 3.5}
    assert ran_well(ok) == pytest.approx(2.5)
    for bad in ({"exit_code": 1}, {"signal": 9}, {"timed_out": True}, {"end_seen": False},
                {"note": "waited for after a resume: exit status unknown"}, {"gave_back": [{"at_s": 2.0, "cpus": [0]}]},
                {"start_s": None}):
        assert ran_well({**ok, **bad}) is None, bad
