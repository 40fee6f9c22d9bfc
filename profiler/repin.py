"""Re-pinning a running job onto fewer CPUs: every thread of every process of its session.

A job is started in its own session (``env.real.executor``), so its processes are those whose session id is the
pid it was started with. Threads created while the scan runs inherit their creator's old mask, so the scan is
repeated until no thread of the session is allowed outside the new CPUs (or a few passes found new threads each
time: then the job is reported as not fully re-pinned, never silently left half done).

Re-pinning changes where threads run, not how many there are: a program that started as many threads as it had
CPUs keeps them all, two or more to a CPU. What that costs depends on how its threads wait
(``bench/giveback_cost.py``, measured: an OpenMP program whose threads spin at barriers runs two orders of
magnitude slower; one whose threads sleep, as it would on the fewer CPUs): which is why only a job that says it
adapts (``adapts``) is ever asked to give CPUs back.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

PASSES = 5


def session_pids(sid: int) -> list[int]:
    """The live processes of session ``sid`` (its leader first when it runs)."""
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            fields = (p / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == sid and fields[0] != "Z":  # state, ppid, pgrp, session
            out.append(int(p.name))
    return sorted(out, key=lambda q: (q != sid, q))


def threads(pids: Iterable[int]) -> list[int]:
    out = []
    for pid in pids:
        try:
            out.extend(int(t) for t in os.listdir(f"/proc/{pid}/task"))
        except OSError:
            continue  # ended meanwhile
    return out


def repin(sid: int, cpus: Iterable[int]) -> int:
    """Every thread of session ``sid`` allowed only ``cpus``; the number of threads set. ``OSError`` (one line)
    when a thread refuses (e.g. CPUs outside its cgroup) or new threads keep appearing outside them."""
    want = set(cpus)
    if not want:
        raise ValueError("a job cannot be re-pinned onto no CPU")
    done: set[int] = set()
    for _ in range(PASSES):
        todo = []
        for tid in threads(session_pids(sid)):
            try:
                if os.sched_getaffinity(tid) - want:
                    todo.append(tid)
            except ProcessLookupError:
                continue
        if not todo:
            return len(done)
        for tid in todo:
            try:
                os.sched_setaffinity(tid, want)
                done.add(tid)
            except ProcessLookupError:
                continue
            except OSError as exc:
                raise OSError(f"thread {tid} of job session {sid} cannot be re-pinned to CPUs {sorted(want)}: "
                              f"{exc.strerror}") from None
    raise OSError(f"job session {sid} kept starting threads outside CPUs {sorted(want)} over {PASSES} passes")


__all__ = ["repin", "session_pids", "threads"]
