"""``setup``: the tiny simulated problem of tiny_sim.py, built once a module."""

from __future__ import annotations

import pytest

from tiny_sim import tiny_setup


@pytest.fixture(scope="module")
def setup():
    return tiny_setup()
