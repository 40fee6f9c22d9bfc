"""Learning from every run: a real `cosched run` puts each group's measured makespan beside the node model's
prediction (report and calibration data); without a node model the report says why there is none."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from env.plan import actions as A
from env.calibration.store import CalibrationStore, model_path
from env.node.discover import discover, local_node_id
from env.plan.models import WindowJob
from env.plan.builder import PlanBuilder
from env.sim.model import JobParams
from env.sim.nodemodel import ModelJob, NodeModel, Provenance
from env.sim.params import DEFAULT_PARAMS
from env.sim.probes import DEFAULT_PROBE
from service.cli import main

HALF = A.encode(A.JobAction(Fraction(1, 2), Fraction(8, 22), 100, "balanced"))
ALL_WAYS = A.encode(A.JobAction(Fraction(1, 2), Fraction(22, 22), 100, "balanced"))  # the whole L3: shared


@pytest.fixture()
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("COSCHED_HOME", str(tmp_path))
    return tmp_path


def _plan(tmp_path, action=HALF):
    node = discover("/")
    b = PlanBuilder(node=node, schedule=A.ScheduleAction("compact", "first-touch"), max_concurrency=4, window_size=2)
    for name in ("st-1", "st-2"):
        assert b.place(WindowJob(id=name, command=["sleep", "0.2"], profile=name), action) is not None
    b.close_group()
    p = tmp_path / "plan.json"
    p.write_text(b.build("hand").model_dump_json())
    return p


def _local_model() -> NodeModel:
    jobs = [ModelJob(params=JobParams(name=n, work_s=0.2, parallel=0.0, comm=0.0, comm_gb=0.0, irregular=0.0,
                                      init_serial=0.0, stream_gb=0.0, reuse_gb=0.0, ws_mb=1.0, ws2_mb=1.0,
                                      ws2_share=0.0, bw_core=1.0))
            for n in ("st-1", "st-2")]
    return NodeModel(node=discover("/"), params=DEFAULT_PARAMS, jobs=jobs,
                     probe=DEFAULT_PROBE, provenance=Provenance(source="calibrated", backend="real"))


@pytest.mark.parametrize("action", [HALF, ALL_WAYS], ids=["ways-of-its-own", "all-ways-shared"])
def test_a_run_is_predicted_and_kept(home, tmp_path, capsys, action):
    """Both jobs given every way of the L3 (what a node without CAT plans) share it: no partitions to fit."""
    path = model_path(local_node_id())
    path.parent.mkdir(parents=True)
    path.write_text(_local_model().model_dump_json())
    assert main(["run", str(_plan(tmp_path, action)), "--runs", str(tmp_path / "runs"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    g = report["groups"][0]
    assert g["predicted_makespan_s"] == pytest.approx(0.2, rel=0.01)  # two 0.2 s jobs side by side, per the model
    assert g["makespan_s"] >= 0.2 and report["predictions_source"] == f"node model {path}"
    assert report["timeshare_source"].startswith("predicted from profiles")
    rows = CalibrationStore().runs(local_node_id(), "run")
    assert len(rows) == 1 and [p.job for p in rows[0].record.group] == ["st-1", "st-2"]
    assert rows[0].measured_s == pytest.approx(g["makespan_s"], rel=0.2) and rows[0].predicted_s == pytest.approx(0.2, rel=0.01)


def test_without_a_node_model_the_report_says_so(home, tmp_path, capsys):
    assert main(["run", str(_plan(tmp_path)), "--runs", str(tmp_path / "runs"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["groups"][0]["predicted_makespan_s"] is None
    assert report["predictions_source"].startswith("none: no node model") and "cosched calibrate" in report["predictions_source"]
    assert CalibrationStore().count(local_node_id()) == 0
