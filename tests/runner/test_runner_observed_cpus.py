"""observed_cpus of jobs launched through `env ...`: the program behind env (the same pid, exec'd by env) is found
and its allowed CPUs are read, as for any other job."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from env.real.executor import program_argv
from runner_support import make_plan

COSCHED = [sys.executable, "-m", "service.cli"]
PY = sys.executable
NAP = "import time; time.sleep(0.4)"


@pytest.mark.parametrize(("command", "program"), [
    (["env", "FOO=1", "prog", "a"], ["prog", "a"]),
    (["/usr/bin/env", "-i", "-u", "X", "A=b", "--", "prog", "-x"], ["prog", "-x"]),
    (["env", "-C", "/tmp", "prog"], ["prog"]),
    (["env", "-S", "A=1 prog a", "b"], ["prog", "a", "b"]),
    (["env", "--split-string=prog a", "b"], ["prog", "a", "b"]),
    (["prog", "env"], ["prog", "env"]),
])
def test_the_program_behind_env(command: list[str], program: list[str]) -> None:
    assert program_argv(command) == program


def test_jobs_launched_through_env_have_their_observed_cpus(tmp_path: Path) -> None:
    plan = make_plan([[("through-env", ["env", "COSCHED_TEST=1", PY, "-c", NAP]),
                       ("env-split", ["/usr/bin/env", "-u", "NOTHING", "-S", f"{PY} -c '{NAP}'"])]])
    (tmp_path / "plan.json").write_text(plan.model_dump_json())
    out = subprocess.run([*COSCHED, "run", str(tmp_path / "plan.json"), "--json", "--runs", str(tmp_path / "runs")],
                         env={**os.environ, "COSCHED_HOME": str(tmp_path / "home")}, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    planned = {j.id: j.cpus for g in plan.groups for j in g.jobs}
    seen = {j["id"]: j["observed_cpus"] for g in json.loads(out.stdout)["groups"] for j in g["jobs"]}
    assert seen == planned
