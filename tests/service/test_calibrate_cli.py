"""cosched calibrate through the command line: the fit report, --json, --update after new runs, bad input."""

from __future__ import annotations

import json

import pytest

from env.calibration.store import CalibrationStore
from env.errors import RunError
from env.measure.interference import to_record
from env.measure.probing import Placement
from env.sim.measuring import sim_measuring_backend
from env.sim.variants import variant_models
from service.cli import main

TINY = ["--backend", "sim", "--node", "sim:variant-a", "--jobs", "EP,MG", "--probes", "2", "--heldout", "3",
        "--noise", "0.03"]


@pytest.fixture()
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("COSCHED_HOME", str(tmp_path))
    return tmp_path


def _calibrate(capsys, *extra):
    assert main(["calibrate", *TINY, "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_calibrate_writes_the_model_the_picture_and_the_data(home, capsys):
    doc = _calibrate(capsys)
    assert set(doc["heldout"]) == {"median_abs_error_pct", "p90_abs_error_pct", "n", "disjoint_from_probes"}
    assert doc["heldout"]["n"] == 3 and doc["noise_floor"]["n"] == 2  # both probes repeated (--repeats 8)
    assert doc["node_seconds"] > 0 and doc["probes"] == 2 and doc["simulated"] is True
    out = home / "node-models" / "sim-variant-a.json"
    assert doc["out"] == str(out) and out.exists() and out.with_suffix(".png").exists()
    store = CalibrationStore()
    assert len(store.runs("sim:variant-a", "heldout")) == 3 and store.count("sim:variant-a") > 20
    # the file is a node other commands accept
    assert main(["jobs", "--node", f"sim:{out}", "--json"]) == 0
    assert [j["name"] for j in json.loads(capsys.readouterr().out)["jobs"]] == ["EP", "MG"]


def test_update_changes_the_fit_after_new_runs(home, capsys):
    _calibrate(capsys)
    out = home / "node-models" / "sim-variant-a.json"
    before = json.loads(out.read_text())
    truth = sim_measuring_backend(variant_models()["variant-a"], noise_sd=0.0, seed=9)
    runs = []
    for k, split in enumerate((6, 12, 18)):
        g = [Placement("MG", tuple(range(split))), Placement("EP", tuple(range(split, 24)))]
        runs.append(to_record("corun", g, truth.measure(g, seed=k), simulated=True))
    from env.calibration.calibrate import predict_times
    from env.sim.nodemodel import NodeModel

    for rec, pred in zip(runs, predict_times(NodeModel.model_validate_json(out.read_text()), runs)):
        rec.predicted_s = pred  # what the run hook stores: the model's prediction beside the measurement
    CalibrationStore().add("sim:variant-a", runs, "run", str(out))
    assert main(["calibrate", "--backend", "sim", "--node", "sim:variant-a", "--update", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    after = json.loads(out.read_text())
    assert doc["updates"] == 1 and after["provenance"]["updates"] == 1
    assert doc["update"]["checked_groups"] == 6  # 3 held-out + 3 new runs
    assert after["jobs"] != before["jobs"]
    assert main(["calibrate", "--backend", "sim", "--node", "sim:variant-a", "--report", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert {b["source"] for b in rep["over_time"]} == {"heldout", "run"} and len(rep["worst"]) == 5


@pytest.mark.parametrize("argv, says", [
    (["--backend", "sim", "--probes", "0"], "--probes must be at least 1"),
    (["--backend", "real"], "has no jobs to calibrate on: profile some first"),  # the real backend (env.real.probes) is here
    (["--backend", "sim", "--node", "sim:/nonexistent/x.json"], "unknown simulated node"),
    (["--backend", "sim", "--jobs", "nosuch,EP"], "unknown job"),
    (["--backend", "sim", "--update"], "no node model at"),
    (["--backend", "sim", "--out", "/proc/no/model.json"], "cannot write the node model to /proc/no/model.json"),
])
def test_bad_input_is_one_line_and_stores_nothing(home, capsys, argv, says):
    assert main(["calibrate", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and "\n" not in err and "Traceback" not in err
    assert not list(home.glob("node-models/*"))  # no model file (the directory may have been checked writable)
    assert CalibrationStore().count("sim:reference") == 0


def test_a_failing_probe_leaves_the_stored_data_intact(home, capsys, monkeypatch):
    _calibrate(capsys)
    out = home / "node-models" / "sim-variant-a.json"
    text, n = out.read_text(), CalibrationStore().count("sim:variant-a")
    import service.commands.calibrate as cmd

    real = cmd._backend

    def failing(args):
        b, key = real(args)
        calls = [0]

        class Failing:
            simulated = True
            shape, jobs = b.shape, b.jobs

            def measure(self, group, *, seed=None):
                calls[0] += 1
                if calls[0] > 30:
                    raise RunError("probe cosched:probe exited with status 1")
                return b.measure(group, seed=seed)

        return Failing(), key

    monkeypatch.setattr(cmd, "_backend", failing)
    assert main(["calibrate", *TINY]) == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]  # after the progress lines, one error line
    assert last == "cosched calibrate: error: probe cosched:probe exited with status 1"
    assert out.read_text() == text and CalibrationStore().count("sim:variant-a") == n
