"""``cosched eval --streams``: job streams decided at every event, per stream and mean, simulated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.cli import main

FIELDS = {"makespan_s", "throughput_vs_timeshare", "mean_turnaround_s", "mean_bounded_slowdown"}


def _streams(tmp_path: Path, docs: list) -> str:
    p = tmp_path / "streams.json"
    p.write_text(json.dumps(docs))
    return str(p)


def test_the_document_has_every_policy_per_stream_and_mean(tmp_path: Path, capsys) -> None:
    path = _streams(tmp_path, [
        {"jobs": [{"id": "mg", "profile": "MG"}, {"id": "ep", "profile": "EP", "submit_s": 12.5},
                  {"id": "cg", "profile": "CG"}, {"id": "sp", "profile": "SP"}], "max_concurrency": 2},
        {"jobs": [{"id": n, "profile": n} for n in ("FT", "IS", "lu_cb", "EP", "MG")], "max_concurrency": 4}])
    assert main(["eval", "--streams", path, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["simulated"] is True and doc["node"] == "sim:reference" and doc["backend"] == "sim"
    assert doc["policies"] == ["timeshare", "packing", "groups", "greedy-continuous", "rollout"]
    assert [s["jobs"] for s in doc["streams"]] == [4, 5]
    for s in doc["streams"]:
        for p in doc["policies"]:
            assert set(s["results"][p]) == FIELDS
    assert doc["streams"][1]["results"]["timeshare"]["throughput_vs_timeshare"] == pytest.approx(1.0)
    for p in doc["policies"]:
        for k in FIELDS:
            assert doc["mean"][p][k] == pytest.approx(sum(s["results"][p][k] for s in doc["streams"]) / 2)
    # arrivals: the first stream's makespan runs from the first submit, so EP's 12.5 s is inside it
    first = doc["streams"][0]["results"]["packing"]
    assert first["mean_bounded_slowdown"] >= 1.0 and first["makespan_s"] > 0


@pytest.mark.parametrize("argv, words", [
    (["--policies", "agent", "--model", "training/models/sim-reference.npz"], "not a stream model"),
    (["--policies", "nope"], "unknown policy 'nope'"),
    (["--model", "m.npz", "--policies", "agent-search"], "stream model file m.npz not found"),
    (["--noise", "0.1"], "are for --windows"),
])
def test_bad_requests_are_one_line(tmp_path: Path, capsys, argv: list[str], words: str) -> None:
    path = _streams(tmp_path, [{"jobs": [{"id": "a", "profile": "EP"}], "max_concurrency": 2}])
    assert main(["eval", "--streams", path, *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("doc, words", [
    ([{"jobs": [{"id": "a", "profile": "NOPE"}]}], "does not know NOPE"),
    ([{"jobs": [{"id": "a", "profile": "EP", "submit_s": -1}]}], "stream 0 is not valid: jobs.0.submit_s"),
    ([], "non-empty JSON array of stream documents"),
])
def test_bad_stream_files_are_one_line(tmp_path: Path, capsys, doc: list, words: str) -> None:
    assert main(["eval", "--streams", _streams(tmp_path, doc)]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1


def test_windows_and_streams_are_one_or_the_other(tmp_path: Path, capsys) -> None:
    path = _streams(tmp_path, [{"jobs": [{"id": "a", "profile": "EP"}]}])
    with pytest.raises(SystemExit) as exc:
        main(["eval", "--streams", path, "--windows", path])
    assert exc.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_rollout_giveback_is_evaluated_on_the_model_and_planned(tmp_path: Path, capsys) -> None:
    from env.episode.stream import run_stream, sim_stream
    from env.plan.models import WindowJob
    from env.planners.streams import RolloutGiveBack
    from env.sim.nodes import load_node

    jobs = [{"id": "ep", "profile": "EP", "adapts": True}, {"id": "mg", "profile": "MG", "submit_s": 30.0},
            {"id": "ft", "profile": "FT", "submit_s": 60.0}]
    path = _streams(tmp_path, [{"jobs": jobs, "max_concurrency": 2}])
    assert main(["eval", "--streams", path, "--policies", "rollout,rollout-giveback", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    node = load_node("sim:reference")
    direct = run_stream(node, sim_stream(node, [WindowJob(**j) for j in jobs]), 2, RolloutGiveBack()).metrics()
    assert doc["streams"][0]["results"]["rollout-giveback"] == pytest.approx(direct)
    window = tmp_path / "window.json"
    window.write_text(json.dumps({"jobs": jobs, "max_concurrency": 2}))
    assert main(["schedule", str(window), "--node", "sim:reference", "--mode", "continuous", "--policy",
                 "rollout-giveback", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["policy"] == "rollout-giveback" and [j["adapts"] for j in plan["launches"]].count(True) <= 1
    assert {c["job"] for c in plan["changes"] if c["cpus"] is not None} <= {"ep"}  # only the job that adapts


def test_an_online_run_takes_rollout_giveback_and_the_jobs_that_adapt(tmp_path: Path, capsys) -> None:
    """cosched run WINDOW.json --mode continuous (its runner carries out give-backs) accepts rollout-giveback; on the
    sim backend it is run_stream's run of the same jobs, each job's adapts as its window says."""
    from dataclasses import replace

    from env.episode.stream import run_stream, sim_stream
    from env.plan.models import WindowJob
    from env.planners.streams import RolloutGiveBack
    from env.sim.nodes import load_node

    jobs = [{"id": "ep", "profile": "EP", "adapts": True}, {"id": "mg", "profile": "MG", "submit_s": 30.0},
            {"id": "ft", "profile": "FT", "submit_s": 60.0}]
    window = tmp_path / "window.json"
    window.write_text(json.dumps({"jobs": jobs, "max_concurrency": 2}))
    assert main(["run", str(window), "--backend", "sim", "--node", "sim:reference", "--mode", "continuous",
                 "--policy", "rollout-giveback", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    node = load_node("sim:reference")
    stream = sim_stream(node, [WindowJob(**j) for j in jobs])
    assert stream[0].adapts and not stream[1].adapts
    direct = run_stream(node, stream, 2, RolloutGiveBack())
    assert doc["policy"] == "rollout-giveback" and doc["metrics"] == pytest.approx(direct.metrics())
    fixed = run_stream(node, [replace(j, adapts=False) for j in stream], 2, RolloutGiveBack())
    assert not fixed.changes
