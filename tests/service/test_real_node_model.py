"""On this node, a calibrated node model is the node's model: the default policy is agent-search as on a simulated
node, the searches and the guard score on it, and plans carry its predictions labelled with its held-out error.

The calibrated model here is one fitted to a simulated node (variant-a) standing in for this node's: its node is
this machine's and its jobs' profiles are stored as this node's (no real profiling)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from agent.modelfile import TrainedFor, load_set_model, write_set_model
from env.calibration.store import model_path
from env.node.discover import local_node_id, node_id
from env.plan.models import Window, WindowJob
from env.planners.scoring import node_scorer
from env.sim.nodes import load_node
from profiler.models import Profile
from profiler.store import ProfileStore
from service.cli import main
from service.planning import plan_window
from training.policies import MODELS_DIR, default_policy, node_shape

JOBS = ("EP", "MG", "CG", "FT")


def local_model(dst: Path) -> Path:
    """The shipped sim:reference agent as a model trained for this node (its shape and id)."""
    m = load_set_model(MODELS_DIR / "sim-reference.npz")
    node = load_node("local")
    fields = m.meta.model_dump(exclude={"format", "model_id"})
    fields["trained_for"] = TrainedFor(name="local", node_id=node_id(node), shape=node_shape(node))
    write_set_model(dst, m.params, group=m.group_params, **fields)
    return dst


def calibrated_doc(home: Path, jobs: tuple[str, ...] = JOBS) -> dict:
    """A calibrated model (fitted to sim:variant-a in ``home``), its node this machine's."""
    import contextlib
    import io
    import os

    old = os.environ.get("COSCHED_HOME")
    os.environ["COSCHED_HOME"] = str(home)
    try:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(["calibrate", "--backend", "sim", "--node", "sim:variant-a", "--jobs", ",".join(jobs),
                         "--probes", "3", "--heldout", "3", "--repeats", "2", "--json"]) == 0
    finally:
        if old is None:
            os.environ.pop("COSCHED_HOME", None)
        else:
            os.environ["COSCHED_HOME"] = old
    doc = json.loads(Path(json.loads(out.getvalue())["out"]).read_text())
    doc["node"] = json.loads(load_node("local").model_dump_json())
    return doc


def store_local(doc: dict) -> Path:
    """``doc`` as this node's calibrated model, and its jobs' profiles as this node's (in ``$COSCHED_HOME``)."""
    path = model_path(local_node_id())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    store = ProfileStore()
    for j in doc["jobs"]:
        store.put(Profile.model_validate({**j["profile"], "node_id": local_node_id(), "simulated": False}))
    return path


@pytest.fixture(scope="module")
def fitted(calibrated_local: dict) -> dict:
    return copy.deepcopy(calibrated_local)


@pytest.fixture()
def calibrated(fitted: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.setenv("COSCHED_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COSCHED_MODELS_DIR", str(tmp_path / "none"))  # no shipped model: the one given is used
    return store_local(fitted), local_model(tmp_path / "local.npz")


def window(names: tuple[str, ...] = JOBS * 2, cmax: int = 2) -> Window:
    return Window(jobs=[WindowJob(id=f"j{i}", profile=n, command=["true"]) for i, n in enumerate(names)],
                  max_concurrency=cmax)


def test_the_default_policy_on_this_node_with_a_node_model_is_agent_search(calibrated) -> None:
    path, model = calibrated
    local = load_node("local")
    assert node_scorer(local) is not None
    assert default_policy(local, model) == "agent-search"
    path.unlink()  # no node model: nothing to score plans on, the agent alone
    assert node_scorer(local) is None and default_policy(local, model) == "agent"


def test_agent_search_plans_this_node_on_its_calibrated_model_with_its_heldout_error(calibrated) -> None:
    path, model = calibrated
    plan = plan_window(window(), load_node("local"), model=str(model))
    assert plan.policy in ("agent-search", "pairs", "greedy", "timeshare") and plan.no_prediction is None
    if plan.policy == "agent-search":
        assert plan.search is not None and plan.search.rollouts >= 1  # searched on the node model
    else:
        assert plan.requested_policy == "agent-search" and "below time sharing" in plan.fallback_reason
    assert plan.predicted_throughput_vs_timeshare is not None and plan.predicted_throughput_vs_timeshare >= 1.0 - 1e-9
    assert all(g.predicted_makespan_s and g.predicted_makespan_s > 0 for g in plan.groups)
    src = plan.predictions_source or ""
    assert str(path) in src and "held-out median abs error" in src and "noise floor" in src


def test_the_guard_scores_every_plan_on_this_node(calibrated) -> None:
    """Any policy's plan for this node is predicted on its model (none is left 'no node model'); time sharing is 1."""
    for policy in ("greedy", "random", "timeshare"):
        plan = plan_window(window(), load_node("local"), policy=policy, seed=3)
        assert plan.no_prediction is None and plan.predicted_throughput_vs_timeshare is not None, policy
    assert plan.predicted_throughput_vs_timeshare == pytest.approx(1.0, rel=1e-6)


def test_the_command_line_plans_this_node_with_agent_search(calibrated, tmp_path: Path, capsys) -> None:
    _, model = calibrated
    w = tmp_path / "w.json"
    w.write_text(window().model_dump_json())
    assert main(["schedule", str(w), "--node", "local", "--model", str(model), "--mode", "groups", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert (plan.get("requested_policy") or plan["policy"]) == "agent-search"
    assert "held-out median abs error" in plan["predictions_source"]
    # the default mode on a real node: continuous unless groups are predicted shorter by more than the model's error
    assert main(["schedule", str(w), "--node", "local", "--model", str(model), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    g_s, c_s = plan.get("groups_predicted_makespan_s"), plan.get("predicted_makespan_s")
    if plan["mode"] == "continuous":
        assert plan["policy"] == "rollout" and c_s is not None and g_s is not None
    else:
        assert "by more than the node model's error" in plan["mode_reason"]

