"""examples/calibration-jobs.json: the real programs the node model is calibrated on (fixed work, not fixed time)."""

from __future__ import annotations

import shutil
from pathlib import Path

from env.plan.models import Window

ROOT = Path(__file__).resolve().parents[2]


def test_calibration_jobs_are_a_window_of_fixed_work_real_programs() -> None:
    window = Window.model_validate_json((ROOT / "examples" / "calibration-jobs.json").read_text())
    examples = Window.model_validate_json((ROOT / "examples" / "window.json").read_text())
    assert len(window.jobs) >= 8
    assert {j.id for j in examples.jobs} <= {j.id for j in window.jobs}  # the example jobs, plus stressors
    programs = {j.command[0] for j in window.jobs if j.command}
    assert {"stress-ng", "7z", "sysbench", "xz"} <= programs
    for j in window.jobs:
        assert j.command and shutil.which(j.command[0]), f"{j.id}: {j.command[0]} is not installed (tools/setup-apt.sh)"
        args = " ".join(j.command)
        if j.command[0] == "stress-ng":
            assert "-ops" in args  # a fixed number of operations, not a time
        if j.command[0] == "sysbench":
            assert "--time=0" in args  # ends by its events / total size, not a timer
        assert j.command[:2] != ["7z", "b"]  # 7z's benchmark runs for a time
