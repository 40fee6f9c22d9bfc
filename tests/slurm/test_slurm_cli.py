"""``cosched slurm`` bad input: one line on stderr, nothing started (no daemons needed)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from slurm_support import REPO


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "service.cli", "slurm", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=60, env=env)


def test_up_without_slurm_installed_says_what_to_install(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}  # no munged, slurmctld, ... on PATH
    r = cli("up", "--state-dir", str(tmp_path / "s"), env=env)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Slurm is not installed" in lines[0] and "slurm-wlm" in lines[0], r.stderr
    assert not (tmp_path / "s" / "cluster.json").exists()


def test_up_on_a_port_in_use_names_the_port(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = cli("up", "--nodes", "1", "--port", str(port), "--state-dir", str(tmp_path / "s"))
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    # the next port (the first slurmd's) may happen to be busy too: then both are named
    assert len(lines) == 1 and str(port) in lines[0].split(" in use")[0] and "--port" in lines[0], r.stderr


def test_run_without_a_cluster_or_slurm_conf_is_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "SLURM_CONF"}
    r = cli("run", "--once", "--state-dir", str(tmp_path / "none"), env=env)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "SLURM_CONF" in r.stderr, r.stderr


def test_down_with_nothing_up_is_not_an_error(tmp_path: Path) -> None:
    r = cli("down", "--state-dir", str(tmp_path / "none"))
    assert r.returncode == 0 and "no cluster up" in r.stdout


def test_continuous_mode_refuses_a_policy_that_does_not_decide_at_events_and_a_service_in_one_line(tmp_path: Path) -> None:
    r = cli("run", "--mode", "continuous", "--policy", "best-found", "--state-dir", str(tmp_path / "none"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "--policy 'best-found'" in r.stderr and "rollout" in r.stderr and "agent-search" in r.stderr
    r = cli("run", "--mode", "continuous", "--service", "http://127.0.0.1:9", "--state-dir", str(tmp_path / "none"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--service" in r.stderr, r.stderr
