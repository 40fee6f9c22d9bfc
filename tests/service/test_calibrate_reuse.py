"""cosched calibrate finds what the node already measured: stored curves and the median `node --bench` repeat."""

from __future__ import annotations

import statistics

from env.measure.interference import measure_interference
from env.measure.nodebench import run_bench, save_bench
from env.sim.measuring import sim_measuring_backend
from env.sim.variants import variant_models
from profiler.store import ProfileStore, cosched_home
from env.real.profiling import stored_measurements as _stored


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


def test_a_fit_that_does_not_fit_is_one_line_writes_no_model_keeps_the_data(tmp_path, monkeypatch, capsys):
    import env.calibration.calibrate as cal
    from env.calibration.store import CalibrationStore
    from service.cli import main

    monkeypatch.setenv("COSCHED_HOME", str(tmp_path))
    real = cal.calibrate

    def failing(*a, **kw):
        r = real(*a, **kw)
        r.fit_problem = "after 1 evaluations the model still misses the measured times by a factor 54.6 typical"
        return r

    monkeypatch.setattr(cal, "calibrate", failing)
    argv = ["calibrate", "--backend", "sim", "--node", "sim:variant-a", "--jobs", "EP,MG", "--probes", "2", "--heldout", "2"]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len([line for line in err if "did not fit" in line]) == 1 and "factor 54.6" in err[-1] and "Traceback" not in "".join(err)
    assert not (tmp_path / "node-models" / "sim-variant-a.json").exists()
    assert CalibrationStore().count("sim:variant-a") > 10  # the measurements are kept
