from __future__ import annotations

import pytest

from env.sim.nodes import load_node


@pytest.fixture(scope="session")
def ref_node():
    return load_node("sim:reference")
