"""A program this node has never seen, end to end with real short programs through ``cosched run``: its first run is
alone on the whole node and becomes its profile (no other run of it), the next plan takes it (paired cautiously:
the node model's cautious estimate, said in the plan), and after co-runs ``cosched jobs --backend real`` shows its
co-run count and the model's error on them.

The node model is a calibrated one (fitted to the simulated ``sim:variant-a`` as black-box hardware, its node made
this machine's): what ``cosched calibrate`` leaves; the programs and every run are real."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

import pytest

from env.calibration.learned import KNOWN_AFTER, SHAPE_AFTER
from env.calibration.store import CalibrationStore, model_path
from env.node.discover import local_node_id
from env.sim.nodes import load_node
from profiler.models import Profile
from profiler.store import ProfileStore
from service.cli import main

CPUS = load_node("local").cpus
pytestmark = pytest.mark.skipif(len(CPUS) < 2, reason="co-runs need two CPUs")  # every machine of the project has 2+

CALIBRATED = ("EP", "MG")
NEW = ("spin-a", "spin-b")


def busy(seconds: float, mark: Path | None = None) -> list[str]:
    """A single-threaded busy loop of ``seconds``; each run appends one line to ``mark``."""
    code = f"import time\nt = time.perf_counter()\nwhile time.perf_counter() - t < {seconds}: pass\n"
    if mark is not None:
        code += f"open({str(mark)!r}, 'a').write('run\\n')\n"
    return [sys.executable, "-c", code]


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A calibrated node model (of sim:variant-a, two jobs, a tiny budget), its node this machine's."""
    import os

    home = tmp_path_factory.mktemp("calibration")
    old = os.environ.get("COSCHED_HOME")
    os.environ["COSCHED_HOME"] = str(home)
    try:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(["calibrate", "--backend", "sim", "--node", "sim:variant-a", "--jobs", ",".join(CALIBRATED),
                         "--probes", "2", "--heldout", "2", "--repeats", "1", "--json"]) == 0
    finally:
        if old is None:
            os.environ.pop("COSCHED_HOME", None)
        else:
            os.environ["COSCHED_HOME"] = old
    doc = json.loads(Path(json.loads(out.getvalue())["out"]).read_text())
    doc["node"] = json.loads(load_node("local").model_dump_json())
    return doc


@pytest.fixture()
def home(fitted: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("COSCHED_HOME", str(home))
    monkeypatch.setenv("COSCHED_MODELS_DIR", str(tmp_path / "no-models"))  # no agent: the baseline default plans
    path = model_path(local_node_id())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(fitted))
    store = ProfileStore()
    for j in fitted["jobs"]:
        store.put(Profile.model_validate({**j["profile"], "node_id": local_node_id(), "simulated": False}))
    return home


def run_window(tmp_path: Path, name: str, jobs: list[dict], capsys: pytest.CaptureFixture[str],
               *extra: str) -> dict:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"jobs": jobs, "max_concurrency": 2}))
    capsys.readouterr()
    assert main(["run", str(path), "--json", "--runs", str(tmp_path / "runs"), *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_new_programs_first_run_is_its_profile_then_it_is_paired_and_learned(
        home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "240")  # the table's rows on one line each
    marks = {n: tmp_path / f"{n}.runs" for n in NEW}
    new = {n: busy(0.4, marks[n]) for n in NEW}

    def runs_of(name: str) -> int:
        return marks[name].read_text().count("run") if marks[name].exists() else 0

    # 1. A window with two new programs and a known one: each new one runs once, alone on the whole node, under perf;
    #    that run is its profile.
    first = run_window(tmp_path, "w1", [*({"id": f"{n}-1", "profile": n, "command": c} for n, c in new.items()),
                                        {"id": "EP-1", "profile": "EP", "command": busy(0.3)}], capsys)
    assert sorted(e["id"] for e in first["plan"]["excluded"]) == sorted(f"{n}-1" for n in NEW)
    solo = [g for g in first["groups"] if g["solo_profile"]]
    assert sorted(j["id"] for g in solo for j in g["jobs"]) == sorted(f"{n}-1" for n in NEW)
    assert all(len(g["jobs"]) == 1 and sorted(g["jobs"][0]["observed_cpus"] or CPUS) == sorted(CPUS) for g in solo)
    for n in NEW:
        assert runs_of(n) == 1  # no other run of it: no one-core run, no curves
        prof = ProfileStore().get(n, local_node_id())
        assert prof is not None and prof.command == new[n] and prof.scale_factor is None  # its production run
        assert ProfileStore().get_interference(n, local_node_id()) is None
    assert not [r for r in CalibrationStore().runs(local_node_id(), "run")
                if any(p.job in NEW for p in r.record.group)]  # a run alone says nothing about co-running

    # 2. The next plan (the default policy) takes them with the node model's cautious estimate and pairs them.
    jobs2 = [{"id": f"{n}-{i}", "profile": n, "command": new[n]} for i in (2, 3) for n in NEW]
    w2 = tmp_path / "w2.json"
    w2.write_text(json.dumps({"jobs": jobs2, "max_concurrency": 2}))
    capsys.readouterr()
    assert main(["schedule", str(w2), "--mode", "groups", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["excluded"] == [] and all(f"{n}: 0 co-runs, cautious" in plan["predictions_source"] for n in NEW)
    assert all(len(g["jobs"]) == 2 for g in plan["groups"])  # paired
    assert all(runs_of(n) == 1 for n in NEW)  # planning runs nothing
    # the default mode (as 'cosched run w2.json' plans it): continuous, whose runs teach the node model as groups do
    assert main(["schedule", str(w2), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["mode"] == "continuous" and plan["mode_reason"].startswith("continuous:")

    coruns = kept = 0
    before = len(CalibrationStore().runs(local_node_id(), "run"))
    for _ in range(2):  # online runs, decided at every real job end
        report = run_window(tmp_path, "w2", jobs2, capsys)
        assert report["mode"] == "continuous" and report["failed"] == [] and report["max_running"] == 2
        spans = [(j["start_s"], j["end_s"]) for j in report["jobs"]]
        coruns += sum(1 for k, (s, e) in enumerate(spans) if any(i != k and a < e and s < b
                                                                for i, (a, b) in enumerate(spans))) // len(NEW)
        note = next(n for n in report["notes"] if n.startswith("calibration data: "))
        kept += int(note.split()[2])  # "calibration data: N set(s) of jobs kept ..."
    # each set of jobs that overlapped in time is one record, with each job's start and time as measured
    rows = [r.record for r in CalibrationStore().runs(local_node_id(), "run")][before:]
    assert len(rows) == kept >= 2 and sum(len(r.group) for r in rows) == 2 * len(jobs2)
    assert all(r.start_s is not None and len(r.group) >= 2 for r in rows if any(p.job in NEW for p in r.group))
    assert coruns >= KNOWN_AFTER
    assert all(runs_of(n) == 1 + 4 for n in NEW)  # its production runs only

    # 3. What the node model now knows of them: their co-runs, the model's error on them, known past KNOWN_AFTER.
    assert main(["jobs", "--backend", "real", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for n in NEW:
        row = next(j for j in doc["jobs"] if j["name"] == n)
        assert row["source"] == "learned" and row["coruns"] == coruns and row["known"]
        assert row["error_pct"] is not None and row["error_pct"] >= 0 and row["scale_source"] == "estimated"
    assert main(["jobs", "--backend", "real"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if any(n in line for n in NEW)]
    assert len(rows) == len(NEW) and all(f"{coruns} co-runs, the model's median error on them" in r for r in rows)


def test_a_program_profiled_without_curves_is_planned(home: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """``cosched profile`` measures no interference curves unless ``--curves``; the planner needs none: the program
    is planned (paired here), in the node model as a learned program with its measured scale factor."""
    capsys.readouterr()
    assert main(["profile", "--name", "prof-a", "--json", "--", *busy(0.3)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["interference"] is None and doc["scale_factor"] is not None  # solo + one core: two runs, no curves
    assert ProfileStore().get_interference("prof-a", local_node_id()) is None
    w = tmp_path / "w.json"
    w.write_text(json.dumps({"jobs": [{"id": f"a-{i}", "profile": "prof-a", "command": busy(0.3)} for i in range(4)],
                             "max_concurrency": 2}))
    assert main(["schedule", str(w), "--mode", "groups", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["excluded"] == [] and sorted(j["id"] for g in plan["groups"] for j in g["jobs"]) == [f"a-{i}" for i in range(4)]
    assert all(len(g["jobs"]) == 2 for g in plan["groups"])  # single-threaded: paired
    assert "prof-a: 0 co-runs, cautious" in plan["predictions_source"] and plan["predicted_throughput_vs_timeshare"] > 1
    assert main(["jobs", "--backend", "real", "--json"]) == 0
    row = next(j for j in json.loads(capsys.readouterr().out)["jobs"] if j["name"] == "prof-a")
    assert row["source"] == "learned" and row["scale_source"] == "measured"
