"""Calibration data: every measured run of a node beside the model's prediction, at ``$COSCHED_HOME/calibration.sqlite``.

The profile store's conventions (``profiler.store``, whose opening, transactions and error handling this
reuses): SQLite, WAL, a busy timeout, one ``BEGIN IMMEDIATE`` transaction per write, the schema versioned with
``PRAGMA user_version``, a corrupt or newer file reported and left untouched.

One row per measured run (``profiler.interference.RunRecord``): the node it ran on (``node_key``: the node's
id, or a simulated node's name), where it came from (``calibrate``: profiling and probes; ``heldout``; ``run``:
a ``cosched run`` group), its measured makespan and the model's prediction, and the node-model file that made
the prediction. ``cosched calibrate --update`` refits from all of a node's rows; ``--report`` reads the error
over time and the worst-predicted groups from them.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal, Sequence

from pydantic import ValidationError

from profiler.errors import StoreError
from profiler.interference import RunRecord
from profiler.store import ProfileStore, cosched_home

CALIB_SCHEMA_VERSION = 1
CALIB_FILENAME = "calibration.sqlite"

Source = Literal["calibrate", "heldout", "run"]

_SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS runs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    node_key    TEXT NOT NULL,
    at          TEXT NOT NULL,
    source      TEXT NOT NULL,
    kind        TEXT NOT NULL,
    measured_s  REAL,
    predicted_s REAL,
    model       TEXT,
    document    TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_node ON runs (node_key, id);
"""


@dataclass(frozen=True)
class StoredRun:
    id: int
    node_key: str
    at: datetime
    source: Source
    record: RunRecord
    measured_s: float | None
    predicted_s: float | None
    model: str | None

    @property
    def abs_error_pct(self) -> float | None:
        if self.measured_s and self.predicted_s is not None:
            return abs(self.predicted_s - self.measured_s) / self.measured_s * 100.0
        return None


def default_calibration_path() -> Path:
    return cosched_home() / CALIB_FILENAME


def model_path(node_key: str) -> Path:
    """Where ``cosched calibrate`` keeps a node's model: ``$COSCHED_HOME/node-models/NODE.json``."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", node_key.removesuffix(".json").split("/")[-1]).strip("-") or "node"
    return cosched_home() / "node-models" / f"{slug}.json"


def group_makespans(rec: RunRecord) -> tuple[float | None, float | None]:
    """(measured, predicted) makespan of a run's timed programs (the generator's None excluded)."""
    measured = [t for t in rec.times_s if t is not None]
    m = max(measured) if measured else None
    p = None
    if rec.predicted_s is not None:
        pred = [t for t, mt in zip(rec.predicted_s, rec.times_s) if t is not None and mt is not None]
        p = max(pred) if pred else None
    return m, p


class CalibrationStore(ProfileStore):
    """add / list the measured runs of nodes."""

    def __init__(self, path: str | Path | None = None) -> None:
        super().__init__(path if path is not None else default_calibration_path())

    def add(self, node_key: str, records: Sequence[RunRecord], source: Source, model: str | None = None) -> int:
        rows = []
        for r in records:
            m, p = group_makespans(r)
            rows.append((node_key, r.at.isoformat(), source, r.kind, m, p, model, r.model_dump_json()))
        with self._write() as conn:
            conn.executemany("INSERT INTO runs (node_key, at, source, kind, measured_s, predicted_s, model, document) "
                             "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
        return len(rows)

    def runs(self, node_key: str, source: Source | None = None) -> list[StoredRun]:
        q = "SELECT id, node_key, at, source, measured_s, predicted_s, model, document FROM runs WHERE node_key = ?"
        args: tuple = (node_key,)
        if source is not None:
            q += " AND source = ?"
            args += (source,)
        with self._read() as conn:
            rows = conn.execute(q + " ORDER BY id", args).fetchall()
        out = []
        for i, key, at, src, m, p, model, doc in rows:
            try:
                rec = RunRecord.model_validate_json(doc)
            except ValidationError as exc:
                raise StoreError(f"the calibration store {self.path} holds an unreadable run (row {i}): "
                                 f"{exc.errors()[0]['msg']}") from None
            out.append(StoredRun(i, key, datetime.fromisoformat(at), src, rec, m, p, model))
        return out

    def count(self, node_key: str) -> int:
        with self._read() as conn:
            return conn.execute("SELECT count(*) FROM runs WHERE node_key = ?", (node_key,)).fetchone()[0]

    # -- the profile store's opening, with this store's schema --------------------------------------

    def _init_schema(self, conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > CALIB_SCHEMA_VERSION:
            raise StoreError(f"the calibration store {self.path} has schema version {version}, newer than this "
                             f"cosched's {CALIB_SCHEMA_VERSION}: upgrade cosched (the file is left untouched)")
        if version < CALIB_SCHEMA_VERSION:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("BEGIN IMMEDIATE")
            try:
                if conn.execute("PRAGMA user_version").fetchone()[0] < CALIB_SCHEMA_VERSION:
                    for stmt in _SCHEMA_V1.split(";"):
                        if stmt.strip():
                            conn.execute(stmt)
                    conn.execute(f"PRAGMA user_version = {CALIB_SCHEMA_VERSION}")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        self._check_readable(conn)

    def _check_readable(self, conn: sqlite3.Connection) -> None:
        conn.execute("SELECT count(*) FROM runs").fetchone()

    def _error(self, exc: sqlite3.Error) -> StoreError:
        err = super()._error(exc)
        return type(err)(str(err).replace("profile store", "calibration store"))
