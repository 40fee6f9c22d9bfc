"""The Profile document: names, counters (missing never zero), direct construction (simulated node)."""

from __future__ import annotations

from typing import Callable

import pytest
from pydantic import ValidationError

from profiler.errors import ProfilerInputError
from profiler.events import PERF_EVENTS
from profiler.models import Profile, check_profile_name


def full_counters() -> dict[str, float]:
    return {e: 1000.0 * (i + 1) for i, e in enumerate(PERF_EVENTS)}


def test_simulated_profile_is_constructible_directly() -> None:
    p = Profile(
        name="MG", node_id="sim:reference", command=["./mg.B.x"], counters=full_counters(), wall_s=41.0,
        scale_factor=18.0, one_core_s=738.0, simulated=True,
    )
    assert p.available_counters == list(PERF_EVENTS)
    assert p.missing_counters == []
    assert Profile.model_validate_json(p.model_dump_json()) == p


def test_absent_counters_are_missing_not_zero() -> None:
    p = Profile(name="a", node_id="n", command=["x"], counters={"task-clock": 5.0}, wall_s=1.0)
    assert list(p.counters) == list(PERF_EVENTS)
    assert p.counters["cpu-cycles"] is None
    assert p.available_counters == ["task-clock"]
    assert p.duration_s == 1.0  # no duration_time: the wall time


@pytest.mark.parametrize("name", ["sysbench1", "MG", "a.b_c:d-e", "x" * 128])
def test_good_names(name: str) -> None:
    assert check_profile_name(name) == name
    Profile(name=name, node_id="n", command=["x"], counters={}, wall_s=1.0)


@pytest.mark.parametrize("name", ["", "bad name", "a/b", "x" * 129, "é", "a;b", "../etc"])
def test_bad_names(name: str) -> None:
    with pytest.raises(ProfilerInputError):
        check_profile_name(name)
    with pytest.raises(ValidationError):
        Profile(name=name, node_id="n", command=["x"], counters={}, wall_s=1.0)


@pytest.mark.parametrize(
    "change",
    [
        {"counters": {"bogus-event": 1.0}},
        {"counters": {"task-clock": -1.0}},
        {"counters": {"task-clock": float("nan")}},
        {"wall_s": 0.0},
        {"command": []},
        {"scale_factor": 2.0},  # without one_core_s
        {"available_counters": ["cpu-cycles"]},  # disagrees with the counters
        {"schema_version": 99},
    ],
)
def test_invalid_documents_are_refused(change: dict[str, object]) -> None:
    fields: dict[str, object] = {"name": "a", "node_id": "n", "command": ["x"], "counters": {"task-clock": 1.0}, "wall_s": 1.0}
    fields.update(change)
    with pytest.raises(ValidationError):
        Profile(**fields)  # type: ignore[arg-type]


def test_fixture_profiles(make_profile: Callable[..., Profile]) -> None:
    kvm = make_profile("recorded_kvm_sysbench_cpu_t1.csv")
    assert set(kvm.available_counters) == {"duration_time", "task-clock", "context-switches", "page-faults"}
    intel = make_profile("handwritten_intel_full_counters.csv")
    assert intel.missing_counters == []
    assert intel.duration_s == pytest.approx(10.23456789)
