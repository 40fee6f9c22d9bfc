"""Fixtures of the service tests: real servers (uvicorn in a thread on 127.0.0.1, a free port) and a private store."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from svc_support import SIM_NODE, TOKEN, Server, planning_unavailable, running

from service.api.main import create_app


@pytest.fixture(scope="session")
def cosched_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The profile store of every test server (the store is opened per request, from $COSCHED_HOME)."""
    home = tmp_path_factory.mktemp("cosched-home")
    old = os.environ.get("COSCHED_HOME")
    os.environ["COSCHED_HOME"] = str(home)
    yield home
    if old is None:
        os.environ.pop("COSCHED_HOME", None)
    else:
        os.environ["COSCHED_HOME"] = old


@pytest.fixture(scope="session")
def server(cosched_home: Path) -> Iterator[Server]:
    """The service for the simulated reference node, without a token."""
    with running(create_app(SIM_NODE), cosched_home) as s:
        yield s


@pytest.fixture(scope="session")
def token_server(cosched_home: Path) -> Iterator[Server]:
    with running(create_app(SIM_NODE, token=TOKEN), cosched_home) as s:
        yield s


@pytest.fixture(scope="session")
def planning() -> None:
    why = planning_unavailable()
    if why:
        pytest.skip(why)


@pytest.fixture(scope="session")
def calibrated_local(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One calibration (sim:variant-a, its node this machine's: ``test_real_node_model.calibrated_doc``) for every
    module that plans this node on a calibrated model; each module takes its own copy."""
    from test_real_node_model import calibrated_doc

    return calibrated_doc(tmp_path_factory.mktemp("calibration"))
