"""cosched train --node local: trains in this node's calibrated model with jobs drawn around its own."""

from __future__ import annotations

import json
import shutil

import pytest

from env.calibration.store import model_path
from env.node.discover import local_node_id
from service.cli import main

TINY = ["--backend", "sim", "--node", "sim:variant-a", "--jobs", "EP,MG", "--probes", "2", "--heldout", "2"]


@pytest.fixture()
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("COSCHED_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_without_a_node_model_it_is_one_line_naming_calibrate(home, capsys):
    assert main(["train", "--node", "local", "--steps", "10"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "cosched calibrate" in err and local_node_id() in err
    assert not (home / "runs").exists()  # nothing started


def test_trains_in_the_calibrated_model_and_names_it(home, capsys):
    assert main(["calibrate", *TINY, "--json"]) == 0
    calibrated = json.loads(capsys.readouterr().out)["out"]
    # this node's model file: a calibrated model (here of a simulated node, standing in for this node's)
    local = model_path(local_node_id())
    shutil.copy(calibrated, local)
    out = home / "m.npz"
    assert main(["train", "--node", "local", "--steps", "30", "--windows", "2,2", "--cmaxes", "2", "--eval-per-cell", "1",
                 "--eval-every", "30", "--learning-starts", "10", "--synthetic-jobs", "4", "--quiet", "--out", str(out),
                 "--group-groups", "100", "--group-epochs", "2"]) == 0
    from agent.modelfile import load_set_model

    meta = load_set_model(out).meta
    derived = meta.training["args"]["node"].removeprefix("sim:")
    doc = json.loads(open(derived).read())
    assert str(local.resolve()) in doc["provenance"]["description"]  # the model file leads to the calibrated model
    names = [j["params"]["name"] for j in doc["jobs"]]
    assert names[:2] == ["EP", "MG"] and len(names) == 6 and all(":g" in n for n in names[2:])
    assert set(meta.training["jobs"]) >= {"EP", "MG"} and any(":g" in j for j in meta.training["jobs"])
    generated = [j for j in doc["jobs"] if ":g" in j["params"]["name"]]
    assert all(j["profile"]["simulated"] and j["profile"]["wall_s"] > 0 for j in generated)
    # drawn around, not copied: sizes differ from their base job's
    base = {j["params"]["name"]: j["params"]["work_s"] for j in doc["jobs"][:2]}
    assert all(j["params"]["work_s"] != base[j["params"]["name"].split(":g")[0]] for j in generated)
