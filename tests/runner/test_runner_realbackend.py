"""The real backend for training: measures groups for real, reuses identical configurations."""

from __future__ import annotations

import sys
from pathlib import Path

from env.real.backend import RealBackend, group_key
from runner_support import LOCAL, make_plan


def test_measures_then_reuses(tmp_path: Path) -> None:
    cmd = [sys.executable, "-c", "import time; time.sleep(0.3)"]
    plan = make_plan([[("a", cmd), ("b", cmd)], [("c", cmd)]])
    backend = RealBackend(LOCAL, tmp_path / "work")
    first = backend.evaluate(plan)
    # At least the sleep; the upper bound only guards against a hang (this machine is shared and slow at times).
    assert len(first) == 2 and all(0.25 < m < 120 for m in first)
    assert backend.runs == 2 and backend.reused == 0
    again = RealBackend(LOCAL, tmp_path / "work")  # a new process: the measurements were saved
    assert again.evaluate(plan) == first
    assert again.runs == 0 and again.reused == 2


def test_group_key_is_the_configuration_not_the_ids() -> None:
    cmd = ["sleep", "0"]
    base = make_plan([[("a", cmd), ("b", cmd)]]).groups[0]
    same_profiles_other_ids = make_plan([[("a-2", cmd, "a"), ("b-2", cmd, "b")]]).groups[0]
    other_profiles = make_plan([[("a", cmd), ("c", cmd)]]).groups[0]
    other_command = make_plan([[("a", ["sleep", "1"]), ("b", cmd)]]).groups[0]
    assert group_key(base) == group_key(same_profiles_other_ids)
    assert group_key(base) != group_key(other_profiles)
    assert group_key(base) != group_key(other_command)
