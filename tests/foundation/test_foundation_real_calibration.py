"""The calibrator on this machine for real, at a small budget: env.calibration through the real
MeasuringBackend (native programs and real jobs, launched through env.plan.launch and the executor). Checks that
every kind of measurement comes back and a node-model file is made; the fit's accuracy is a bench figure."""

from __future__ import annotations

import math
from pathlib import Path

from env.calibration.calibrate import CalibrationConfig, calibrate
from env.node.discover import discover
from env.real.probes import ProbeSizes, RealMeasuringBackend

SMALL = ProbeSizes(probe_rounds=2, probe_ws_mb=4, bubble_max_mb=8, stream_mb=4, stream_reps=1, latency_mb=4, latency_loads=50_000)
JOBS = {
    "cpu": ["sysbench", "cpu", "--threads=1", "--events=100", "--time=0", "run"],
    "mem": ["sysbench", "memory", "--threads=1", "--memory-block-size=1M", "--memory-total-size=512M", "--time=0", "run"],
}


def test_calibration_runs_for_real_at_a_small_budget(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("COSCHED_HOME", str(tmp_path / "home"))  # nothing of this test goes to the user's home
    work = tmp_path / "work"
    backend = RealMeasuringBackend(discover(), JOBS, sizes=SMALL, work_dir=work)
    result = calibrate(backend, CalibrationConfig(probes=1, heldout=1, rounds=1, ensemble=2, candidates=10, max_nfev=5))
    kinds = {r.kind for r in result.records}
    assert {"stream", "latency", "solo", "bubble", "probe", "corun"} <= kinds
    assert not any(r.simulated for r in result.records)
    assert sorted(j.params.name for j in result.model.jobs) == ["cpu", "mem"]
    # At this budget the runs last milliseconds and the launch overhead (numactl, perf) dominates them, which the
    # contention model has no term for: the fit may fail, and must then say so instead of predicting.
    if result.fit_problem is None:
        assert len(result.heldout) == 1 and all(m > 0 and math.isfinite(p) for m, p in result.heldout)
    else:
        assert "misses the measured times" in result.fit_problem and result.heldout == []
    assert result.node_seconds["profiling"] > 0 and backend.node_seconds >= sum(result.node_seconds.values()) - 1e-6
    assert not any(work.iterdir())  # every measurement's files were removed after it succeeded
