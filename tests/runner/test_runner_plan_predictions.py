"""A plan for this node carries the calibrated node model's predictions, labelled with the model's held-out error
(``env.calibration.runs.predict_plan``; ``service.planning`` is where plans on a real node would get them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from env.calibration.runs import predict_plan
from env.calibration.store import model_path
from env.node.discover import local_node_id
from runner_support import LOCAL, make_plan
from service.cli import main


@pytest.fixture()
def calibrated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> Path:
    """This node's calibrated model: one fitted to a simulated node (EP and MG), its node this machine's shape."""
    monkeypatch.setenv("COSCHED_HOME", str(tmp_path))
    assert main(["calibrate", "--backend", "sim", "--node", "sim:variant-a", "--jobs", "EP,MG", "--probes", "2",
                 "--heldout", "3", "--json"]) == 0
    doc = json.loads(Path(json.loads(capsys.readouterr().out)["out"]).read_text())
    doc["node"] = json.loads(LOCAL.model_dump_json())
    path = model_path(local_node_id())
    path.write_text(json.dumps(doc))
    return path


def test_a_plan_for_this_node_is_predicted_by_its_calibrated_model(calibrated: Path) -> None:
    plan = make_plan([[("a", ["true"], "EP"), ("b", ["true"], "MG")], [("c", ["true"], "EP")]])
    got = predict_plan(plan, local_node_id())
    assert got is not None and got.no_prediction is None
    spans = [g.predicted_makespan_s for g in got.groups]
    assert all(s is not None and s > 0 for s in spans)
    assert got.predicted_throughput_vs_timeshare is not None and got.predicted_throughput_vs_timeshare > 0
    assert str(calibrated) in got.predictions_source and "held-out median abs error" in got.predictions_source
    assert [j.id for g in got.groups for j in g.jobs] == ["a", "b", "c"]  # the plan itself unchanged


def test_no_prediction_for_a_job_the_model_does_not_know_or_without_a_model(calibrated: Path) -> None:
    assert predict_plan(make_plan([[("a", ["true"], "EP"), ("x", ["true"], "unknown")]]), local_node_id()) is None
    calibrated.unlink()
    assert predict_plan(make_plan([[("a", ["true"], "EP")]]), local_node_id()) is None
