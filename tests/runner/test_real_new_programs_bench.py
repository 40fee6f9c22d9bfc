"""bench/real_new_programs.py at its --quick budget (tiny programs; the figures come from the bench itself): the
documented steps on a fresh COSCHED_HOME run end to end through the command line, the baselines run their own plans,
time sharing is measured in each run, and the held-out co-runs are ones no run measured."""

from __future__ import annotations

from contextlib import closing
import json
import sqlite3
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from env.sim.nodes import load_node

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(len(load_node("local").cpus) < 2, reason="co-runs need two CPUs")


def test_the_new_programs_bench_runs_the_documented_steps(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    subprocess.run([sys.executable, str(ROOT / "bench" / "real_new_programs.py"), "--home", str(tmp_path / "home"),
                    "--quick", "--repeats", "1", "--coruns", "1", "--heldout-pairs", "1", "--heldout-repeats", "2",
                    "--no-refresh", "--search-arm",
                    "--out", str(out)], check=True, capture_output=True, text=True, timeout=900)
    doc = json.loads(out.read_text())
    assert doc["measured"] and doc["quick"]
    calib, aside = set(doc["calibration_programs"]), set(doc["window_programs_kept_aside"])
    assert {j.rsplit("-", 1)[0] for j in doc["first_runs_calibration"]["alone"]} == calib  # their first runs
    assert set(doc["calibration"]["jobs"]) == calib and doc["calibration"]["heldout"]["n"] >= 1
    alone = doc["first_runs_window"]["alone_runs_per_program"]
    assert set(alone) == aside and all(alone[n] == doc["window"].count(n) for n in aside)  # each job of a new one
    assert doc["first_runs_window"]["planned"] == []  # nothing of the window was known
    runs = {r["policy"]: r for r in doc["runs"]}
    assert set(runs) == {"default", "fifo", "greedy", "packing", "search"}
    every_job = sorted(f"{n}-{k}" for n in aside for k in range(1, doc["window"].count(n) + 1))
    for pol, r in runs.items():
        assert r["throughput"] > 0 and not r["failed"]
        if pol == "packing":  # an online run: time sharing from the same repeat's runs of every job alone
            assert r["timeshare_source"].startswith("measured in this repeat")
            assert r["timeshare_s"] == pytest.approx(statistics.median(x["timeshare_s"] for x in doc["runs"] if x["policy"] != "packing"))
            assert sorted(j for j, _, _ in r["starts"]) == every_job and 1 <= r["max_running"] <= 2
            assert r["made_by"] == "packing"
            continue
        assert r["timeshare_source"].startswith("measured in this run")
        ran = [j for g in r["groups"] for j in g] if r["groups"] is not None else [x[0] for x in r["launches"]]
        assert sorted(ran) == every_job and (r["groups"] is None) == (r["mode"] == "continuous")
    assert runs["fifo"]["made_by"] == "fifo" and runs["greedy"]["made_by"] == "greedy"  # their own plans
    assert runs["search"]["made_by"] == "agent-search" and runs["search"]["requested"] is None  # never the guard's
    assert all(c >= 1 for c in doc["coruns"].values())
    held = doc["heldout_coruns"]
    assert held["n"] == len(aside) and all(p["measured_s"] > 0 and p["predicted_s"] > 0 for p in held["pairs"])
    assert all(p["partner"] in calib for p in held["pairs"])  # new + new pairs were measured by the runs
    assert held["repeats"] == 2 and all(len(p["runs_s"]) == 2 and p["measured_s"] == pytest.approx(statistics.median(p["runs_s"]))
                                        for p in held["pairs"])  # each held-out pair run twice, its median the truth
    assert set(doc["summary"]) == {"default", "fifo", "greedy", "packing", "search", "default_vs_packing",
                                   "default_vs_packing_makespan"}
    assert doc["summary"]["default_vs_packing"]["median"] == pytest.approx(runs["default"]["throughput"] / runs["packing"]["throughput"])
    assert doc["summary"]["default_vs_packing_makespan"]["median"] == pytest.approx(runs["packing"]["total_s"] / runs["default"]["total_s"])
    # the finished run's held-out co-runs predicted again from the same data: no new run, the same pairs
    again = tmp_path / "again.json"
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "real_new_programs.py"), "--home", str(tmp_path / "home"),
                        "--quick", "--phase", "repredict", "--out", str(again)],
                       check=True, capture_output=True, text=True, timeout=300)
    r = json.loads(again.read_text())
    assert r["now"]["n"] == r["then"]["n"] == held["n"] and "predicted again" in p.stdout
    assert r["then"]["median_abs_error_pct"] == pytest.approx(held["median_abs_error_pct"])
    # ... and measured again: the same pairs, the predictions made then against the median of every run of a pair
    def runs_kept() -> int:  # the calibration data's records
        with closing(sqlite3.connect(tmp_path / "home" / "calibration.sqlite")) as db:
            return db.execute("select count(*) from runs").fetchone()[0]

    runs_before = runs_kept()
    more = tmp_path / "more.json"
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "real_new_programs.py"), "--home", str(tmp_path / "home"),
                        "--quick", "--phase", "remeasure", "--remeasure-repeats", "2", "--out", str(more)],
                       check=True, capture_output=True, text=True, timeout=300)
    m = json.loads(more.read_text())
    assert m["n"] == held["n"] and m["as_run"]["median_abs_error_pct"] == pytest.approx(held["median_abs_error_pct"])
    for row, first in zip(m["pairs"], held["pairs"]):
        assert (row["program"], row["partner"], row["predicted_s"]) == (first["program"], first["partner"], first["predicted_s"])
        assert len(row["measured_s"]) == 4 and row["measured_s"][:2] == first["runs_s"] and min(row["measured_s"]) > 0
        assert row["error_pct"] == pytest.approx(abs(row["predicted_s"] / statistics.median(row["measured_s"]) - 1) * 100)
    assert "against the median of those and 2 more" in p.stdout
    assert runs_kept() == runs_before > 0  # held out: none of these runs joins the calibration data
