"""Exactly once on real daemons: bench/slurm_crash.py's stream through this session's cluster, the controller
SIGKILLed mid-stream and restarted, then slurmctld SIGKILLed (no state save) and restarted from its older state; the
controller in group mode and in continuous mode.
Each job's runs are counted from its own output; what the controller said, from its log."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from slurm_support import REPO, Cluster


@pytest.mark.parametrize("mode", ["groups", "continuous"])
def test_sigkills_of_the_controller_and_slurmctld_run_no_job_twice_and_report_every_loss(cluster: Cluster,
                                                                                      tmp_path: Path, mode: str) -> None:
    r = subprocess.run([sys.executable, str(REPO / "bench" / "slurm_crash.py"), "--jobs", "12", "--plain", "2",
                        "--cluster", str(cluster.state_dir), "--work", str(tmp_path), "--mode", mode, "--json"],
                       env=cluster.env, cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    c = out["counts"]
    log = (tmp_path / "controller" / "controller.log").read_text()
    assert c["jobs"] == 12 and c["plain_jobs"] == 2 and out["mode"] == mode, out["counts"]
    assert c["ran_twice_or_more"] == 0, [j for j in out["jobs"] if j["runs"] > 1]
    for j in out["jobs"]:
        if j["in_slurm"]:  # Slurm still knows it: it ran, once, its start recorded by the plugin
            # on failure: the job's Slurm state, reason and node, and the log lines of the controller and slurmctld
            assert j["runs"] == 1 and j["record"], json.dumps(j, indent=1)
        elif j["ends"] == 0:  # Slurm lost it before it ended: reported lost, by name, with how to resubmit it
            line = j["lost_line"]
            assert line is not None, (j, log)
            assert f"-J {j['tag']}" in line and f"{j['tag']}.sh" in line and "-p cosched" in line, line
            assert "ended" not in line.split("lost by Slurm")[0]
    assert c["known_to_slurm_unrun"] == 0
    # plain jobs: never journaled, held or moved (nothing guards them: a restarted slurmctld may run one again)
    assert c["plain_touched"] == 0, out["plain"]
    assert not out["notes"], (out["notes"], log[-4000:])  # every wait ended in time: a calm moment to crash, and a settled end
