"""Profiler test fixtures: a private COSCHED_HOME per test; profiles built from the perf fixtures."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from profiler.models import Profile
from profiler_helpers import profile_from_fixture


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh COSCHED_HOME (for this process and the cosched processes it starts)."""
    h = tmp_path / "cosched-home"
    monkeypatch.setenv("COSCHED_HOME", str(h))
    return h


@pytest.fixture
def make_profile() -> Callable[..., Profile]:
    return profile_from_fixture
