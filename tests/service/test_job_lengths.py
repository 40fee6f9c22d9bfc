"""A job's own time alone (a window job's ``solo_s``): continuous decisions play its program scaled to it, in plans
(`cosched schedule`, POST /schedule) and online runs; the default mode is then continuous and says why; groups plans,
which take profiles only, refuse it in one line; a bad value is one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from env.episode.stream import sim_stream
from env.plan.models import Window, WindowJob
from env.sim.catalogue import catalogue
from env.sim.model import solo_time
from env.sim.nodes import load_node
from env.sim.world import world_for

ROOT = Path(__file__).resolve().parents[2]
SIM = "sim:reference"
JOBS = ["MG", "EP", "CG", "FT", "lu_cb", "fft"]


def cosched(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "service.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, check=False, env={**os.environ, "COSCHED_HOME": str(home)})


def window(own: dict[int, float], cmax: int = 2) -> Window:
    return Window(jobs=[WindowJob(id=f"j{i}", profile=n, solo_s=own.get(i)) for i, n in enumerate(JOBS)],
                  max_concurrency=cmax)


def test_a_jobs_own_solo_s_is_its_time_alone_on_the_node_model() -> None:
    node = load_node(SIM)
    cat = catalogue(node)
    own = 3.0 * cat["MG"].solo_s
    plain, scaled = sim_stream(node, window({}).jobs[:1]), sim_stream(node, window({0: own}).jobs[:1])
    assert plain[0].solo_s == pytest.approx(cat["MG"].solo_s) and scaled[0].solo_s == own
    assert solo_time(node, scaled[0].params, sp=world_for(node).params) == pytest.approx(own, rel=1e-6)


def test_a_continuous_plan_takes_each_jobs_own_length() -> None:
    from service.planning import plan_document

    node = load_node(SIM)
    total = sum(catalogue(node)[n].solo_s for n in JOBS)
    before = plan_document(window({}), node, mode="continuous")
    after = plan_document(window({3: 10 * total}), node, mode="continuous")
    assert before.predicted_makespan_s < 2 * total  # type: ignore[operator]
    long = next(j for j in after.launches if j.id == "j3")
    assert long.predicted_end_s - long.predicted_start_s >= 10 * total * 0.999  # type: ignore[operator]


def test_own_lengths_choose_continuous_and_groups_refuse_them_in_one_line(tmp_path: Path) -> None:
    from svc_support import running_app

    own = catalogue(load_node(SIM))["FT"].solo_s * 2
    doc = json.loads(window({3: own}).model_dump_json(exclude_none=True))
    path = tmp_path / "w.json"
    path.write_text(json.dumps(doc))
    out = cosched("schedule", str(path), "--node", SIM, "--json", home=tmp_path)
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert plan["mode"] == "continuous" and "job j3" in plan["mode_reason"] and "solo_s" in plan["mode_reason"]
    bad = cosched("schedule", str(path), "--node", SIM, "--mode", "groups", home=tmp_path)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "job j3" in bad.stderr and "--mode continuous" in bad.stderr
    with running_app(SIM, home=tmp_path) as s:
        r = s.client.post("/schedule", json=doc)
        assert r.status_code == 200, r.text
        assert r.json() == plan
        r = s.client.post("/schedule", json={**doc, "mode": "groups"})
        assert r.status_code == 422 and "solo_s" in r.text and "Traceback" not in r.text


@pytest.mark.parametrize("value", [0, -1, "inf", 1e9])
def test_a_bad_solo_s_is_one_line(value: object, tmp_path: Path) -> None:
    doc = json.loads(window({}).model_dump_json(exclude_none=True))
    doc["jobs"][1]["solo_s"] = value
    path = tmp_path / "w.json"
    path.write_text(json.dumps(doc))
    out = cosched("schedule", str(path), "--node", SIM, "--mode", "continuous", home=tmp_path)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and "solo_s" in out.stderr, out.stderr


def test_an_online_run_on_the_node_model_takes_each_jobs_own_length(tmp_path: Path) -> None:
    node = load_node(SIM)
    total = sum(catalogue(node)[n].solo_s for n in JOBS)
    path = tmp_path / "w.json"
    path.write_text(window({2: 10 * total}).model_dump_json(exclude_none=True))
    out = cosched("run", str(path), "--mode", "continuous", "--backend", "sim", "--node", SIM, "--json", home=tmp_path)
    assert out.returncode == 0, out.stderr
    jobs = {j["id"]: j for j in json.loads(out.stdout)["jobs"]}
    assert jobs["j2"]["end_s"] - jobs["j2"]["start_s"] >= 10 * total * 0.999
    assert max(j["end_s"] - j["start_s"] for k, j in jobs.items() if k != "j2") < 2 * total
