"""The profile store: SQLite at ``$COSCHED_HOME/profiles.sqlite`` (default ``~/.local/share/cosched``).

* One row per (profile name, node id); the row holds the Profile's JSON (the one schema) plus the key.
  Beside it (schema version 2), the job's interference curves (``profiler.interference.InterferenceProfile``:
  sensitivity to the pressure generator, pressure on the probe), one row per (name, node id) too; a version-1
  file gains the empty table when first opened, its profiles untouched.
* Schema versioned with ``PRAGMA user_version``; ``_MIGRATIONS[v]`` upgrades a file from version v to v+1,
  in the same transaction. A file of a newer version than this code is refused, never touched.
* Safe with several writers: WAL journal, a busy timeout, and every write one ``BEGIN IMMEDIATE`` transaction;
  a crash mid-write rolls back to what was committed (SQLite's journal), so nothing stored is lost.
* A corrupt file (not a database, damaged) is reported and left exactly as it is: never overwritten or deleted.
* One connection per operation: safe across threads and processes.
"""

from __future__ import annotations

import os
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from pydantic import ValidationError

from profiler.errors import ProfileNotFoundError, ProfilerInputError, StoreError, StoreLockedError
from profiler.interference import InterferenceProfile
from profiler.models import Profile, check_profile_name

STORE_SCHEMA_VERSION = 2
STORE_FILENAME = "profiles.sqlite"
BUSY_TIMEOUT_MS = 30_000

_SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS profiles (
    name       TEXT NOT NULL,
    node_id    TEXT NOT NULL,
    created_at TEXT NOT NULL,
    document   TEXT NOT NULL,
    PRIMARY KEY (name, node_id)
)
"""

_SCHEMA_V2 = """
CREATE TABLE IF NOT EXISTS interference (
    name       TEXT NOT NULL,
    node_id    TEXT NOT NULL,
    created_at TEXT NOT NULL,
    document   TEXT NOT NULL,
    PRIMARY KEY (name, node_id)
)
"""

#: from-version -> step to from-version + 1 (run inside the opening transaction).
_MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    0: lambda conn: conn.execute(_SCHEMA_V1),
    1: lambda conn: conn.execute(_SCHEMA_V2),
}


def cosched_home() -> Path:
    """``$COSCHED_HOME``, default ``~/.local/share/cosched``."""
    home = os.environ.get("COSCHED_HOME")
    return Path(home).expanduser() if home else Path.home() / ".local" / "share" / "cosched"


def default_store_path() -> Path:
    return cosched_home() / STORE_FILENAME


def _after_write(conn: sqlite3.Connection) -> None:
    """Test seam: called inside a write transaction, just before COMMIT (crash-safety tests kill here)."""


class ProfileStore:
    """put / get / list / delete profiles, keyed by (name, node_id)."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_store_path()
        self._open()

    # -- public API -------------------------------------------------------------------------------

    def put(self, profile: Profile) -> None:
        """Store (or replace) the profile of (profile.name, profile.node_id). Refuses a failed run."""
        if profile.exit_status != 0:
            raise ProfilerInputError(
                f"profile {profile.name!r} is of a failed run (exit status {profile.exit_status}): not stored"
            )
        document = profile.model_dump_json()
        with self._write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO profiles (name, node_id, created_at, document) VALUES (?, ?, ?, ?)",
                (profile.name, profile.node_id, profile.created_at.isoformat(), document),
            )
            _after_write(conn)

    def get(self, name: str, node_id: str) -> Profile | None:
        with self._read() as conn:
            row = conn.execute(
                "SELECT document FROM profiles WHERE name = ? AND node_id = ?", (name, node_id)
            ).fetchone()
        return self._load(row[0]) if row else None

    def require(self, name: str, node_id: str) -> Profile:
        """Like get, but a missing profile is ProfileNotFoundError (bad input, exit 2 / HTTP 404)."""
        check_profile_name(name)
        profile = self.get(name, node_id)
        if profile is None:
            with self._read() as conn:
                others = [r[0] for r in conn.execute("SELECT node_id FROM profiles WHERE name = ? ORDER BY node_id", (name,))]
            hint = f" (it exists for node(s) {', '.join(others)}: --node-id)" if others else ""
            raise ProfileNotFoundError(f"no profile named {name!r} for node {node_id!r} in {self.path}{hint}")
        return profile

    def list(self, node_id: str | None = None) -> list[Profile]:
        """All profiles (of one node when node_id is given), ordered by node id then name."""
        with self._read() as conn:
            if node_id is None:
                rows = conn.execute("SELECT document FROM profiles ORDER BY node_id, name").fetchall()
            else:
                rows = conn.execute(
                    "SELECT document FROM profiles WHERE node_id = ? ORDER BY name", (node_id,)
                ).fetchall()
        return [self._load(r[0]) for r in rows]

    def delete(self, name: str, node_id: str) -> bool:
        """Remove one profile and its interference curves; False when there was no profile."""
        with self._write() as conn:
            cur = conn.execute("DELETE FROM profiles WHERE name = ? AND node_id = ?", (name, node_id))
            conn.execute("DELETE FROM interference WHERE name = ? AND node_id = ?", (name, node_id))
            _after_write(conn)
            return cur.rowcount > 0

    def put_interference(self, curves: InterferenceProfile) -> None:
        """Store (or replace) a job's interference curves, beside its solo profile."""
        check_profile_name(curves.name)
        with self._write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO interference (name, node_id, created_at, document) VALUES (?, ?, ?, ?)",
                (curves.name, curves.node_id, curves.created_at.isoformat(), curves.model_dump_json()),
            )
            _after_write(conn)

    def list_interference(self, node_id: str) -> dict[str, InterferenceProfile]:
        """Every stored job's curves on a node, by name (what a calibration can reuse instead of re-measuring)."""
        with self._read() as conn:
            names = [r[0] for r in conn.execute("SELECT name FROM interference WHERE node_id = ? ORDER BY name", (node_id,))]
        return {n: c for n in names if (c := self.get_interference(n, node_id)) is not None}

    def delete_interference(self, name: str, node_id: str) -> bool:
        """Remove a job's curves (its solo profile was re-measured without them: they may be stale)."""
        with self._write() as conn:
            cur = conn.execute("DELETE FROM interference WHERE name = ? AND node_id = ?", (name, node_id))
            _after_write(conn)
            return cur.rowcount > 0

    def get_interference(self, name: str, node_id: str) -> InterferenceProfile | None:
        with self._read() as conn:
            row = conn.execute("SELECT document FROM interference WHERE name = ? AND node_id = ?", (name, node_id)).fetchone()
        if row is None:
            return None
        try:
            return InterferenceProfile.model_validate_json(row[0])
        except ValidationError as exc:
            raise StoreError(f"the profile store {self.path} holds unreadable interference curves of {name!r}: {exc.errors()[0]['msg']}") from None

    # -- opening, transactions, errors ------------------------------------------------------------

    def _open(self) -> None:
        directory = self.path.parent
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the profile store directory {directory}: {exc.strerror or exc}") from None
        if self.path.exists() and not os.access(self.path, os.R_OK | os.W_OK):
            raise StoreError(f"the profile store {self.path} is not readable and writable by this user")
        if not self.path.exists() and not os.access(directory, os.W_OK | os.X_OK):
            raise StoreError(f"cannot create the profile store in {directory}: permission denied")
        # Openers of a new store race to create it: switching to WAL takes an exclusive lock, and SQLite answers
        # "locked" at once there instead of waiting out the busy timeout (measured: 58 of 80 trios of concurrent
        # first openers failed). So a locked opening is retried until the busy timeout has passed.
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                with self._connect() as conn:
                    self._init_schema(conn)
                return
            except StoreLockedError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.02)

    def _init_schema(self, conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == STORE_SCHEMA_VERSION:
            self._check_readable(conn)
            return
        if version > STORE_SCHEMA_VERSION:
            raise StoreError(
                f"the profile store {self.path} has schema version {version}, newer than this cosched's "
                f"{STORE_SCHEMA_VERSION}: upgrade cosched (the file is left untouched)"
            )
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]  # another opener may have won
            while version < STORE_SCHEMA_VERSION:
                _MIGRATIONS[version](conn)
                version += 1
            conn.execute(f"PRAGMA user_version = {STORE_SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        self._check_readable(conn)

    def _check_readable(self, conn: sqlite3.Connection) -> None:
        conn.execute("SELECT count(*) FROM profiles").fetchone()
        conn.execute("SELECT count(*) FROM interference").fetchone()

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        try:
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        except sqlite3.Error as exc:
            raise self._error(exc) from None
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            yield conn
        except sqlite3.DatabaseError as exc:
            raise self._error(exc) from None
        finally:
            conn.close()

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._connect() as conn:
            yield conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._connect() as conn:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.DatabaseError as exc:
                raise self._error(exc) from None
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _load(self, document: str) -> Profile:
        try:
            return Profile.model_validate_json(document)
        except ValidationError as exc:
            raise StoreError(f"the profile store {self.path} holds an unreadable profile: {exc.errors()[0]['msg']}") from None

    def _error(self, exc: sqlite3.Error) -> StoreError:
        text = str(exc)
        if isinstance(exc, sqlite3.DatabaseError) and (
            "not a database" in text or "malformed" in text or "corrupt" in text
        ):
            return StoreError(
                f"the profile store {self.path} is corrupt ({text}); it was left untouched: "
                "move it aside to start a new store"
            )
        if "readonly" in text or "unable to open" in text or "read-only" in text:
            return StoreError(f"the profile store {self.path} cannot be written: {text}")
        if "locked" in text or "busy" in text:
            return StoreLockedError(f"the profile store {self.path} stayed locked by another writer: {text}")
        return StoreError(f"the profile store {self.path} failed: {text}")
