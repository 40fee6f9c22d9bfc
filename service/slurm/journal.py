"""The controller's journal (SQLite, one transaction per decision): what it planned, where each group goes,
what it released. A controller killed at any point and restarted reads it back and carries on: a journaled
job is never planned again (no double start), a group dispatched but not yet released is released on the
same node with the same placement (no loss), and a job it never journaled is one it has not touched.

Job status: planned -> dispatched -> released -> done; or gone (cancelled before its group started), outside
(started by someone else, e.g. the user's own 'scontrol release') or lost (Slurm no longer knows it: a slurmctld
restart from older state). A group: waiting -> dispatched (node chosen, placements being written, jobs being
pinned and released) -> released -> done.

Beside them: ``seen``, every job of the partition the controller has seen held, from its first sighting, with
what an operator needs to submit it again (name, partition, script, directory), keyed by (job id, submit time):
Slurm gives a lost job's id to the next submission. ``events``: what was reported once (a lost job, a job held
again after it ran, a second start the plugin refused), so that a restarted controller does not say it again.
``retired_jobs``: journal rows of lost jobs whose id Slurm has given to a new job.
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
CREATE TABLE IF NOT EXISTS seen (
    job_id INTEGER NOT NULL, submit INTEGER NOT NULL, name TEXT NOT NULL, partition TEXT NOT NULL,
    command TEXT NOT NULL, workdir TEXT NOT NULL, user TEXT NOT NULL, stdout TEXT NOT NULL, options TEXT NOT NULL,
    first_seen REAL NOT NULL, fate TEXT, PRIMARY KEY (job_id, submit));
CREATE INDEX IF NOT EXISTS seen_fate ON seen (fate);
CREATE TABLE IF NOT EXISTS events (
    kind TEXT NOT NULL, key TEXT NOT NULL, job_id INTEGER, at REAL NOT NULL, line TEXT NOT NULL,
    PRIMARY KEY (kind, key));
CREATE TABLE IF NOT EXISTS retired_jobs (
    job_id INTEGER NOT NULL, submit INTEGER NOT NULL, window_id INTEGER NOT NULL, group_idx INTEGER NOT NULL,
    profile TEXT NOT NULL, status TEXT NOT NULL, note TEXT, retired REAL NOT NULL);
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
class SeenJob:
    """A job as first seen held in the partition: what it takes to submit it again."""

    job_id: int
    submit: int
    name: str
    partition: str
    command: str  # the script and its arguments (a --wrap job's script as the controller saved it)
    workdir: str
    user: str
    stdout: str
    options: list[str]
    fate: str | None = None  # None while waiting to be planned; planned, lost, gone

    def resubmit(self) -> str:
        """The command that submits the job again (its options, name, partition and script)."""
        opt = "--cosched" + (f"={','.join(self.options)}" if self.options else "")
        parts = ["sbatch", opt, "-p", self.partition, "-J", _quote(self.name)]
        if self.workdir:
            parts += ["-D", _quote(self.workdir)]
        if self.stdout:
            parts += ["-o", _quote(self.stdout)]
        parts.append(self.command or "SCRIPT")
        return " ".join(parts)


def _quote(word: str) -> str:
    import shlex

    return shlex.quote(word)


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
                self.db.executemany("UPDATE seen SET fate='planned' WHERE job_id=? AND submit=?",
                                    [(j.job_id, int(j.eligible)) for j in jobs])
        return ids

    def add_decision(self, node: str, doc_json: str, solo: bool, predicted_s: float | None, jobs: list[NewJob]) -> int:
        """A continuous decision for ``node``, in one transaction: a window of one group, already dispatched to the
        node, with the jobs it starts (a job of a group that waited for a node again moves here)."""
        now = time.time()
        with self._tx():
            cur = self.db.execute("INSERT INTO windows (created, plan) VALUES (?, ?)", (now, doc_json))
            wid = int(cur.lastrowid or 0)
            self.db.execute("INSERT INTO groups VALUES (?, 0, ?, 'dispatched', ?, ?, ?)",
                            (wid, node, int(solo), predicted_s, now))
            self.db.executemany(
                "INSERT OR REPLACE INTO jobs VALUES (?, ?, 0, ?, ?, ?, 'dispatched', ?, NULL, ?)",
                [(j.job_id, wid, j.profile, ",".join(j.options), json.dumps(j.placement) if j.placement is not None
                  else None, j.eligible, now) for j in jobs])
            self.db.executemany("UPDATE seen SET fate='planned' WHERE job_id=? AND submit=?",
                                [(j.job_id, int(j.eligible)) for j in jobs])
        return wid

    def add_seen(self, jobs: list[SeenJob]) -> None:
        """Jobs seen held for the first time, in one transaction."""
        if not jobs:
            return
        now = time.time()
        with self._tx():
            self.db.executemany(
                "INSERT OR IGNORE INTO seen VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)",
                [(j.job_id, j.submit, j.name, j.partition, j.command, j.workdir, j.user, j.stdout, ",".join(j.options),
                  now) for j in jobs])

    def set_seen_fate(self, job_id: int, submit: int, fate: str) -> None:
        with self._tx():
            self.db.execute("UPDATE seen SET fate=? WHERE job_id=? AND submit=?", (fate, job_id, submit))

    def report_once(self, kind: str, key: str, job_id: int | None, line: str) -> bool:
        """Records that ``line`` was said (kind, key: what it is about); False when it had been said already."""
        with self._tx():
            cur = self.db.execute("INSERT OR IGNORE INTO events VALUES (?, ?, ?, ?, ?)",
                                  (kind, key, job_id, time.time(), line))
        return cur.rowcount == 1

    def retire(self, job_id: int) -> None:
        """Moves the journal row of a lost job aside: Slurm has given its id to a new job."""
        now = time.time()
        with self._tx():
            self.db.execute("INSERT INTO retired_jobs SELECT job_id, CAST(eligible AS INTEGER), window_id, group_idx, "
                            "profile, status, note, ? FROM jobs WHERE job_id=?", (now, job_id))
            self.db.execute("DELETE FROM jobs WHERE job_id=?", (job_id,))

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

    def regroup(self, window_id: int, idx: int) -> None:
        """A group none of whose jobs started goes back to waiting for a node (its node forgotten)."""
        now = time.time()
        with self._tx():
            self.db.execute("UPDATE groups SET status='waiting', node=NULL, updated=? WHERE window_id=? AND idx=?",
                            (now, window_id, idx))
            self.db.execute("UPDATE jobs SET status='planned', updated=? WHERE window_id=? AND group_idx=? "
                            "AND status IN ('planned', 'dispatched', 'released')", (now, window_id, idx))

    def split_off(self, window_id: int, idx: int, job_ids: list[int]) -> int:
        """Jobs of a released group that never started, while others of it did, go to a new group of the same window
        that waits for a node; returns its index."""
        now = time.time()
        with self._tx():
            new = int(self.db.execute("SELECT MAX(idx) FROM groups WHERE window_id=?", (window_id,)).fetchone()[0]) + 1
            self.db.execute("INSERT INTO groups SELECT window_id, ?, NULL, 'waiting', solo, predicted_s, ? FROM groups "
                            "WHERE window_id=? AND idx=?", (new, now, window_id, idx))
            self.db.executemany("UPDATE jobs SET group_idx=?, status='planned', updated=? WHERE job_id=? AND window_id=?",
                                [(new, now, j, window_id) for j in job_ids])
        return new

    def set_job(self, job_id: int, status: str, note: str | None = None) -> None:
        with self._tx():
            self.db.execute("UPDATE jobs SET status=?, note=COALESCE(?, note), updated=? WHERE job_id=?",
                            (status, note, time.time(), job_id))

    # ------------------------------------------------------------------ reads

    def known_ids(self) -> set[int]:
        return {r[0] for r in self.db.execute("SELECT job_id FROM jobs")}

    def known_submits(self) -> dict[int, tuple[int, str]]:
        """job id -> (its submit time, its status) of every journaled job."""
        return {r[0]: (int(r[1]), r[2]) for r in self.db.execute("SELECT job_id, eligible, status FROM jobs")}

    def seen_keys(self) -> set[tuple[int, int]]:
        return {(r[0], r[1]) for r in self.db.execute("SELECT job_id, submit FROM seen")}

    def seen(self, fate_null: bool = False) -> list[SeenJob]:
        q = "SELECT job_id, submit, name, partition, command, workdir, user, stdout, options, fate FROM seen"
        if fate_null:
            q += " WHERE fate IS NULL"
        return [self._seen(r) for r in self.db.execute(q + " ORDER BY job_id, submit")]

    def seen_job(self, job_id: int, submit: int) -> SeenJob | None:
        r = self.db.execute("SELECT job_id, submit, name, partition, command, workdir, user, stdout, options, fate "
                            "FROM seen WHERE job_id=? AND submit=?", (job_id, submit)).fetchone()
        return self._seen(r) if r is not None else None

    def events(self, kind: str | None = None) -> list[tuple[str, str, int | None, float, str]]:
        q = "SELECT kind, key, job_id, at, line FROM events"
        args: tuple = ()
        if kind is not None:
            q += " WHERE kind=?"
            args = (kind,)
        return list(self.db.execute(q + " ORDER BY at", args))

    def event_keys(self, kind: str) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT key FROM events WHERE kind=?", (kind,))}

    @staticmethod
    def _seen(r: tuple) -> SeenJob:
        return SeenJob(job_id=r[0], submit=r[1], name=r[2], partition=r[3], command=r[4], workdir=r[5], user=r[6],
                       stdout=r[7], options=[o for o in r[8].split(",") if o], fate=r[9])

    def groups(self, statuses: tuple[str, ...] | None = None) -> list[GroupRow]:
        q = "SELECT window_id, idx, node, status, solo, predicted_s FROM groups"
        args: tuple = ()
        if statuses:
            q += f" WHERE status IN ({','.join('?' * len(statuses))})"
            args = statuses
        return [GroupRow(w, i, n, s, bool(solo), p) for w, i, n, s, solo, p in self.db.execute(q + " ORDER BY window_id, idx", args)]

    def job(self, job_id: int) -> JobRow | None:
        r = self.db.execute("SELECT job_id, window_id, group_idx, profile, options, placement, status, eligible, note "
                            "FROM jobs WHERE job_id=?", (job_id,)).fetchone()
        return self._job(r) if r is not None else None

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
