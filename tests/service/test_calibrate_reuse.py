"""cosched calibrate finds what the node already measured: stored curves and the median `node --bench` repeat."""

from __future__ import annotations

import statistics

from env.interference import measure_interference
from env.nodebench import run_bench, save_bench
from env.sim.measuring import sim_measuring_backend
from env.sim.variants import variant_models
from profiler.store import ProfileStore, cosched_home
from service.commands.calibrate import _stored


def test_stored_curves_and_the_median_bench_repeat(tmp_path, monkeypatch):
    monkeypatch.setenv("COSCHED_HOME", str(tmp_path))
    b = sim_measuring_backend(variant_models()["variant-a"], noise_sd=0.05, seed=4)
    key = "node-under-test"
    assert _stored(key) == ({}, None)  # nothing measured: everything will be
    curves = measure_interference(b, "EP", seed=1).model_copy(update={"node_id": key})
    ProfileStore().put_interference(curves)
    report = run_bench(b, key, repeats=3)
    save_bench(report, cosched_home())
    profiles, bench = _stored(key)
    assert list(profiles) == ["EP"] and profiles["EP"].solo_s == curves.solo_s
    bws = [statistics.median(d.bandwidth_gbs for d in r.domains if d.local) for r in report.runs]
    assert len(set(bws)) == 3  # noisy repeats: the choice matters
    assert statistics.median(d.bandwidth_gbs for d in bench.domains if d.local) == sorted(bws)[1]
