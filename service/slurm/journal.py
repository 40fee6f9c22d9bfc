"""The controller's journal (SQLite, one transaction per decision): what it planned, where each group goes,
what it released. A controller killed at any point and restarted reads it back and carries on: a journaled
job is never planned again (no double start), a group dispatched but not yet released is released on the
same node with the same placement (no loss), and a job it never journaled is one it has not touched.

Job status: planned -> dispatched -> released -> done; or gone (cancelled before its group started) or
outside (started by someone else, e.g. the user's own 'scontrol release'). A group: waiting -> dispatched
(node chosen, placements being written, jobs being pinned and released) -> released -> done.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS windows (id INTEGER PRIMARY KEY AUTOINCREMENT, created REAL NOT NULL, plan TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS groups (
    window_id INTEGER NOT NULL, idx INTEGER NOT NULL, node TEXT, status TEXT NOT NULL, solo INTEGER NOT NULL,
    predicted_s REAL, updated REAL NOT NULL, PRIMARY KEY (window_id, idx));
CREATE TABLE IF NOT EXISTS jobs (
    job_id INTEGER PRIMARY KEY, window_id INTEGER NOT NULL, group_idx INTEGER NOT NULL, profile TEXT NOT NULL,
    options TEXT NOT NULL, placement TEXT, status TEXT NOT NULL, eligible REAL NOT NULL, note TEXT,
    updated REAL NOT NULL);
CREATE INDEX IF NOT EXISTS jobs_status ON jobs (status);
CREATE INDEX IF NOT EXISTS jobs_group ON jobs (window_id, group_idx);
CREATE INDEX IF NOT EXISTS groups_status ON groups (status);
"""


@dataclass(frozen=True)
class JobRow:
    job_id: int
    window_id: int
    group_idx: int
    profile: str
    options: list[str]
    placement: list[str] | None  # the file's lines; None: the whole node (known once the node is chosen)
    status: str
    eligible: float
    note: str | None


@dataclass(frozen=True)
class GroupRow:
    window_id: int
    idx: int
    node: str | None
    status: str
    solo: bool
    predicted_s: float | None


@dataclass(frozen=True)
class NewJob:
    job_id: int
    group_idx: int
    profile: str
    options: list[str]
    placement: list[str] | None
    eligible: float


class Journal:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(path), timeout=30, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")  # a decision journaled is a decision kept, even on power loss
        self.db.executescript(_SCHEMA)

    def close(self) -> None:
        self.db.close()

    # ------------------------------------------------------------------ writes (each one transaction)

    def add_window(self, plan_json: str, groups: list[tuple[int, bool, float | None]], jobs: list[NewJob]) -> int:
        return self.add_windows([(plan_json, groups, jobs)])[0]

    def add_windows(self, windows: list[tuple[str, list[tuple[int, bool, float | None]], list[NewJob]]]) -> list[int]:
        """Journal planned windows (plan, groups as (index, solo, predicted s), jobs) in one transaction."""
        now = time.time()
        ids = []
        with self._tx():
            for plan_json, groups, jobs in windows:
                cur = self.db.execute("INSERT INTO windows (created, plan) VALUES (?, ?)", (now, plan_json))
                wid = int(cur.lastrowid or 0)
                ids.append(wid)
                self.db.executemany("INSERT INTO groups VALUES (?, ?, NULL, 'waiting', ?, ?, ?)",
                                    [(wid, idx, int(solo), pred, now) for idx, solo, pred in groups])
                self.db.executemany(
                    "INSERT INTO jobs VALUES (?, ?, ?, ?, ?, ?, 'planned', ?, NULL, ?)",
                    [(j.job_id, wid, j.group_idx, j.profile, ",".join(j.options),
                      json.dumps(j.placement) if j.placement is not None else None, j.eligible, now) for j in jobs])
        return ids

    def set_group(self, window_id: int, idx: int, status: str, node: str | None = None) -> None:
        self.set_groups([(window_id, idx, node)], status)

    def set_groups(self, groups: list[tuple[int, int, str | None]], status: str) -> None:
        """Several groups (window id, index, node or None to keep it) to ``status`` in one transaction."""
        if not groups:
            return
        with self._tx():
            for window_id, idx, node in groups:
                self._set_group(window_id, idx, status, node)

    def _set_group(self, window_id: int, idx: int, status: str, node: str | None) -> None:
        now = time.time()
        if node is not None:
            self.db.execute("UPDATE groups SET status=?, node=?, updated=? WHERE window_id=? AND idx=?",
                            (status, node, now, window_id, idx))
        else:
            self.db.execute("UPDATE groups SET status=?, updated=? WHERE window_id=? AND idx=?",
                            (status, now, window_id, idx))
        job_status = {"dispatched": "dispatched", "released": "released", "done": "done"}.get(status)
        if job_status is not None:
            # Jobs that left the group (gone, outside) keep their own status.
            self.db.execute("UPDATE jobs SET status=?, updated=? WHERE window_id=? AND group_idx=? "
                            "AND status IN ('planned', 'dispatched', 'released')", (job_status, now, window_id, idx))

    def set_job(self, job_id: int, status: str, note: str | None = None) -> None:
        with self._tx():
            self.db.execute("UPDATE jobs SET status=?, note=COALESCE(?, note), updated=? WHERE job_id=?",
                            (status, note, time.time(), job_id))

    # ------------------------------------------------------------------ reads

    def known_ids(self) -> set[int]:
        return {r[0] for r in self.db.execute("SELECT job_id FROM jobs")}

    def groups(self, statuses: tuple[str, ...] | None = None) -> list[GroupRow]:
        q = "SELECT window_id, idx, node, status, solo, predicted_s FROM groups"
        args: tuple = ()
        if statuses:
            q += f" WHERE status IN ({','.join('?' * len(statuses))})"
            args = statuses
        return [GroupRow(w, i, n, s, bool(solo), p) for w, i, n, s, solo, p in self.db.execute(q + " ORDER BY window_id, idx", args)]

    def jobs_of(self, window_id: int, idx: int) -> list[JobRow]:
        return [self._job(r) for r in self.db.execute(
            "SELECT job_id, window_id, group_idx, profile, options, placement, status, eligible, note FROM jobs "
            "WHERE window_id=? AND group_idx=? ORDER BY job_id", (window_id, idx))]

    def active_jobs(self) -> dict[tuple[int, int], list[JobRow]]:
        """(window id, group index) -> its jobs still in it (planned, dispatched, released), in one query."""
        out: dict[tuple[int, int], list[JobRow]] = {}
        for r in self.db.execute(
                "SELECT job_id, window_id, group_idx, profile, options, placement, status, eligible, note FROM jobs "
                "WHERE status IN ('planned', 'dispatched', 'released') ORDER BY job_id"):
            row = self._job(r)
            out.setdefault((row.window_id, row.group_idx), []).append(row)
        return out

    def all_jobs(self) -> list[JobRow]:
        return [self._job(r) for r in self.db.execute(
            "SELECT job_id, window_id, group_idx, profile, options, placement, status, eligible, note FROM jobs "
            "ORDER BY job_id")]

    def windows(self) -> list[tuple[int, float, str]]:
        return list(self.db.execute("SELECT id, created, plan FROM windows ORDER BY id"))

    @staticmethod
    def _job(r: tuple) -> JobRow:
        return JobRow(job_id=r[0], window_id=r[1], group_idx=r[2], profile=r[3], options=[o for o in r[4].split(",") if o],
                      placement=json.loads(r[5]) if r[5] is not None else None, status=r[6], eligible=r[7], note=r[8])

    def _tx(self) -> "_Tx":
        return _Tx(self.db)


class _Tx:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *_: object) -> None:
        self.db.execute("COMMIT" if exc_type is None else "ROLLBACK")
