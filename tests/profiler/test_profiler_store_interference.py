"""Interference curves in the profile store (schema version 2): stored beside the solo profile, deleted with it,
and a version-1 store (solo profiles only) is migrated on opening with its profiles intact."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Callable

import pytest

from profiler.errors import StoreError
from profiler.interference import CurvePoint, InterferenceProfile, PlacementRecord, RunRecord
from profiler.models import Profile
from profiler.store import STORE_SCHEMA_VERSION, ProfileStore

MakeProfile = Callable[..., Profile]


def curves(name: str = "a", node: str = "node-a", pressure: float = 1.2) -> InterferenceProfile:
    run = RunRecord(kind="bubble", group=[PlacementRecord(job=name, cpus=[0]), PlacementRecord(job="cosched:bubble", cpus=[1], level=0.5)],
                    times_s=[1.3, None], node_seconds=1.3)
    return InterferenceProfile(name=name, node_id=node, simulated=False, solo_s=1.0, one_core_s=1.8, cpus=[0], partner_cpus=[1],
                               alone_s=1.1, sensitivity=[CurvePoint(x=0.5, slowdown=1.18), CurvePoint(x=1.0, slowdown=1.4)],
                               pressure=pressure, node_seconds=9.0, runs=[run])


def test_curves_beside_the_profile(home: Path, make_profile: MakeProfile) -> None:
    store = ProfileStore()
    store.put(make_profile("recorded_kvm_sysbench_cpu_t1.csv", "a"))
    assert store.get_interference("a", "node-a") is None
    c = curves()
    store.put_interference(c)
    assert ProfileStore().get_interference("a", "node-a") == c
    store.put_interference(curves(pressure=1.5))  # replaced
    assert store.get_interference("a", "node-a").pressure == 1.5
    assert store.get_interference("a", "node-b") is None
    store.put_interference(curves("b"))
    store.put_interference(curves("a", "node-b"))
    assert sorted(store.list_interference("node-a")) == ["a", "b"] and store.list_interference("node-c") == {}
    assert store.delete("a", "node-a") is True
    assert store.get_interference("a", "node-a") is None  # deleted with its profile
    assert store.delete_interference("b", "node-a") is True and store.list_interference("node-a") == {}


def test_version_1_store_is_migrated_and_its_profiles_kept(home: Path, make_profile: MakeProfile) -> None:
    home.mkdir(parents=True)
    path = home / "profiles.sqlite"
    p = make_profile("recorded_kvm_sysbench_cpu_t1.csv", "old")
    with sqlite3.connect(path) as conn:  # what cosched wrote before curves existed
        conn.execute("CREATE TABLE profiles (name TEXT NOT NULL, node_id TEXT NOT NULL, created_at TEXT NOT NULL, document TEXT NOT NULL, PRIMARY KEY (name, node_id))")
        conn.execute("INSERT INTO profiles VALUES (?, ?, ?, ?)", (p.name, p.node_id, p.created_at.isoformat(), p.model_dump_json()))
        conn.execute("PRAGMA user_version = 1")
    store = ProfileStore()
    assert store.get("old", "node-a") == p
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == STORE_SCHEMA_VERSION == 2
    store.put_interference(curves("old"))
    assert store.get_interference("old", "node-a").sensitivity[1].slowdown == 1.4


def test_unreadable_curves_are_one_error(home: Path) -> None:
    store = ProfileStore()
    with sqlite3.connect(store.path) as conn:
        conn.execute("INSERT INTO interference VALUES ('a', 'node-a', '2026-01-01', '{\"name\": \"a\"}')")
    with pytest.raises(StoreError, match="unreadable interference curves of 'a'"):
        store.get_interference("a", "node-a")
