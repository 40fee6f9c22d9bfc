"""bench/calibrate_twin.py runs and prints its figures (a tiny budget: the figures themselves come from the bench)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_twin_bench_prints_its_figures():
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "calibrate_twin.py"), "--nodes", "sim:variant-b",
                          "--jobs", "2", "--heldout", "4", "--probes", "2", "--json"], capture_output=True, text=True, timeout=300, check=True)
    doc = json.loads(out.stdout)
    (run,) = doc["runs"]
    assert doc["simulated"] is True and run["node"] == "sim:variant-b" and run["n"] == 4
    assert run["probes"] == 2 and run["node_s_profiling"] > 0 and run["median_abs_error_pct"] >= 0
