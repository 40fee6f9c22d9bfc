"""bench/stream_real.py's pieces on a tiny real stream: three 0.3 s programs at Cmax 2 run by the real packing and by
time sharing (online runs of ``cosched run --mode continuous``). Each program writes its own start, end and the CPUs
the kernel lets it run on, so the test does not take the runner's word: every job ran exactly once, packing's jobs
each on one of its slots (floor(N/Cmax) CPUs) and pinned to it, time sharing's alone on the whole node; the bench's
checks flag a job off its slot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import stream_real

PROGRAM = """
import os, sys, time
marks, name = sys.argv[1], sys.argv[2]
with open(os.path.join(marks, name), "a") as f:
    f.write(json.dumps({"start": time.time(), "cpus": sorted(os.sched_getaffinity(0))}) + "\\n")
t = time.time()
while time.time() - t < 0.3:
    pass
with open(os.path.join(marks, name), "a") as f:
    f.write(json.dumps({"end": time.time()}) + "\\n")
""".replace("import os, sys, time", "import json, os, sys, time")


def cpus_of_node() -> list[int]:
    from env.node.discover import discover

    return sorted(discover().cpus)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="Cmax 2 needs two CPUs")
def test_the_bench_runs_packing_on_its_pinned_slots_and_time_sharing_each_job_once(tmp_path: Path) -> None:
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    jobs = [{"id": f"j{i}", "profile": f"p{i % 2}", "command": [sys.executable, str(prog), "MARKS", f"j{i}"]}
            for i in range(3)]
    out = tmp_path / "fig" / "tiny"
    marks = {}
    for mode in ("packing", "timeshare"):
        marks[mode] = tmp_path / f"marks-{mode}"
        marks[mode].mkdir()
    # one stream per mode, so each mode's marks are its own: run the bench once per mode
    docs = {}
    for mode in ("packing", "timeshare"):
        stream = tmp_path / f"{mode}.json"
        stream.write_text(json.dumps({"jobs": [{**j, "command": [str(marks[mode]) if a == "MARKS" else a
                                                                   for a in j["command"]]} for j in jobs],
                                      "max_concurrency": 2}))
        got = subprocess.run([sys.executable, str(ROOT / "bench" / "stream_real.py"), "--stream", str(stream), "--modes",
                              mode, "--repeats", "1", "--cmax", "2", "--home", str(tmp_path / "home"), "--runs",
                              str(tmp_path / "runs" / mode), "--out", f"{out}-{mode}"], check=False, capture_output=True, text=True,
                             cwd=ROOT, timeout=180)
        assert got.returncode == 0, got.stderr[-2000:]
        assert f"repeat 1/1: {mode}" in got.stderr  # progress lines as it runs
        docs[mode] = json.loads(Path(f"{out}-{mode}.json").read_text())
        assert Path(f"{out}-{mode}.png").stat().st_size > 0
        assert docs[mode]["kind"] == "measured" and docs[mode]["checks_failed"] == []

    cpus = cpus_of_node()
    size = len(cpus) // 2
    slots = [cpus[:size], cpus[size:2 * size]]
    for mode in ("packing", "timeshare"):
        (rec,) = docs[mode]["repeats"]
        report = rec["runs"][mode]
        seen = {}
        for f in marks[mode].iterdir():
            lines = [json.loads(x) for x in f.read_text().splitlines()]
            assert [next(iter(x)) for x in lines] == ["start", "end"], (mode, f.name, lines)  # ran exactly once
            seen[f.name] = lines[0]["cpus"]
        assert sorted(seen) == ["j0", "j1", "j2"]
        by_id = {j["id"]: j for j in report["jobs"]}
        for jid, allowed in seen.items():
            assert by_id[jid]["exit_code"] == 0
            assert allowed == sorted(by_id[jid]["cpus"])  # the program ran on the CPUs it was given: pinned
            if mode == "packing":
                assert allowed in slots
            else:
                assert allowed == cpus
        assert report["max_running"] == (2 if mode == "packing" else 1)
        assert rec["row"][mode]["makespan_s"] > 0.3

    packing = {j["id"]: j for j in docs["packing"]["repeats"][0]["runs"]["packing"]["jobs"]}
    # first come first served: j0 and j1 start at once on the two slots (the lowest first), j2 in the first to free
    assert packing["j0"]["cpus"] == slots[0] and packing["j1"]["cpus"] == slots[1]
    assert packing["j2"]["start_s"] >= min(packing["j0"]["end_s"], packing["j1"]["end_s"]) - 0.05


def test_the_checks_flag_a_job_off_packings_slots_a_second_run_and_too_many_at_once() -> None:
    job = {"id": "a", "profile": "p", "submit_s": 0, "start_s": 0.0, "end_s": 1.0, "exit_code": 0, "cpus": [0],
           "observed_cpus": [0], "note": None}
    good = {"jobs": [job, {**job, "id": "b", "cpus": [1], "observed_cpus": [1]}], "max_running": 2}
    assert stream_real.check_run(good, "packing", 2, 2, [0, 1]) == []
    off = {**good, "jobs": [job, {**job, "id": "b", "cpus": [0, 1], "observed_cpus": [0, 1]}]}
    assert any("not on one of its slots" in b for b in stream_real.check_run(off, "packing", 2, 2, [0, 1]))
    unpinned = {**good, "jobs": [job, {**job, "id": "b", "cpus": [1], "observed_cpus": [0, 1]}]}
    assert any("ran on CPUs" in b for b in stream_real.check_run(unpinned, "packing", 2, 2, [0, 1]))
    twice = {**good, "jobs": [job, job]}
    assert stream_real.check_run(twice, "packing", 2, 2, [0, 1])
    crowded = {**good, "max_running": 3}
    assert any("above Cmax" in b for b in stream_real.check_run(crowded, "packing", 2, 2, [0, 1]))
    shared = {**good, "jobs": [{**job, "cpus": [0, 1], "observed_cpus": [0, 1]}] * 1 +
              [{**job, "id": "b", "cpus": [0, 1], "observed_cpus": [0, 1]}], "max_running": 2}
    assert any("alone on the whole node" in b for b in stream_real.check_run(shared, "timeshare", 2, 2, [0, 1]))


def test_a_repeat_row_measures_throughput_against_the_same_repeats_time_sharing() -> None:
    def run(spans: list[tuple[float, float]]) -> dict:
        return {"jobs": [{"submit_s": 0.0, "start_s": s, "end_s": e} for s, e in spans]}

    row = stream_real.repeat_row({"timeshare": run([(0, 5), (5, 9)]), "packing": run([(0, 6), (0, 5)]),
                                  "rollout": run([(0, 4), (0, 5)])})
    assert row["timeshare"]["throughput_vs_timeshare"] == 1.0
    assert row["packing"]["throughput_vs_timeshare"] == pytest.approx(9 / 6, abs=1e-4)
    assert row["continuous_over_packing"] == pytest.approx(6 / 5, abs=1e-4)
    assert row["rollout"]["mean_turnaround_s"] == 4.5
    s = stream_real.summary([row, {**row, "continuous_over_packing": 0.9}], ["timeshare", "packing", "rollout"])
    assert s["continuous_at_least_packing"] == "1 of 2 repeats"


def test_scaled_jobs_do_k_times_their_profiled_work_and_the_draw_is_the_seeds() -> None:
    # --scale-seed: a stress-ng op count, a shell loop's seq and a Python range are each scaled; nothing to scale is
    # one line; the same seed draws the same factors
    assert stream_real.scaled_argv(["stress-ng", "--heapsort", "1", "--heapsort-ops", "32", "--quiet"], 3) == [
        "stress-ng", "--heapsort", "1", "--heapsort-ops", "96", "--quiet"]
    assert stream_real.scaled_argv(["sh", "-c", "for i in $(seq 18); do gcc; done"], 0.5) == [
        "sh", "-c", "for i in $(seq 9); do gcc; done"]
    assert stream_real.scaled_argv(["python3", "-c", "print(sum(range(60_000_000)))"], 2) == [
        "python3", "-c", "print(sum(range(120000000)))"]
    with pytest.raises(SystemExit, match="no work count to scale in sleep 5"):
        stream_real.scaled_argv(["sleep", "5"], 2)
    progs = sorted(stream_real.HELDOUT3_PROGRAMS)
    ks = stream_real.scales(progs, 1)
    assert ks == stream_real.scales(progs, 1) and set(ks.values()) <= set(stream_real.SCALES)
    assert stream_real.mode_argv(Path("s.json"), "rollout-profiles", Path("r"))[5:9] == [
        "--policy", "rollout", "--no-learn-lengths", "--runs"]


def test_the_given_lengths_mode_runs_rollout_on_a_stream_whose_jobs_say_k_times_their_profiles_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import datetime, timezone

    from env.node.discover import local_node_id
    from profiler.models import Profile
    from profiler.store import ProfileStore

    monkeypatch.setenv("COSCHED_HOME", str(tmp_path))
    for name, wall in (("a", 4.0), ("b", 6.0)):
        ProfileStore().put(Profile(name=name, node_id=local_node_id(), command=[f"/bin/{name}"], wall_s=wall,
                                   counters={"duration_time": wall * 1e9}, created_at=datetime.now(timezone.utc)))
    doc = {"jobs": [{"id": "a-1", "profile": "a", "command": ["a"]}, {"id": "b-1", "profile": "b", "command": ["b"]}],
           "max_concurrency": 2}
    given = stream_real.given_stream(doc, {"a": 3.0}, tmp_path)
    assert [j["solo_s"] for j in given["jobs"]] == [12.0, 6.0] and "solo_s" not in doc["jobs"][0]
    argv = stream_real.mode_argv(tmp_path / "stream.json", stream_real.GIVEN_MODE, tmp_path / "runs")
    assert str(tmp_path / "stream-given.json") in argv and argv[argv.index("--policy") + 1] == "rollout"
    with pytest.raises(SystemExit, match="stored profile of c"):
        stream_real.given_stream({"jobs": [{"id": "c-1", "profile": "c"}]}, {}, tmp_path)
