"""bench/twin_production.py runs end to end at a tiny budget (the figures themselves come from the bench): new
programs enter the production model from one run alone each and from the co-runs of the default policy's plans,
and every held-out window is planned on both models and run on the node itself."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NEW = ("IS", "DC")


def test_the_production_twin_bench_learns_new_programs_from_runs_only(tmp_path: Path) -> None:
    out = tmp_path / "twin.json"
    subprocess.run([sys.executable, str(ROOT / "bench" / "twin_production.py"), "--calibrate", "EP,CG", "--new",
                    ",".join(NEW), "--windows", "2", "--size", "4", "--cmaxes", "2", "--max-windows", "3", "--coruns", "1",
                    "--heldout", "2", "--probes", "2", "--out", str(out)], capture_output=True, text=True, timeout=600,
                   check=True)
    doc = json.loads(out.read_text())
    assert doc["simulated"] is True and doc["new_programs"] == list(NEW)
    log = doc["production"]["log"]
    seen: set[str] = set()
    for w in log:  # as cosched run: the jobs of a program never seen run alone, the rest is planned
        alone = sorted(w["first_runs"])
        assert alone == sorted(n for n in w["jobs"] if n in NEW and n not in seen)
        assert sorted(alone + [n for g in w["groups"] for n in g]) == sorted(w["jobs"])
        seen |= set(alone)
    assert set(doc["production"]["coruns"]) == seen  # learned from those runs only
    assert sum(doc["production"]["coruns"].values()) >= 1
    assert len(doc["heldout_windows"]) == 2
    for row in doc["heldout_windows"]:
        assert sum(n in NEW for n in row["jobs"]) >= 2
        for label in ("production", "dedicated", "true"):
            assert row[label]["throughput_vs_timeshare"] > 0
            assert sorted(n for g in row[label]["groups"] for n in g) == sorted(row["jobs"])
    mean = doc["mean_throughput_vs_timeshare"]
    assert abs(doc["production_pct_of_dedicated"] - 100 * mean["production"] / mean["dedicated"]) < 1e-9
