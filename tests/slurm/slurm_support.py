"""Helpers of the cluster tests: the local cluster's commands, jobs that record what they were given, the
controller as a real process (so it can be SIGKILLed)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[2]
RECORD = Path(__file__).resolve().parent / "record.py"
PORT = 16850  # this suite's ports: 16850 (slurmctld) and 16851-16854 (n1-n4); 16817 is the default a user's cluster takes

# The real programs of the windows: ~1 s of fixed work each on this machine.
PROGRAMS: dict[str, str] = {
    "sb": "sysbench cpu --events=1000 --threads=1 --time=0 run >/dev/null",
    "xz": "xz -2 -T1 -c {data} >/dev/null",
    "py": "python3 -c 's=0\nfor i in range(3_000_000): s+=i'",
    "nap": "python3 -c 'import time; time.sleep(1)'",
}
LONG = "python3 -c 'import time; time.sleep(3)'"  # the restart test's jobs: long enough to be caught mid-window


@dataclass
class Cluster:
    state_dir: Path
    env: dict[str, str]  # SLURM_CONF and COSCHED_HOME (the profiles) for Slurm's commands and cosched
    placement_dir: Path
    data: Path  # a fixed input file for xz
    work: Path  # job scripts and outputs

    def cli(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        r = subprocess.run([sys.executable, "-m", "service.cli", *args], env=self.env, cwd=REPO, capture_output=True,
                           text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"cosched {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()}")
        return r

    def slurm(self, *argv: str, check: bool = True) -> str:
        r = subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=60)
        if check and r.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} failed: {r.stderr.strip()}")
        return r.stdout

    def submit(self, program: str, tag: str, *, cosched: str | None = "", name: str | None = None,
               extra: tuple[str, ...] = ()) -> int:
        """sbatch a job running PROGRAMS[program] between two records; cosched None: without --cosched."""
        out = self.work / f"{tag}.out"
        script = self.work / f"{tag}.sh"
        cmd = LONG if program == "long" else PROGRAMS[program].format(data=self.data)
        script.write_text("#!/bin/sh\n"
                          f"python3 {RECORD} start\n"
                          f"{cmd}\n"
                          f"python3 {RECORD} end\n")
        argv = ["sbatch", "--parsable", "-J", name or program, "-o", str(out), "--open-mode=append", *extra]
        if cosched is not None:
            argv.append("--cosched" + (f"={cosched}" if cosched else ""))
        return int(self.slurm(*argv, str(script)).strip().split(";")[0])

    def jobs(self) -> dict[int, dict]:
        doc = json.loads(self.slurm("squeue", "--json"))
        return {int(j["job_id"]): j for j in doc["jobs"]}

    def wait(self, ids: list[int], done: Callable[[dict], bool], timeout: float = 90, what: str = "finished") -> dict[int, dict]:
        deadline = time.monotonic() + timeout
        while True:
            jobs = self.jobs()
            if all(i in jobs and done(jobs[i]) for i in ids):
                return jobs
            if time.monotonic() > deadline:
                states = {i: (jobs[i]["job_state"], jobs[i]["state_reason"]) if i in jobs else None for i in ids}
                raise AssertionError(f"jobs not {what} within {timeout} s: {states}")
            time.sleep(0.3)

    def wait_finished(self, ids: list[int], timeout: float = 90) -> dict[int, dict]:
        return self.wait(ids, lambda j: j["job_state"] in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"), timeout)

    def records(self, tag: str) -> list[dict]:
        path = self.work / f"{tag}.out"
        return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]

    def status(self, state_dir: Path) -> dict:
        return json.loads(self.cli("slurm", "status", "--state-dir", str(state_dir), "--json").stdout)

    def cancel(self, ids: list[int]) -> None:
        if ids:
            self.slurm("scancel", *map(str, ids), check=False)


class ControllerProc:
    """``cosched slurm run`` as a process of its own, its output in STATE/controller/stderr.txt."""

    def __init__(self, cluster: Cluster, state_dir: Path, *extra: str) -> None:
        self.cluster = cluster
        self.state_dir = state_dir
        (state_dir / "controller").mkdir(parents=True, exist_ok=True)
        self.stderr_path = state_dir / "controller" / "stderr.txt"
        self.argv = [sys.executable, "-m", "service.cli", "slurm", "run", "--state-dir", str(state_dir),
                     "--placement-dir", str(cluster.placement_dir), "--poll", "0.3", "--gather", "0.5", *extra]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> "ControllerProc":
        with open(self.stderr_path, "ab") as err:
            self.proc = subprocess.Popen(self.argv, env=self.cluster.env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=err)
        return self

    def log(self) -> str:
        return self.stderr_path.read_text() if self.stderr_path.exists() else ""

    def wait_log(self, text: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log():
            if time.monotonic() > deadline:
                raise AssertionError(f"the controller did not log {text!r} within {timeout} s; its log:\n{self.log()}")
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"the controller exited ({self.proc.returncode}); its log:\n{self.log()}")
            time.sleep(0.1)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            self.proc.wait(timeout=30)

    def wait_exit(self, timeout: float = 120) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout=timeout)
