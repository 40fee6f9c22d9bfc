"""The SQLite profile store: round trip, concurrent writers, crash safety, corrupt file, unwritable place."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Callable

import pytest

from profiler.errors import ProfileNotFoundError, ProfilerInputError, StoreError
from profiler.models import Profile
from profiler.store import STORE_SCHEMA_VERSION, ProfileStore, cosched_home, default_store_path
from profiler_helpers import REPO, env_with_home

MakeProfile = Callable[..., Profile]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_default_location(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert default_store_path() == home / "profiles.sqlite"
    monkeypatch.delenv("COSCHED_HOME")
    assert cosched_home() == Path.home() / ".local" / "share" / "cosched"


def test_put_get_list_delete(home: Path, make_profile: MakeProfile) -> None:
    store = ProfileStore()
    a = make_profile("recorded_kvm_sysbench_cpu_t1.csv", "a", "node-1")
    a2 = make_profile("handwritten_intel_full_counters.csv", "a", "node-2")
    b = make_profile("recorded_kvm_sysbench_cpu_t2.csv", "b", "node-1")
    for p in (a, a2, b):
        store.put(p)
    assert store.get("a", "node-1") == a
    assert store.get("a", "node-2") == a2  # keyed by (name, node)
    assert store.get("a", "node-3") is None
    assert [p.name for p in store.list("node-1")] == ["a", "b"]
    assert len(store.list()) == 3
    assert ProfileStore().get("b", "node-1") == b  # another opener sees it
    assert store.delete("a", "node-1") is True
    assert store.delete("a", "node-1") is False
    assert store.get("a", "node-2") == a2
    with pytest.raises(ProfileNotFoundError, match="node-2"):
        store.require("a", "node-1")


def test_replace_and_schema_version(home: Path, make_profile: MakeProfile) -> None:
    store = ProfileStore()
    store.put(make_profile("recorded_kvm_sysbench_cpu_t1.csv", "a", wall_s=1.0))
    store.put(make_profile("recorded_kvm_sysbench_cpu_t1.csv", "a", wall_s=2.0))
    assert store.get("a", "node-a").wall_s == 2.0
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == STORE_SCHEMA_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_refuses_a_failed_run(home: Path, make_profile: MakeProfile) -> None:
    store = ProfileStore()
    with pytest.raises(ProfilerInputError, match="failed run"):
        store.put(make_profile("recorded_kvm_exit7.csv", "bad", exit_status=7))
    assert store.list() == []


def test_newer_schema_is_refused_and_untouched(home: Path, make_profile: MakeProfile) -> None:
    store = ProfileStore()
    store.put(make_profile("recorded_kvm_sysbench_cpu_t1.csv", "a"))
    with sqlite3.connect(store.path) as conn:
        conn.execute(f"PRAGMA user_version = {STORE_SCHEMA_VERSION + 1}")
    before = digest(store.path)
    with pytest.raises(StoreError, match="newer"):
        ProfileStore()
    assert digest(store.path) == before


def test_corrupt_file_is_reported_and_left_untouched(home: Path) -> None:
    home.mkdir(parents=True)
    path = home / "profiles.sqlite"
    path.write_bytes(b"this is not an SQLite database, but someone's precious file\n" * 100)
    before = digest(path)
    with pytest.raises(StoreError, match="corrupt") as err:
        ProfileStore()
    assert "\n" not in str(err.value)
    assert digest(path) == before
    assert sorted(p.name for p in home.iterdir()) == ["profiles.sqlite"]


def test_damaged_pages_are_reported(home: Path, make_profile: MakeProfile) -> None:
    store = ProfileStore()
    for i in range(30):
        store.put(make_profile("handwritten_intel_full_counters.csv", f"p{i}"))
    with sqlite3.connect(store.path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(store.path.read_bytes())
    page = 4096
    data[page : len(data)] = b"\xde\xad\xbe\xef" * ((len(data) - page) // 4)  # every page after the first
    store.path.write_bytes(bytes(data))
    before = digest(store.path)
    with pytest.raises(StoreError, match="corrupt"):
        ProfileStore().list()
    assert digest(store.path) == before


def test_unwritable_location(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("COSCHED_HOME", str(blocker / "home"))
    with pytest.raises(StoreError, match="cannot create") as err:
        ProfileStore()
    assert "\n" not in str(err.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through permission bits")
def test_read_only_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    monkeypatch.setenv("COSCHED_HOME", str(ro))
    try:
        with pytest.raises(StoreError):
            ProfileStore()
    finally:
        ro.chmod(0o700)


_WRITER = textwrap.dedent(
    """
    import sys
    from profiler.models import Profile
    from profiler.store import ProfileStore
    who, n = sys.argv[1], int(sys.argv[2])
    store = ProfileStore()
    for i in range(n):
        store.put(Profile(name=f"{who}-{i}", node_id="node-c", command=["x"], counters={"task-clock": float(i)}, wall_s=1.0))
    """
)


def test_two_writer_processes_all_land(home: Path) -> None:
    ProfileStore()  # both writers open an existing store and also race on creation below
    env = env_with_home(home)
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, who, "60"], env=env, cwd=REPO, stderr=subprocess.PIPE)
        for who in ("w1", "w2")
    ]
    for p in procs:
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err.decode()
    names = {p.name for p in ProfileStore().list("node-c")}
    assert names == {f"{w}-{i}" for w in ("w1", "w2") for i in range(60)}


def test_two_writers_creating_the_store_at_once(home: Path) -> None:
    env = env_with_home(home)
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, who, "5"], env=env, cwd=REPO, stderr=subprocess.PIPE)
        for who in ("c1", "c2", "c3")
    ]
    for p in procs:
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err.decode()
    assert len(ProfileStore().list("node-c")) == 15


_CRASHER = textwrap.dedent(
    """
    import os, signal
    import profiler.store as store_mod
    from profiler.models import Profile
    store = store_mod.ProfileStore()
    store_mod._after_write = lambda conn: os.kill(os.getpid(), signal.SIGKILL)  # die just before COMMIT
    store.put(Profile(name="a", node_id="node-k", command=["replaced"], counters={}, wall_s=9.0))
    """
)


def test_crash_mid_write_loses_nothing_stored(home: Path, make_profile: MakeProfile) -> None:
    store = ProfileStore()
    a = make_profile("recorded_kvm_sysbench_cpu_t1.csv", "a", "node-k")
    b = make_profile("recorded_kvm_sysbench_cpu_t2.csv", "b", "node-k")
    store.put(a)
    store.put(b)
    proc = subprocess.run([sys.executable, "-c", _CRASHER], env=env_with_home(home), cwd=REPO, timeout=60)
    assert proc.returncode == -9
    after = ProfileStore()
    assert after.get("a", "node-k") == a  # the half-written replacement rolled back
    assert after.get("b", "node-k") == b
    with sqlite3.connect(after.path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    after.put(make_profile("recorded_kvm_sysbench_cpu_t1.csv", "c", "node-k"))  # and it is writable again
    assert len(after.list("node-k")) == 3


def _open_after(path: str, barrier, results) -> None:  # a forked opener (module level: picklable target)
    barrier.wait()
    try:
        ProfileStore(Path(path))
        results.put("ok")
    except StoreError as exc:
        results.put(str(exc))


def test_concurrent_first_openers_of_a_new_store_all_succeed(tmp_path: Path) -> None:
    """Three processes opening a store that does not exist yet, released at once, 20 times: every one opens it
    (creating it switches the file to WAL, where SQLite reports 'locked' at once rather than waiting; before the
    retry most trials had a failed opener)."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    for trial in range(20):
        path = tmp_path / f"s{trial}" / "profiles.sqlite"
        barrier, results = ctx.Barrier(3), ctx.Queue()
        procs = [ctx.Process(target=_open_after, args=(str(path), barrier, results)) for _ in range(3)]
        for p in procs:
            p.start()
        got = [results.get(timeout=60) for _ in procs]
        for p in procs:
            p.join()
        assert got == ["ok"] * 3, got
        assert ProfileStore(path).list() == []
