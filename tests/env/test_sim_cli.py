"""The command line on the simulated node: jobs, schedule, eval (--json, picture), run --backend sim, errors."""

from __future__ import annotations

import json

import pytest

from env.sim.catalogue import ALL_JOBS
from service.cli import main


def run_json(capsys, argv):
    code = main(argv)
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def write(tmp_path, name, doc):
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return str(p)


WINDOW = {"jobs": [{"id": "mg", "profile": "MG"}, {"id": "ep", "profile": "EP"}, {"id": "cg", "profile": "CG"},
                   {"id": "ws", "profile": "water_spatial"}], "max_concurrency": 2}


def test_jobs_json(capsys):
    doc = run_json(capsys, ["jobs", "--backend", "sim", "--json"])
    assert doc["simulated"] is True and doc["node"] == "sim:reference"
    assert [j["name"] for j in doc["jobs"]] == list(ALL_JOBS)
    ep = next(j for j in doc["jobs"] if j["name"] == "EP")
    assert ep["set"] == "train" and len(ep["counters"]) == 12 and all(v is not None for v in ep["counters"].values())
    assert ep["scale_factor"] == pytest.approx(ep["one_core_s"] / ep["solo_s"])


def test_schedule_then_run_sim(capsys, tmp_path):
    w = write(tmp_path, "w.json", WINDOW)
    plan = run_json(capsys, ["schedule", w, "--node", "sim:reference", "--policy", "pairs", "--json"])
    assert plan["node"]["name"] == "sim:reference" and plan["policy"] == "pairs"
    assert sorted(j["id"] for g in plan["groups"] for j in g["jobs"]) == ["cg", "ep", "mg", "ws"]
    p = write(tmp_path, "p.json", plan)
    report = run_json(capsys, ["run", p, "--backend", "sim", "--json"])
    assert report["backend"] == "sim" and report["simulated"] is True and report["run_dir"] is None
    assert report["throughput_vs_timeshare"] == pytest.approx(plan["predicted_throughput_vs_timeshare"])


def test_eval_json_and_picture(capsys, tmp_path):
    ws = write(tmp_path, "ws.json", [WINDOW, {"jobs": [{"id": "a", "profile": "IS"}, {"id": "b", "profile": "fmm"}]}])
    png = tmp_path / "e.png"
    doc = run_json(capsys, ["eval", "--backend", "sim", "--windows", ws, "--policies", "greedy,timeshare,pairs",
                            "--json", "--plot", str(png)])
    assert doc["backend"] == "sim" and doc["simulated"] is True and doc["node"] == "sim:reference"
    assert doc["policies"] == ["greedy", "timeshare", "pairs"]
    assert [w["jobs"] for w in doc["windows"]] == [["MG", "EP", "CG", "water_spatial"], ["IS", "fmm"]]
    for w in doc["windows"]:
        assert w["results"]["timeshare"]["throughput_vs_timeshare"] == pytest.approx(1.0)
        assert set(w["results"]["pairs"]) >= {"throughput_vs_timeshare", "total_s"}
    assert doc["mean"]["greedy"] == pytest.approx(sum(w["results"]["greedy"]["throughput_vs_timeshare"] for w in doc["windows"]) / 2)
    assert png.stat().st_size > 1000


def test_eval_table_says_simulated(capsys, tmp_path):
    ws = write(tmp_path, "ws.json", [WINDOW])
    assert main(["eval", "--windows", ws, "--policies", "timeshare,greedy"]) == 0
    assert "simulated" in capsys.readouterr().out


@pytest.mark.parametrize("argv_doc,needle", [
    (["eval", "--windows", "{ws_unknown}"], "does not know: nope"),
    (["schedule", "{w}", "--policy", "bogus"], "unknown policy 'bogus'"),
    (["run", "{plan_bad_cpu}", "--backend", "sim"], "CPUs [99]"),
    (["run", "{plan_unknown}", "--backend", "sim"], "unknown job 'XX'"),
    (["eval", "--windows", "{missing}"], "no such file"),
])
def test_bad_input_is_one_clear_line_and_exit_2(capsys, tmp_path, argv_doc, needle):
    w = write(tmp_path, "w.json", WINDOW)
    assert main(["schedule", w, "--node", "sim:reference", "--policy", "greedy", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    bad_cpu = json.loads(json.dumps(plan))
    bad_cpu["groups"][0]["jobs"][0]["cpus"] = [0, 99]
    unknown = json.loads(json.dumps(plan))
    unknown["groups"][0]["jobs"][0]["profile"] = "XX"
    paths = {
        "w": w,
        "ws_unknown": write(tmp_path, "wu.json", [{"jobs": [{"id": "a", "profile": "EP"}, {"id": "b", "profile": "nope"}]}]),
        "plan_bad_cpu": write(tmp_path, "pb.json", bad_cpu),
        "plan_unknown": write(tmp_path, "pu.json", unknown),
        "missing": str(tmp_path / "none.json"),
    }
    argv = [a.format(**paths) for a in argv_doc]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err and "Traceback" not in err


def test_unknown_job_in_a_window_is_excluded_with_the_reason(capsys, tmp_path):
    w = write(tmp_path, "w.json", {"jobs": [{"id": "ep", "profile": "EP"}, {"id": "new-job", "command": ["./x"]}]})
    plan = run_json(capsys, ["schedule", w, "--node", "sim:reference", "--json"])
    assert [e["id"] for e in plan["excluded"]] == ["new-job"] and "will run alone and be profiled" in plan["excluded"][0]["reason"]
