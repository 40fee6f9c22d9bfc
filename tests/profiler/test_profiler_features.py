"""Features: deterministic, missing counters explicit, the JSON pipeline round trip, feature-set refusal."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from profiler.errors import ProfilerInputError
from profiler.events import PERF_EVENTS
from profiler.features import (
    CLIP,
    FEATURE_NAMES,
    FEATURE_SET_ID,
    MASK_FEATURES,
    N_FEATURES,
    VALUE_FEATURES,
    FeaturePipeline,
    check_feature_set,
    job_figures,
    raw_features,
)
from profiler.models import Profile

MakeProfile = Callable[..., Profile]


@pytest.fixture
def profiles(make_profile: MakeProfile) -> list[Profile]:
    return [
        make_profile("handwritten_intel_full_counters.csv", "mg", peak_rss_kb=2_000_000, scale_factor=20.0, one_core_s=200.0),
        make_profile("handwritten_intel_full_counters_per_thread.csv", "ep", peak_rss_kb=50_000, scale_factor=1.9, one_core_s=9.5),
        make_profile("handwritten_intel_full_counters_de_DE.csv", "ft", peak_rss_kb=900_000),
        make_profile("recorded_kvm_sysbench_cpu_t1.csv", "sb1", peak_rss_kb=30_000, scale_factor=1.0, one_core_s=1.0),
        make_profile("recorded_kvm_sysbench_cpu_t2.csv", "sb2", peak_rss_kb=30_000, scale_factor=1.8, one_core_s=1.8),
    ]


def test_names_and_sizes() -> None:
    assert len(FEATURE_NAMES) == N_FEATURES == len(VALUE_FEATURES) + len(MASK_FEATURES)
    assert len(set(FEATURE_NAMES)) == N_FEATURES
    assert all(m.startswith("has_") for m in MASK_FEATURES)
    assert FEATURE_SET_ID.startswith("features-v")


def test_raw_features_formulas(make_profile: MakeProfile) -> None:
    p = make_profile("handwritten_intel_full_counters.csv", peak_rss_kb=1024 * 99, scale_factor=20.0, one_core_s=204.0)
    raw = dict(zip(VALUE_FEATURES, raw_features(p)))
    d = 10.23456789
    assert raw["log10_duration_s"] == pytest.approx(math.log10(d))
    assert raw["scale_factor"] == 20.0
    assert raw["cpus_utilized"] == pytest.approx(235.81245 / d)
    assert raw["ipc"] == pytest.approx(915617893826 / 704321456789)
    assert raw["ghz"] == pytest.approx(704321456789 / 235.81245 / 1e9)
    assert raw["log10_llc_miss_pki"] == pytest.approx(math.log10(1 + 1000 * 4567890123 / 915617893826))
    assert raw["log10_llc_misses_per_s"] == pytest.approx(math.log10(1 + 4567890123 / d))
    assert raw["log10_peak_rss_mib"] == pytest.approx(2.0)


def test_missing_counters_are_nan_then_mean_filled_and_masked(profiles: list[Profile]) -> None:
    kvm = profiles[3]
    raw = dict(zip(VALUE_FEATURES, raw_features(kvm)))
    for name in ("ipc", "ghz", "log10_llc_miss_pki", "log10_l1d_miss_pki", "log10_itlb_miss_pki"):
        assert math.isnan(raw[name])
    assert not math.isnan(raw["cpus_utilized"])
    pipe = FeaturePipeline.fit(profiles)
    vec = dict(zip(FEATURE_NAMES, pipe.transform_one(kvm)))
    assert vec["has_ipc"] == 0.0
    assert vec["has_log10_llc_miss_pki"] == 0.0 and vec["has_log10_llc_misses_per_s"] == 0.0
    assert vec["has_cpus_utilized"] == 1.0
    # filled with the training mean: exactly 0 after scaling ("typical", the mask says "unknown")
    assert vec["ipc"] == 0.0 and vec["log10_llc_miss_pki"] == 0.0
    full = dict(zip(FEATURE_NAMES, pipe.transform_one(profiles[0])))
    assert all(full[m] == 1.0 for m in MASK_FEATURES)


def test_no_profile_has_a_counter_fills_zero(make_profile: MakeProfile) -> None:
    kvm_only = [make_profile("recorded_kvm_sysbench_cpu_t1.csv", "a"), make_profile("recorded_kvm_sysbench_cpu_t2.csv", "b")]
    pipe = FeaturePipeline.fit(kvm_only)
    out = pipe.transform(kvm_only)
    assert out.shape == (2, N_FEATURES)
    assert np.all(np.isfinite(out))
    assert out[:, FEATURE_NAMES.index("ipc")].tolist() == [0.0, 0.0]


def test_deterministic_and_clipped(profiles: list[Profile]) -> None:
    a = FeaturePipeline.fit(profiles).transform(profiles)
    b = FeaturePipeline.fit(list(profiles)).transform(profiles)
    assert a.dtype == np.float32 and a.shape == (len(profiles), N_FEATURES)
    assert np.array_equal(a, b)
    assert np.all(np.abs(a) <= CLIP)
    one = FeaturePipeline.fit(profiles[:1])  # a single profile: constant columns scale to 0, no NaN
    assert np.all(np.isfinite(one.transform(profiles)))
    extreme = FeaturePipeline.fit(profiles[3:]).transform(profiles[:1])
    assert np.all(np.abs(extreme) <= CLIP)


def test_save_load_round_trip_without_pickle(profiles: list[Profile], tmp_path: Path) -> None:
    pipe = FeaturePipeline.fit(profiles)
    path = tmp_path / "features.json"
    pipe.save(path)
    doc = json.loads(path.read_text())  # plain JSON: parameters, no code
    assert doc["feature_set"] == FEATURE_SET_ID and doc["feature_names"] == list(FEATURE_NAMES)
    loaded = FeaturePipeline.load(path)
    assert loaded == pipe
    assert np.array_equal(loaded.transform(profiles), pipe.transform(profiles))
    assert b"pickle" not in path.read_bytes()
    assert FeaturePipeline.from_dict(json.loads(json.dumps(pipe.to_dict()))) == pipe  # embedded in another document
    low, high = loaded.bounds()
    out = loaded.transform(profiles)
    assert low.shape == high.shape == (N_FEATURES,) and np.all(out >= low) and np.all(out <= high)


def test_refuses_another_feature_set(profiles: list[Profile], tmp_path: Path) -> None:
    doc = json.loads(FeaturePipeline.fit(profiles).to_json())
    doc["feature_set"] = "features-v0-000000000000"
    with pytest.raises(ProfilerInputError, match="feature set"):
        FeaturePipeline.from_json(json.dumps(doc))
    with pytest.raises(ProfilerInputError, match="feature set"):
        check_feature_set("features-v0-000000000000")
    check_feature_set(FEATURE_SET_ID)


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d.update(mean=d["mean"][:-1]),
        lambda d: d.update(scale=[0.0] * len(d["scale"])),
        lambda d: d.update(feature_names=d["feature_names"][::-1]),
        lambda d: d.pop("impute_values"),
    ],
)
def test_refuses_broken_documents(profiles: list[Profile], edit: Callable[[dict], object]) -> None:
    doc = json.loads(FeaturePipeline.fit(profiles).to_json())
    edit(doc)
    with pytest.raises(ProfilerInputError):
        FeaturePipeline.from_json(json.dumps(doc))
    with pytest.raises(ProfilerInputError):
        FeaturePipeline.from_json("not json")


def test_job_figures(profiles: list[Profile]) -> None:
    mg = job_figures(profiles[0])
    assert mg.solo_s == pytest.approx(10.23456789)
    assert mg.scale_factor == 20.0
    assert mg.l3_misses_per_s == pytest.approx(4567890123 / 10.23456789)
    kvm = job_figures(profiles[3])
    assert kvm.l3_misses_per_s is None and kvm.scale_factor == 1.0
    ft = job_figures(profiles[2])
    assert ft.scale_factor is None


def test_every_counter_missing_still_works() -> None:
    p = Profile(name="bare", node_id="n", command=["x"], counters={}, wall_s=2.0)
    raw = raw_features(p)
    assert raw[0] == pytest.approx(math.log10(2.0))
    assert np.isnan(raw[1:]).all()
    assert set(PERF_EVENTS) == set(p.counters)


def test_transform_equals_the_fitted_sklearn_pipeline(profiles: list[Profile]) -> None:
    """transform is numpy over the saved parameters: it must give what scikit-learn's fitted objects give."""
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from profiler.features import raw_matrix

    raw = raw_matrix(profiles)
    reference = make_pipeline(SimpleImputer(strategy="mean", keep_empty_features=True), StandardScaler()).fit(raw)
    expected = np.clip(reference.transform(raw), -CLIP, CLIP)
    got = FeaturePipeline.fit(profiles).transform(profiles)[:, : len(VALUE_FEATURES)]
    np.testing.assert_allclose(got, expected.astype(np.float32), rtol=1e-6, atol=1e-6)
