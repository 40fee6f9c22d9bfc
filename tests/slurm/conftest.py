"""One local Slurm cluster (4 nodes) for the whole session, from 'cosched slurm up', torn down at the end.

The cluster tests FAIL (never skip) when it cannot start: a CI machine installs slurm-wlm and munge with
'make setup' (tools/setup-apt.sh) and builds the SPANK plugin with 'make native'.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from slurm_support import PORT, PROGRAMS, REPO, Cluster


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("slurm")
    state = base / "cluster"
    home = base / "home"
    work = base / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    env["COSCHED_HOME"] = str(home)
    up = subprocess.run([sys.executable, "-m", "service.cli", "slurm", "up", "--nodes", "4", "--port", str(PORT),
                         "--state-dir", str(state), "--json"], env=env, cwd=REPO, capture_output=True, text=True, timeout=180)
    if up.returncode != 0:
        subprocess.run([sys.executable, "-m", "service.cli", "slurm", "down", "--state-dir", str(state)], env=env, cwd=REPO,
                       capture_output=True, timeout=120)
        pytest.fail(f"the local Slurm cluster did not start: {up.stderr.strip().splitlines()[-1] if up.stderr.strip() else up.returncode} "
                    "(a machine needs 'make setup' for slurm-wlm and munge)", pytrace=False)
    info = json.loads(up.stdout)
    env["SLURM_CONF"] = info["slurm_conf"]
    data = work / "seq.txt"
    data.write_text("".join(f"{i}\n" for i in range(400_000)))
    c = Cluster(state_dir=state, env=env, placement_dir=Path(info["placement_dir"]), data=data, work=work)
    try:
        if info["plugin"] is None:
            pytest.fail("cosched's SPANK plugin is not built (native/build/cosched_spank.so): run 'make native'",
                        pytrace=False)
        # The profiles the controller plans from: each program profiled on this node, as a user would.
        for name, cmd in PROGRAMS.items():
            c.cli("profile", "--name", name, "--", "sh", "-c", cmd.format(data=data), timeout=180)
        yield c
    finally:
        subprocess.run([sys.executable, "-m", "service.cli", "slurm", "down", "--state-dir", str(state)], env=env,
                       cwd=REPO, capture_output=True, timeout=180)
