"""The sim:reference catalogue and its simulated profiles: consistent with the model and with each job's character."""

from __future__ import annotations

import numpy as np
import pytest

from env.episode.jobinfo import sim_provider
from env.sim.catalogue import ALL_JOBS, BY_NAME, HELD_OUT_JOBS, TRAIN_JOBS, catalogue
from env.sim.profiles import simulated_profiles
from profiler.events import PERF_EVENTS
from profiler.features import N_FEATURES


def test_the_papers_19_programs_and_split():
    assert len(ALL_JOBS) == 19 and len(TRAIN_JOBS) == 12 and len(HELD_OUT_JOBS) == 7
    assert set(TRAIN_JOBS) | set(HELD_OUT_JOBS) == set(ALL_JOBS) and not set(TRAIN_JOBS) & set(HELD_OUT_JOBS)
    assert set(HELD_OUT_JOBS) == {"barnes", "cholesky", "raytrace", "water_nsquared", "BT", "DC", "IS"}
    for e in BY_NAME.values():
        assert e.why and e.character and 0 < e.params.parallel < 1


def test_profiles_carry_all_twelve_counters_consistent_with_the_model(ref_node):
    cat = catalogue(ref_node)
    profs = simulated_profiles(ref_node)
    for name, p in profs.items():
        assert p.simulated and list(p.counters) == list(PERF_EVENTS) and not p.missing_counters
        assert p.duration_s == pytest.approx(cat[name].solo_s)
        assert p.scale_factor == pytest.approx(cat[name].scale_factor)
        assert p.counters["instructions"] < p.counters["cpu-cycles"] * 4
        assert p.counters["L1-dcache-load-misses"] > p.counters["LLC-load-misses"]
    # character: memory-bound jobs miss the LLC far more per second and retire fewer instructions per cycle
    rate = {n: p.counters["LLC-load-misses"] / p.duration_s for n, p in profs.items()}
    ipc = {n: p.counters["instructions"] / p.counters["cpu-cycles"] for n, p in profs.items()}
    assert rate["MG"] > 100 * rate["EP"] and ipc["MG"] < ipc["EP"]
    assert profs["DC"].counters["context-switches"] > 5 * profs["EP"].counters["context-switches"]
    assert profs["CG"].counters["dTLB-load-misses"] / profs["CG"].counters["instructions"] > \
        profs["MG"].counters["dTLB-load-misses"] / profs["MG"].counters["instructions"]


def test_simulated_profiles_are_reproducible(ref_node):
    assert simulated_profiles(ref_node) == simulated_profiles(ref_node)


def test_provider_features(ref_node):
    prov = sim_provider(ref_node)
    assert prov.n_features == N_FEATURES
    for name in ALL_JOBS:
        info = prov.get(name)
        assert info is not None and info.features.shape == (N_FEATURES,) and info.features.dtype == np.float32
        assert np.isfinite(info.features).all() and np.abs(info.features).max() <= 5
    assert prov.get("no-such-job") is None
    assert "will run alone and be profiled" in prov.missing_reason("no-such-job")
    # fitted on the training jobs: their scaled features have mean ~0
    train = np.stack([prov.get(n).features for n in TRAIN_JOBS])[:, :15]
    assert np.abs(train.mean(axis=0)).max() < 0.5
