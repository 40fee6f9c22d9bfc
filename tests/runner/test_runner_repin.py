"""Re-pinning a running job onto fewer CPUs (``profiler.repin``), on real processes of this machine: every thread of
every process of the job's session ends up allowed only the kept CPUs, threads started after the re-pin included;
processes of other sessions are untouched; a refusal is one line."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from env.node.cpulist import parse_cpulist
from profiler.repin import repin, session_pids

CPUS = sorted(os.sched_getaffinity(0))

#: A parent with two threads and a child process with two threads; after "go" on stdin the parent starts a third
#: thread (after the re-pin), then all of them report their CPUs from the kernel and wait to be stopped.
JOB = r"""
import os, subprocess, sys, threading, time
stop = threading.Event()
def spin():
    while not stop.is_set():
        time.sleep(0.001)
threads = [threading.Thread(target=spin, daemon=True) for _ in range(2)]
for t in threads: t.start()
child = subprocess.Popen([sys.executable, "-c", "import threading, time\n"
                          "t = threading.Thread(target=time.sleep, args=(60,), daemon=True); t.start(); time.sleep(60)"])
while len(os.listdir(f"/proc/{child.pid}/task")) < 2:
    time.sleep(0.001)
print("ready", child.pid, flush=True)
sys.stdin.readline()
late = threading.Thread(target=spin, daemon=True); late.start()
print("late", flush=True)
time.sleep(60)
"""


def _allowed(pid: int) -> dict[int, set[int]]:
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        for line in (task / "status").read_text().splitlines():
            if line.startswith("Cpus_allowed_list:"):
                out[int(task.name)] = set(parse_cpulist(line.split(":", 1)[1]))
    return out


@pytest.mark.skipif(len(CPUS) < 2, reason="re-pinning onto fewer CPUs needs at least two CPUs allowed to the tests")
def test_every_thread_of_the_jobs_session_keeps_only_the_kept_cpus() -> None:
    job = subprocess.Popen([sys.executable, "-c", JOB], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                           start_new_session=True)
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        word, child = job.stdout.readline().split()
        assert word == "ready"
        child = int(child)
        assert set(session_pids(job.pid)) == {job.pid, child}
        assert all(len(c) == len(CPUS) for c in _allowed(job.pid).values())
        keep = CPUS[:1]
        n = repin(job.pid, keep)
        assert n == 3 + 2  # the parent's main thread and two more; the child's two
        job.stdin.write("go\n")
        job.stdin.flush()
        assert job.stdout.readline().strip() == "late"
        time.sleep(0.05)
        for pid in (job.pid, child):
            threads = _allowed(pid)
            assert threads and all(c == set(keep) for c in threads.values()), (pid, threads)
        assert len(_allowed(job.pid)) >= 4  # the late thread was born on the kept CPU
        assert all(len(c) == len(CPUS) for c in _allowed(bystander.pid).values())  # another session: untouched
    finally:
        for p in (job, bystander):
            os.killpg(p.pid, 9)
            p.wait()


def test_a_job_cannot_be_left_with_no_cpu_and_a_refusal_is_one_line() -> None:
    with pytest.raises(ValueError, match="onto no CPU"):
        repin(os.getpid(), [])
    job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        with pytest.raises(OSError, match=r"cannot be re-pinned to CPUs \[100000\]") as exc:
            repin(job.pid, [100000])  # a CPU this machine does not have
        assert "\n" not in str(exc.value)
    finally:
        os.killpg(job.pid, 9)
        job.wait()
