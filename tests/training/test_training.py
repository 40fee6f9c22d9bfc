"""`cosched train` (the one training algorithm, training/set_sac.py) through its command line: a tiny problem's
model plans valid windows of any size; models for another node shape are refused; the default policy with a
model is agent-search; real training runs a few measured episodes; bad options are one line."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from agent.modelfile import TrainedFor, load_set_model, write_set_model
from env.plan.models import Window, WindowJob
from env.sim.nodes import load_node

NODE = load_node("sim:reference")
TINY = ["--jobs", "EP,MG", "--windows", "2,2", "--cmaxes", "2", "--synthetic-jobs", "0", "--d-model", "16",
        "--heads", "2", "--layers", "1", "--d-ff", "32", "--d-head-hidden", "32", "--learning-starts", "100",
        "--batch-size", "32", "--eval-every", "150", "--eval-per-cell", "1", "--seed", "3", "--quiet",
        "--group-groups", "300", "--group-epochs", "5"]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    from service.cli import main

    d = tmp_path_factory.mktemp("tiny")
    assert main(["train", *TINY, "--steps", "300", "--run-dir", str(d / "run"), "--out", str(d / "model.npz")]) == 0
    return d / "model.npz"


def _window(names, cmax=2) -> Window:
    return Window(jobs=[WindowJob(id=f"{n}-{i}", profile=n) for i, n in enumerate(names)], max_concurrency=cmax)


def test_the_command_writes_a_set_model_its_run_directory_and_figures(tiny_model: Path, capsys) -> None:
    m = load_set_model(tiny_model)
    assert m.meta.trained_for.name == "sim:reference" and m.meta.max_window == 32 and m.meta.max_concurrency == 2
    run = tiny_model.parent / "run"
    figs = json.loads((run / "figures.json").read_text())
    assert figs["simulated"] is True and figs["steps"] >= 300 and figs["selected"]["step"] > 0
    assert (run / "curves.png").stat().st_size > 1000
    recs = [json.loads(ln) for ln in (run / "log.jsonl").read_text().splitlines()]
    assert {"episode", "eval"} <= {r["kind"] for r in recs}
    assert m.meta.training["args"]["total_steps"] == 300 and m.meta.training["jobs"] == ["EP", "MG"]


@pytest.mark.parametrize("policy", ["agent", "fifo"])
def test_agent_and_fifo_plans_are_valid(tiny_model: Path, policy: str) -> None:
    from service.planning import plan_window

    names = ["EP", "MG", "CG", "fft", "IS", "lu_cb", "BT"]  # 7 jobs, held-out programs included: one chunk
    guarded = plan_window(_window(names), load_node("sim:reference"), policy=policy, model=str(tiny_model))
    # the tiny model may plan below time sharing: then the guard's plan says which policy was asked for and why
    assert guarded.policy == policy or (guarded.requested_policy == policy and guarded.fallback_reason)
    plan = plan_window(_window(names), load_node("sim:reference"), policy=policy, model=str(tiny_model), guard=False)
    placed = [j.profile for g in plan.groups for j in g.jobs]
    assert sorted(placed) == sorted(names) and plan.policy == policy
    for g in plan.groups:
        assert len(g.jobs) <= 2
        cpus = [c for j in g.jobs for c in j.cpus]
        assert len(cpus) == len(set(cpus))
    assert plan.model is not None and plan.model.trained_for == "sim:reference"


def test_model_for_another_node_shape_is_refused(tmp_path: Path, tiny_model: Path, capsys) -> None:
    from service.cli import main

    m = load_set_model(tiny_model)
    other = tmp_path / "local.npz"
    meta = m.meta
    write_set_model(other, m.params, action_encoding=meta.action_encoding, architecture=meta.architecture, net=meta.net,
                    observation=meta.observation, max_window=meta.max_window, max_concurrency=meta.max_concurrency,
                    trained_for=TrainedFor(name="local", node_id="x", shape={"cpus": 2, "numa_domains": 1, "l3_domains": 1}),
                    feature_set=meta.feature_set, feature_pipeline=meta.feature_pipeline)
    w = tmp_path / "w.json"
    w.write_text(_window(["EP", "MG"]).model_dump_json())
    code = main(["schedule", str(w), "--node", "sim:reference", "--model", str(other)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "trained for node 'local'" in err and "cpus=2" in err


def test_default_policy_is_agent_search_when_a_model_ships(tmp_path: Path, tiny_model: Path, monkeypatch) -> None:
    from service.planning import default_policy, plan_window

    monkeypatch.setenv("COSCHED_MODELS_DIR", str(tmp_path / "none"))
    assert default_policy(NODE) == "greedy"
    shutil.copyfile(tiny_model, tmp_path / "m.npz")
    monkeypatch.setenv("COSCHED_MODELS_DIR", str(tmp_path))
    assert default_policy(NODE) == "agent-search"  # a model, and the simulated node to score its plans on
    plan = plan_window(_window(["EP", "MG"]), load_node("sim:reference"))
    assert "agent-search" in (plan.policy, plan.requested_policy)  # or the best baseline, saying why


def test_resume_continues_and_export_only_writes_the_best_actor(tmp_path: Path, capsys) -> None:
    from service.cli import main

    run = tmp_path / "run"
    assert main(["train", *TINY, "--steps", "160", "--run-dir", str(run)]) == 0
    assert main(["train", *TINY, "--steps", "320", "--run-dir", str(run), "--resume"]) == 0
    figs = json.loads((run / "figures.json").read_text())
    assert figs["steps"] >= 320
    capsys.readouterr()
    assert main(["train", *TINY, "--run-dir", str(run), "--export-only", "--out", str(tmp_path / "e.npz")]) == 0
    assert "wrote" in capsys.readouterr().out and load_set_model(tmp_path / "e.npz").meta.max_concurrency == 2


def test_real_backend_trains_a_few_measured_episodes(tmp_path: Path, monkeypatch) -> None:
    """Tiny real jobs on this machine: profiled first, then a few episodes run for real (reused when identical);
    the model is this node's."""
    from service.cli import main

    monkeypatch.setenv("COSCHED_HOME", str(tmp_path / "home"))
    cmd = [sys.executable, "-c", "import time; time.sleep(0.15)"]
    window = {"jobs": [{"id": "nap-a", "command": cmd}, {"id": "nap-b", "command": [*cmd[:2], "sum(range(300000))"]}],
              "max_concurrency": 2}
    wf = tmp_path / "window.json"
    wf.write_text(json.dumps(window))
    code = main(["train", "--backend", "real", "--window", str(wf), "--windows", "2,2", "--cmaxes", "2", "--steps", "12",
                 "--learning-starts", "4", "--batch-size", "4", "--updates-per-step", "2", "--eval-every", "6",
                 "--d-model", "16", "--heads", "2", "--layers", "1", "--quiet", "--run-dir", str(tmp_path / "run"),
                 "--out", str(tmp_path / "local.npz")])
    assert code == 0
    m = load_set_model(tmp_path / "local.npz")
    assert m.meta.trained_for.name == "local" and m.meta.training["args"]["backend"] == "real"
    assert m.meta.training["figures"]["simulated"] is False
    measured = json.loads(next((tmp_path / "run" / "real").glob("*.json")).read_text())
    assert measured  # groups measured on this node, kept for reuse


def test_bad_options_are_one_line(tmp_path: Path, capsys) -> None:
    from service.cli import main

    for args, words in ((["--windows", "3"], "--windows"), (["--cmaxes", "5"], "cmaxes"),
                        (["--backend", "real", "--search-every", "2"], "--search-every 0"),
                        (["--backend", "gpu"], "--backend"), (["--steps", "x"], "--steps"),
                        (["--export-only"], "best-actor.npz")):
        try:
            code = main(["train", *args, "--run-dir", str(tmp_path / "bad")])
        except SystemExit as e:  # the parser's own refusals exit
            code = e.code
        err = capsys.readouterr().err
        assert code == 2 and words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, (args, err)


def test_make_run_trains_first_on_a_node_of_another_shape(tmp_path: Path, monkeypatch, fake_sysroot) -> None:
    """``make run`` (tools/run-example.sh) asks ``local_model_path``: this machine's shape has a shipped model; a
    node of another shape (a forced fake 2-socket, 24-CPU topology) has none, so the path is the user's models
    folder, where make run calibrates the node model and trains one in it first (``cosched calibrate``, then
    ``cosched train --node local``) and where it is then found."""
    from env.node.discover import local_node_id, node_id
    from training.policies import local_model_path, models_dir, node_shape

    root = Path(__file__).resolve().parents[2]
    home = tmp_path / "home"
    monkeypatch.setenv("COSCHED_HOME", str(home))
    assert local_model_path().parent == models_dir()  # this machine: the shipped model
    monkeypatch.setenv("COSCHED_SYSROOT", str(fake_sysroot()))
    path = local_model_path()
    assert path == home / "models" / f"{local_node_id()}.npz" and not path.exists()
    script = (root / "tools" / "run-example.sh").read_text()
    assert "local_model_path()" in script and "$C calibrate" in script and "train --node local" in script
    assert '--out "$MODEL"' in script
    # a model trained there for this node's shape (here: the shipped weights, re-labelled) is then the one used
    shipped = load_set_model(root / "training" / "models" / "local-2cpu-1numa.npz")
    node = load_node("local")
    path.parent.mkdir(parents=True)
    meta = shipped.meta
    write_set_model(path, shipped.params, action_encoding=meta.action_encoding, architecture=meta.architecture,
                    net=meta.net, observation=meta.observation, max_window=meta.max_window,
                    max_concurrency=meta.max_concurrency,
                    trained_for=TrainedFor(name="local", node_id=node_id(node), shape=node_shape(node)),
                    feature_set=meta.feature_set, feature_pipeline=meta.feature_pipeline, training=meta.training)
    assert local_model_path() == path


def test_eval_takes_a_model_file(tmp_path: Path, tiny_model: Path, capsys) -> None:
    """`cosched eval --model M`: agent, fifo and agent-search plan with M (here the tiny model, Cmax 2), and the
    override ends with the command; an unreadable file or a model for another node is one line."""
    from service.cli import main

    windows = tmp_path / "w.json"
    windows.write_text(json.dumps([json.loads(_window(["EP", "MG", "CG"]).model_dump_json())]))
    assert main(["eval", "--windows", str(windows), "--policies", "agent,agent-search,greedy", "--model", str(tiny_model),
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    res = doc["windows"][0]["results"]
    assert res["agent-search"]["throughput_vs_timeshare"] >= res["agent"]["throughput_vs_timeshare"] - 1e-9
    from env.planners.registry import BASELINES

    assert "agent" not in BASELINES  # the command's model reached its own registry only
    for bad, words in ((tmp_path / "none.npz", "not found"), (windows, "not a cosched model file")):
        assert main(["eval", "--windows", str(windows), "--model", str(bad)]) == 2
        err = capsys.readouterr().err
        assert words in err and len(err.strip().splitlines()) == 1


def test_make_run_scripts_python_imports_resolve() -> None:
    """The Python that ``make run`` (tools/run-example.sh) runs inline imports only names that exist (an import
    of a removed alias once broke ``make run`` while every other test passed)."""
    import re
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    script = (root / "tools" / "run-example.sh").read_text()
    imports = sorted({ln for ln in script.splitlines() if re.match(r"^(from \S+ import |import )\S", ln)})
    assert imports and any("local_model_path" in ln for ln in imports)
    done = subprocess.run([sys.executable, "-c", "\n".join(imports)], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
