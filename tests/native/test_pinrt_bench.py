"""The pinning runtime's benches run and print their figures (the timing
targets themselves are judged by running the benches, not here)."""
import re
import subprocess
import sys

from pinrt_helpers import BUILD, ROOT, require_build


def test_learner_bench_prints_figures():
    require_build()
    out = subprocess.run([str(BUILD / "pinrt_learner_bench"), "2000"], capture_output=True, text=True, check=True,
                         env={"PINRT_ENABLE": "0"}).stdout
    assert re.search(r"learner_cost_us_per_epoch_64x64=[\d.]+", out)
    assert re.search(r"harness_O1_epochs_to_95pct_median=\d+", out)
    assert re.search(r"harness_O2_epochs_to_95pct_median=\d+", out)
    assert re.search(r"harness_drop_epochs_to_move_median=\d+", out)


def test_manager_bench_prints_figure():
    require_build()
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "pinrt_manager_bench.py"), "--threads", "8",
                          "--seconds", "1", "--period", "0.05"], capture_output=True, text=True, check=True).stdout
    assert re.search(r"manager_cpu_pct_of_one_core=[\d.]+", out)
    assert "threads_seen=8" in out


def test_experiment_runs_and_prints_table():
    require_build()
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "pinrt_experiment.py"), "--runs", "2",
                          "--iterations", "30", "--jobs", "40", "--ants", "16", "--period", "0.02"],
                         capture_output=True, text=True, check=True).stdout
    for row in ("(a) alone", "(b) load from start", "(c) load after 30%"):
        assert re.search(re.escape(row) + r"\s+[\d.]+s\s+[\d.]+s\s+[\d.]+s\s+[\d.]+s\s+[\d.]+", out), out
    assert "same result in every run: True" in out
