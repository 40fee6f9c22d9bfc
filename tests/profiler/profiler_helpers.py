"""Helpers of the profiler tests (imported by the tests as `profiler_helpers`)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from profiler.events import PERF_EVENTS
from profiler.models import Profile
from profiler.perfcsv import parse_perf_csv

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[2]
COSCHED = REPO / ".venv" / "bin" / "cosched"

needs_perf = pytest.mark.skipif(shutil.which("perf") is None, reason="perf is not installed")
needs_sysbench = pytest.mark.skipif(shutil.which("sysbench") is None, reason="sysbench is not installed")
needs_numactl = pytest.mark.skipif(shutil.which("numactl") is None, reason="numactl is not installed")


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text()


def cosched_argv() -> list[str]:
    """How to start the real `cosched` console script (falls back to the module when not installed)."""
    if COSCHED.exists():
        return [str(COSCHED)]
    return [sys.executable, "-m", "service.cli"]


def profile_from_fixture(
    fixture: str, name: str = "job", node_id: str = "node-a", **kw: object
) -> Profile:
    stat = parse_perf_csv(fixture_text(fixture))
    fields: dict[str, object] = {"wall_s": 1.0, "command": ["./job"], "perf_version": "perf version 6.1.192"}
    fields.update(kw)
    return Profile(name=name, node_id=node_id, counters=stat.counters(PERF_EVENTS), **fields)  # type: ignore[arg-type]


def env_with_home(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["COSCHED_HOME"] = str(home)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env
