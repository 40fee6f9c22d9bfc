"""`cosched run --pin-runtime`: the C pinning runtime is loaded into every job through the launch argv."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from env.plan.launch import PINRT_LIB
from runner_support import MOST, make_plan

ROOT = Path(__file__).resolve().parents[2]
ACO = ROOT / "native" / "build" / "aco"
COSCHED = [sys.executable, "-m", "service.cli"]

pytestmark = pytest.mark.skipif(not PINRT_LIB.exists() or not ACO.exists(), reason="native/ is not built (make native)")


def test_plan_with_runtime_runs_aco_unchanged(tmp_path: Path) -> None:
    summary = tmp_path / "summary.txt"
    cmd = [str(ACO), "-t", "4", "-i", "60"]
    plan = make_plan([[("aco", cmd)]], action=MOST, pin_runtime=PINRT_LIB)
    job = plan.groups[0].jobs[0]
    assert job.launch[-len(cmd) - 2:] == ["env", f"LD_PRELOAD={PINRT_LIB}", *cmd]
    assert plan.pin_runtime
    doc = plan.model_dump()
    doc["groups"][0]["jobs"][0]["env"] = {"PINRT_SUMMARY": str(summary), "PINRT_PERIOD": "0.05"}
    (tmp_path / "plan.json").write_text(json.dumps(doc))
    env = {**os.environ, "COSCHED_HOME": str(tmp_path / "home")}
    out = subprocess.run([*COSCHED, "run", str(tmp_path / "plan.json"), "--json", "--runs", str(tmp_path / "runs")], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    ran = report["groups"][0]["jobs"][0]
    assert ran["exit_code"] == 0
    with_runtime = Path(ran["stdout"]).read_text()
    alone = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    result = [l for l in alone.splitlines() if l.startswith("best_")]
    assert result and [l for l in with_runtime.splitlines() if l.startswith("best_")] == result, "same result with the runtime"
    text = summary.read_text()
    assert "epochs" in text, f"the runtime's exit summary: {text!r}"


def test_window_dry_run_shows_the_preload(tmp_path: Path) -> None:
    window = tmp_path / "w.json"
    window.write_text(json.dumps({"jobs": [{"id": "a", "command": ["true"]}]}))
    home = tmp_path / "home"
    env = {**os.environ, "COSCHED_HOME": str(home)}
    # Profile it first so the job is planned, not excluded.
    subprocess.run([*COSCHED, "profile", "--name", "a", "--no-scale", "--", "true"], check=True, env=env, capture_output=True)
    out = subprocess.run([*COSCHED, "run", str(window), "--policy", "greedy", "--pin-runtime", "--dry-run"], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert f"LD_PRELOAD={PINRT_LIB}" in out.stdout
