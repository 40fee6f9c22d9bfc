"""The run journal: one JSON line per event, flushed as it happens, so an interrupted run can resume.

Events: run_start, group_start, job_start, job_cpus, job_end, group_end, interrupted, run_end; on resume,
orphans_stopped (the jobs a killed runner left running, stopped before anything runs again).
A group counts as done only when its ``group_end`` is in the journal; a group that was cut off is run
again whole on resume (its jobs were meant to run together).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Iterator
from typing import Any

from env.errors import InputError


class Journal:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._f = open(path, "a", encoding="utf-8")

    def write(self, event: str, **fields: Any) -> None:
        record = {"event": event, "time": time.time(), **fields}
        self._f.write(json.dumps(record) + "\n")
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()


@dataclass
class JournalState:
    """What a journal says happened: finished groups with their job records."""

    done_groups: dict[int, dict[str, Any]] = field(default_factory=dict)  # index -> group_end record
    jobs: dict[int, dict[str, dict[str, Any]]] = field(default_factory=dict)  # index -> job id -> job_end
    cpus: dict[str, list[int]] = field(default_factory=dict)
    started: dict[str, dict[str, Any]] = field(default_factory=dict)  # job id -> latest job_start
    finished: bool = False
    stopped: list[dict[str, Any]] = field(default_factory=list)  # on resume: orphans stopped ({job, group, pid})

    def orphans(self) -> list[dict[str, Any]]:
        """job_start records of jobs that never ended: a runner killed with SIGKILL leaves them running."""
        ended = {j for recs in self.jobs.values() for j in recs}
        return [r for j, r in self.started.items() if j not in ended]


def journal_records(path: Path, what: str = "a run directory of 'cosched run'") -> Iterator[dict[str, Any]]:
    """The journal's records in order; a last line cut by a crash mid-write is left out (everything before it
    stands); any other bad line, or a missing journal, is InputError (one line; ``what``: what the directory is not)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise InputError(f"{path} does not exist: not {what}") from None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}: not {what}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError:
            if n == len(lines):
                return
            raise InputError(f"{path}:{n} is not a JSON line: the journal is damaged") from None


def read_journal(path: Path) -> JournalState:
    state = JournalState()
    for rec in journal_records(path):
        ev = rec.get("event")
        if ev == "job_end":
            state.jobs.setdefault(rec["group"], {})[rec["job"]] = rec
        elif ev == "job_start":
            state.started[rec["job"]] = rec
        elif ev == "job_cpus":
            state.cpus[rec["job"]] = rec["cpus"]
        elif ev == "group_end":
            state.done_groups[rec["group"]] = rec
        elif ev == "group_start":
            state.jobs[rec["group"]] = {}  # a restarted group forgets its earlier, cut-off attempt
        elif ev == "run_end":
            state.finished = True
    return state
