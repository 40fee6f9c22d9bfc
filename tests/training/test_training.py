"""Training (training.train, cosched train): a tiny sim problem's optimum is found; one seed gives one model;
resume is exact; models for another node shape are refused; agent / fifo plans are valid; real training runs."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from agent.modelfile import TrainedFor, load_model, write_model
from env.baselines import get_policy, search
from env.jobinfo import sim_provider
from env.models import Window, WindowJob
from env.nodes import load_node
from training.train import TrainConfig, train

NODE = load_node("sim:reference")
TINY_JOBS = ("EP", "MG")  # compute-bound and bandwidth-bound: co-running them clearly beats time sharing


def tiny_cfg(**kw) -> TrainConfig:
    base = dict(steps=240, seed=3, window_size=2, cmax=(2,), jobs=TINY_JOBS, eval_every=80, n_validation=2,
                checkpoint_every=80, sac=dict(hidden_sizes=[32, 32], learning_starts=60, batch_size=32))
    base.update(kw)
    return TrainConfig(**base)


def layers_of(path: Path) -> list[np.ndarray]:
    return [a for wb in load_model(path).layers for a in wb]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("tiny")
    train(tiny_cfg(), d / "run", d / "model.npz", progress=False, final_eval=False)
    return d / "model.npz"


def test_tiny_problem_optimum_is_found(tmp_path: Path) -> None:
    """W = 2 (EP with MG), Cmax 2: the best plan (full-grid search) is known; training with a few demonstrations
    of the teacher (training.demos) plus SAC finds a plan within 3 % of it (greedy actor, simulated)."""
    prov = sim_provider(NODE)
    best = search(NODE, list(TINY_JOBS), 2)
    optimum = sum(prov.get(n).solo_s for n in TINY_JOBS) / best.predicted_total_s
    cfg = tiny_cfg(steps=200, demos=4, pretrain_updates=300, bc_weight=1.0, demo_batch=16, reward_scale=1.0,
                   sac=dict(hidden_sizes=[64, 64], learning_starts=40, batch_size=32, target_entropy_ratio=0.1))
    res = train(cfg, tmp_path / "run", tmp_path / "m.npz", progress=False, final_eval=False)
    assert res.figures["selected"]["agent"] >= 0.97 * optimum > 1.3


def test_same_seed_same_model(tmp_path: Path, tiny_model: Path) -> None:
    train(tiny_cfg(), tmp_path / "run", tmp_path / "again.npz", progress=False, final_eval=False)
    for a, b in zip(layers_of(tiny_model), layers_of(tmp_path / "again.npz")):
        assert np.array_equal(a, b)
    meta = load_model(tmp_path / "again.npz").meta
    assert meta.trained_for.name == "sim:reference" and meta.window_size == 2 and meta.max_concurrency == 2
    assert meta.feature_pipeline and meta.training["figures"]["steps"] >= 240
    assert (tmp_path / "run" / "curves.png").stat().st_size > 1000
    recs = [json.loads(ln) for ln in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert {"episode", "eval"} <= {r["kind"] for r in recs}


def test_resume_is_exact(tmp_path: Path, tiny_model: Path) -> None:
    run = tmp_path / "run"
    train(tiny_cfg(steps=120), run, None, progress=False, final_eval=False)
    train(tiny_cfg(), run, tmp_path / "resumed.npz", resume=True, steps_override=240, progress=False, final_eval=False)
    for a, b in zip(layers_of(tiny_model), layers_of(tmp_path / "resumed.npz")):
        assert np.array_equal(a, b)


def test_resume_without_checkpoint_and_overwrite_are_refused(tmp_path: Path) -> None:
    from env.errors import InputError

    with pytest.raises(InputError, match="no checkpoint"):
        train(tiny_cfg(), tmp_path / "none", None, resume=True, progress=False)


def test_out_may_be_the_run_directorys_own_model_file(tmp_path: Path) -> None:
    run = tmp_path / "run"
    res = train(tiny_cfg(steps=60, eval_every=60), run, run / "model.npz", progress=False, final_eval=False)
    assert res.model_path == run / "model.npz" and load_model(run / "model.npz").meta.window_size == 2


def _window(names, cmax=2) -> Window:
    return Window(jobs=[WindowJob(id=f"{n}-{i}", profile=n) for i, n in enumerate(names)], max_concurrency=cmax)


@pytest.mark.parametrize("policy", ["agent", "fifo"])
def test_agent_and_fifo_plans_are_valid(tiny_model: Path, policy: str) -> None:
    from service.planning import plan_window

    names = ["EP", "MG", "CG", "fft", "IS", "lu_cb", "BT"]  # 7 jobs: four chunks of W = 2, held-out jobs included
    guarded = plan_window(_window(names), "sim:reference", policy=policy, model=str(tiny_model))
    # the tiny model may plan below time sharing: then the guard's plan says which policy was asked for and why
    assert guarded.policy == policy or (guarded.requested_policy == policy and guarded.fallback_reason)
    plan = plan_window(_window(names), "sim:reference", policy=policy, model=str(tiny_model), guard=False)
    placed = [j.profile for g in plan.groups for j in g.jobs]
    assert sorted(placed) == sorted(names) and plan.policy == policy
    for g in plan.groups:
        assert len(g.jobs) <= 2
        cpus = [c for j in g.jobs for c in j.cpus]
        assert len(cpus) == len(set(cpus))
    assert plan.model is not None and plan.model.trained_for == "sim:reference"
    if policy == "fifo":  # queue order kept: groups hold consecutive jobs of the window
        assert placed == names


def test_model_for_another_node_shape_is_refused(tmp_path: Path, tiny_model: Path, capsys) -> None:
    from service.cli import main

    m = load_model(tiny_model)
    other = tmp_path / "local.npz"
    write_model(other, m.layers, action_encoding=m.meta.action_encoding, window_size=2, max_concurrency=2,
                trained_for=TrainedFor(name="local", node_id="x", shape={"cpus": 2, "numa_domains": 1, "l3_domains": 1}),
                feature_set=m.meta.feature_set, feature_pipeline=m.meta.feature_pipeline)
    w = tmp_path / "w.json"
    w.write_text(_window(["EP", "MG"]).model_dump_json())
    code = main(["schedule", str(w), "--node", "sim:reference", "--model", str(other)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "trained for node 'local'" in err and "cpus=2" in err


def test_default_policy_is_agent_when_a_model_ships(tmp_path: Path, tiny_model: Path, monkeypatch) -> None:
    from service.planning import default_policy, plan_window

    monkeypatch.setenv("COSCHED_MODELS_DIR", str(tmp_path / "none"))
    assert default_policy(NODE) == "greedy"
    shutil.copyfile(tiny_model, tmp_path / "m.npz")
    monkeypatch.setenv("COSCHED_MODELS_DIR", str(tmp_path))
    assert default_policy(NODE) == "agent-search"  # a model, and the simulated node to score its plans on
    plan = plan_window(_window(["EP", "MG"]), "sim:reference")
    assert "agent-search" in (plan.policy, plan.requested_policy)  # or the best baseline, saying why


def test_real_backend_trains_a_few_episodes(tmp_path: Path, monkeypatch) -> None:
    """Tiny real jobs on this machine: profiled first, then a few episodes run for real (reused when identical)."""
    monkeypatch.setenv("COSCHED_HOME", str(tmp_path / "home"))
    cmd = [sys.executable, "-c", "import time; time.sleep(0.15)"]
    window = {"jobs": [{"id": "nap-a", "command": cmd}, {"id": "nap-b", "command": [*cmd[:2], "sum(range(300000))"]}],
              "max_concurrency": 2}
    wf = tmp_path / "window.json"
    wf.write_text(json.dumps(window))
    cfg = TrainConfig(backend="real", node="local", steps=12, seed=1, window_size=2, cmax=(2,), window_file=str(wf),
                      eval_every=6, checkpoint_every=1, sac=dict(hidden_sizes=[32, 32], learning_starts=4, batch_size=4))
    res = train(cfg, tmp_path / "run", tmp_path / "local.npz", progress=False, final_eval=True)
    meta = load_model(tmp_path / "local.npz").meta
    assert meta.trained_for.name == "local" and meta.training["figures"]["backend"] == "real"
    rg = res.figures["real_groups"]
    assert rg["executed"] >= 1 and rg["executed"] + rg["reused_measurements"] >= 4
    assert res.evaluation is not None and res.evaluation["simulated"] is False


def test_make_run_trains_first_on_a_node_of_another_shape(tmp_path: Path, monkeypatch, fake_sysroot) -> None:
    """``make run`` (tools/run-example.sh) asks ``local_model_path``: this machine's shape has a shipped model; a
    node of another shape (a forced fake 2-socket, 24-CPU topology) has none, so the path is the user's models
    folder, where make run calibrates the node model and trains one in it first (``cosched calibrate``, then
    ``cosched train --node local``) and where it is then found."""
    from env.discover import local_node_id, node_id
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
    shipped = load_model(root / "training" / "models" / "local-2cpu-1numa.npz")
    node = load_node("local")
    path.parent.mkdir(parents=True)
    write_model(path, [(np.asarray(w), np.asarray(b)) for w, b in shipped.layers],
                action_encoding=shipped.meta.action_encoding, window_size=shipped.meta.window_size,
                max_concurrency=shipped.meta.max_concurrency,
                trained_for=TrainedFor(name="local", node_id=node_id(node), shape=node_shape(node)),
                feature_set=shipped.meta.feature_set, feature_pipeline=shipped.meta.feature_pipeline,
                training=shipped.meta.training)
    assert local_model_path() == path


def test_ensemble_is_distilled_into_one_actor(tmp_path: Path) -> None:
    """--ensemble 2: two agents (seeds 3 and 4, the same demonstrations, played once), distilled into one actor
    of the configured shape; the model file holds that one actor and the figures of members and ensemble; the
    same seed gives the same actor; --resume of a finished run does not train its members again."""
    cfg = tiny_cfg(steps=60, eval_every=60, ensemble=2, demos=4, pretrain_updates=40, distill_windows=20,
                   distill_updates=150)
    res = train(cfg, tmp_path / "run", tmp_path / "e.npz", progress=False, final_eval=False)
    m = load_model(tmp_path / "e.npz")
    assert len(m.actors) == 1 and m.meta.hidden_sizes == [32, 32]
    figs = m.meta.training["figures"]
    assert figs["ensemble"] == 2 and [x["seed"] for x in figs["members"]] == [3, 4]
    assert figs["distillation"]["states"] > 0 and "agent" in figs["ensemble_validation"]
    members = tmp_path / "run" / "members"
    assert (members / "1" / "demos.npz").stat().st_ino == (members / "0" / "demos.npz").stat().st_ino
    assert res.figures["selected"]["agent"] > 1.0
    again = train(cfg, tmp_path / "run2", tmp_path / "e2.npz", progress=False, final_eval=False)
    for a, b in zip(layers_of(tmp_path / "e.npz"), layers_of(tmp_path / "e2.npz")):
        assert np.array_equal(a, b)
    stamp = (members / "0" / "model.npz").stat().st_mtime_ns
    train(cfg, tmp_path / "run", tmp_path / "e3.npz", resume=True, progress=False, final_eval=False)
    assert (members / "0" / "model.npz").stat().st_mtime_ns == stamp
    for a, b in zip(layers_of(tmp_path / "e.npz"), layers_of(tmp_path / "e3.npz")):
        assert np.array_equal(a, b)
    assert again.figures["ensemble"] == 2


def test_an_ensemble_model_file_averages_its_actors(tmp_path: Path, tiny_model: Path) -> None:
    """A model file may hold several actors (same shape); the policy's logits are their mean."""
    from agent.policy import ActorPolicy, forward_logits

    m = load_model(tiny_model)
    other = [(w * 0.5, b + 0.1) for w, b in m.layers]
    write_model(tmp_path / "ens.npz", m.layers, action_encoding=m.meta.action_encoding, window_size=2,
                max_concurrency=2, trained_for=m.meta.trained_for, feature_set=m.meta.feature_set,
                feature_pipeline=m.meta.feature_pipeline, more_members=[other])
    e = load_model(tmp_path / "ens.npz")
    assert len(e.actors) == 2 and e.meta.model_id != m.meta.model_id
    x = np.random.default_rng(0).normal(size=(3, m.meta.obs_size)).astype(np.float32)
    want = (forward_logits([(w.T, b) for w, b in m.layers], x) + forward_logits([(w.T, b) for w, b in other], x)) / 2
    assert np.allclose(ActorPolicy(e).forward(x), want, atol=1e-5)


def test_train_command_line_ensemble_and_bad_flags(tmp_path: Path, capsys) -> None:
    """`cosched train` through its parser: an ensemble run on a tiny problem writes one model and says where the
    members are; bad values are one line and exit 2."""
    from service.cli import main

    base = ["train", "--backend", "sim", "--jobs", "EP,MG", "--window-size", "2", "--cmax", "2", "--hidden", "32,32",
            "--learning-starts", "20", "--batch-size", "16", "--eval-every", "40", "--n-validation", "2", "--quiet",
            "--no-eval", "--seed", "5"]
    code = main([*base, "--steps", "40", "--demos", "3", "--pretrain-updates", "20", "--ensemble", "2",
                 "--distill-windows", "5", "--distill-updates", "50", "--synthetic-jobs", "4",
                 "--run-dir", str(tmp_path / "run"), "--out", str(tmp_path / "m.npz")])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "members/K" in out.out and load_model(tmp_path / "m.npz").meta.training["figures"]["ensemble"] == 2
    assert load_model(tmp_path / "m.npz").meta.training["synthetic_jobs"] == {"n": 4, "seed": 5}
    for flag, value, words in (("--ensemble", "0", "--ensemble"), ("--demo-workers", "0", "--demo-workers"),
                               ("--synthetic-jobs", "-1", "--synthetic-jobs")):
        code = main([*base, "--steps", "10", flag, value, "--run-dir", str(tmp_path / f"bad{flag}")])
        err = capsys.readouterr().err
        assert code == 2 and words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
