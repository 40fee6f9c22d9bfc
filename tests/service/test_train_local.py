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


def _two_cpu_local_model(home, capsys):
    """This node's calibrated model, standing in for a 2-CPU node's whatever the machine: a calibrated model of a
    simulated node whose node is cut down to two CPUs, one NUMA domain and one L3."""
    assert main(["calibrate", *TINY, "--json"]) == 0
    doc = json.loads(open(json.loads(capsys.readouterr().out)["out"]).read())
    node = doc["node"]
    node["cpus"] = [0, 1]
    node["numa"] = [{**node["numa"][0], "cpus": [0, 1]}]
    node["l3"] = [{**node["l3"][0], "cpus": [0, 1]}]
    local = model_path(local_node_id())
    local.write_text(json.dumps(doc))
    return local


def test_defaults_on_a_two_cpu_node_bound_cmax_by_its_cpus_in_one_line(home, capsys):
    _two_cpu_local_model(home, capsys)
    out = home / "m.npz"
    # the defaults (windows 2-12, Cmax 1-4, DAgger and search distillation) with a tiny budget
    assert main(["train", "--node", "local", "--steps", "40", "--learning-starts", "10", "--eval-every", "40",
                 "--eval-per-cell", "1", "--synthetic-jobs", "4", "--group-groups", "50", "--group-epochs", "1",
                 "--quiet", "--out", str(out)]) == 0
    err = [ln for ln in capsys.readouterr().err.splitlines() if "Cmax" in ln]
    assert len(err) == 1 and "1,2" in err[0] and "2 CPUs" in err[0]
    from agent.modelfile import load_set_model

    assert tuple(load_set_model(out).meta.training["args"]["cmaxes"]) == (1, 2)


def test_a_cmax_beyond_the_cpus_given_by_hand_is_one_line(home, capsys):
    _two_cpu_local_model(home, capsys)
    assert main(["train", "--node", "local", "--cmaxes", "2,4", "--steps", "10", "--quiet"]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if "error" in ln]
    assert len(err) == 1 and "--cmaxes 2" in err[0] and "2 CPUs" in err[0]
    assert not (home / "runs").exists()


def test_refresh_trains_this_nodes_model_with_the_programs_learned_since_into_the_users_models(home, capsys):
    """--refresh: the node model with every program profiled since (here one learned from its first production run),
    jobs drawn around and across them, the model written where it plans by default."""
    from datetime import datetime, timezone

    from profiler.models import Profile
    from profiler.store import ProfileStore
    from training.policies import user_models_dir

    _two_cpu_local_model(home, capsys)
    ProfileStore().put(Profile(name="newprog", node_id=local_node_id(), command=["/bin/newprog"], wall_s=1.5,
                               counters={"task-clock": 1500.0, "duration_time": 1.5e9},
                               created_at=datetime.now(timezone.utc)))
    assert main(["train", "--node", "local", "--refresh", "--backend", "real"]) == 2
    assert "--refresh" in capsys.readouterr().err
    assert main(["train", "--refresh", "--steps", "30", "--learning-starts", "10", "--eval-every", "30",
                 "--eval-per-cell", "1", "--synthetic-jobs", "4", "--group-groups", "50", "--group-epochs", "1",
                 "--quiet"]) == 0
    out = user_models_dir() / f"{local_node_id()}.npz"
    from agent.modelfile import load_set_model

    meta = load_set_model(out).meta
    assert "newprog" in meta.training["jobs"]  # (trained for "local" when the calibration measured this node for real)
    assert meta.training["args"]["total_steps"] == 30 and meta.training["args"]["windows"] == [2, 8]
    rng = meta.training["feature_range"]
    assert rng["lo"][0] is not None and rng["lo"][0] <= rng["hi"][0]
