"""A plan says in one line when the window's programs lie outside what the model was trained on, with the one
command that refreshes it; programs within that range say nothing."""

from __future__ import annotations

import copy
from datetime import datetime, timezone
from pathlib import Path

import pytest
from test_real_node_model import local_model, store_local, window

from agent.modelfile import load_set_model
from env.node.discover import local_node_id
from env.sim.nodes import load_node
from profiler.models import Profile
from profiler.store import ProfileStore
from service.planning import plan_window
from service.staleness import outside


@pytest.fixture(scope="module")
def fitted(calibrated_local: dict) -> dict:
    return copy.deepcopy(calibrated_local)


@pytest.fixture()
def model(fitted: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COSCHED_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COSCHED_MODELS_DIR", str(tmp_path / "none"))
    store_local(fitted)
    return local_model(tmp_path / "local.npz")


def profile(name: str, wall_s: float, busy_cpus: float = 1.0) -> Profile:
    return Profile(name=name, node_id=local_node_id(), command=[f"/bin/{name}"], wall_s=wall_s,
                   counters={"task-clock": wall_s * busy_cpus * 1000.0, "duration_time": wall_s * 1e9},
                   created_at=datetime.now(timezone.utc))


def test_a_program_far_out_of_range_gets_one_line_with_the_refresh_command(model: Path) -> None:
    ProfileStore().put(profile("blink", 0.002))  # a thousandth of the trained programs' durations
    local = load_node("local")
    plan = plan_window(window(("blink", "EP", "MG", "CG")), local, model=str(model))
    note = plan.stale_model
    assert note is not None and "\n" not in note and "blink" in note
    assert "`cosched train --node local --refresh`" in note and "log10_duration_s" in note
    ok = plan_window(window(("EP", "MG", "CG", "FT")), local, model=str(model))
    assert ok.stale_model is None


def test_the_trained_range_decides_when_the_model_keeps_it(model: Path) -> None:
    meta = load_set_model(model).meta
    from profiler.features import VALUE_FEATURES

    lo = [None] * len(VALUE_FEATURES)
    hi = [None] * len(VALUE_FEATURES)
    i = VALUE_FEATURES.index("log10_duration_s")
    lo[i], hi[i] = 0.0, 1.0  # trained on programs of 1-10 s
    meta = meta.model_copy(update={"training": {**meta.training,
                                                "feature_range": {"features": list(VALUE_FEATURES), "lo": lo, "hi": hi}}})
    assert outside(meta, profile("inside", 5.0)) is None
    assert outside(meta, profile("edge", 14.0)) is None  # within the margin (a quarter of the range)
    assert "log10_duration_s" in outside(meta, profile("long", 100.0))
    assert "log10_duration_s" in outside(meta, profile("short", 0.1))


def test_a_simulated_nodes_shipped_model_says_nothing_of_its_own_programs() -> None:
    # the shipped model keeps no range; its feature spread would flag catalogue programs with long-tailed features
    from env.plan.models import Window

    node = load_node("sim:reference")
    w = Window.model_validate({"jobs": [{"id": n, "profile": n} for n in ("raytrace", "cholesky", "EP", "MG")],
                               "max_concurrency": 2})
    assert plan_window(w, node, policy="agent").stale_model is None


def test_the_line_names_the_programs_in_name_order(model: Path) -> None:
    store = ProfileStore()
    store.put(profile("zz-blink", 0.002))
    store.put(profile("aa-blink", 0.003))
    plan = plan_window(window(("zz-blink", "aa-blink", "EP", "MG")), load_node("local"), model=str(model))
    assert plan.stale_model is not None and "like aa-blink (" in plan.stale_model and "and 1 more" in plan.stale_model
