"""Which model plans when none is given: a user's own ($COSCHED_HOME/models) always before a shipped one
($COSCHED_MODELS_DIR standing in for training/models), for this node and for a simulated one; --model wherever a
model is used."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent.modelfile import TrainedFor, load_set_model, write_set_model
from env.node.discover import node_id
from env.sim.nodes import load_node
from service.cli import main
from training.policies import MODELS_DIR, node_shape, shipped_model_for

BASE = MODELS_DIR / "sim-reference.npz"


def _copy(dst: Path, node_name: str, tag: str, *, same_id: bool = True) -> str:
    """The shipped sim:reference model as trained for ``node_name`` (its node id unless ``same_id`` is False); a
    distinct file (``tag`` in its training document, so its own id). Its model id."""
    m = load_set_model(BASE)
    node = load_node(node_name)
    fields = m.meta.model_dump(exclude={"format", "model_id"})
    fields["trained_for"] = TrainedFor(name="local" if not node.simulated else node.name,
                                       node_id=node_id(node) if same_id else "another-node", shape=node_shape(node))
    fields["training"] = {**fields["training"], "tag": tag}
    dst.parent.mkdir(parents=True, exist_ok=True)
    return write_set_model(dst, m.params, group=m.group_params, **fields).model_id


@pytest.fixture()
def folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    shipped, home = tmp_path / "shipped", tmp_path / "home"
    shipped.mkdir()
    monkeypatch.setenv("COSCHED_MODELS_DIR", str(shipped))
    monkeypatch.setenv("COSCHED_HOME", str(home))
    return shipped, home / "models"


@pytest.mark.parametrize("node_name", ["local", "sim:reference"])
def test_the_users_own_model_wins_over_a_shipped_one_with_the_same_node_id(folders, node_name: str) -> None:
    shipped, own = folders
    _copy(shipped / "a-shipped.npz", node_name, "shipped")
    assert shipped_model_for(load_node(node_name)) == shipped / "a-shipped.npz"
    _copy(own / "z-mine.npz", node_name, "mine")
    assert shipped_model_for(load_node(node_name)) == own / "z-mine.npz"


def test_on_this_node_the_users_model_wins_even_trained_for_another_node_of_its_shape(folders) -> None:
    shipped, own = folders
    _copy(shipped / "shipped.npz", "local", "shipped")
    _copy(own / "mine.npz", "local", "mine", same_id=False)
    assert shipped_model_for(load_node("local")) == own / "mine.npz"


def test_among_the_users_models_the_newest_wins(folders) -> None:
    _, own = folders
    _copy(own / "a.npz", "sim:reference", "older")
    _copy(own / "b.npz", "sim:reference", "newer")
    os.utime(own / "a.npz", ns=(1_000_000_000, 1_000_000_000))
    assert shipped_model_for(load_node("sim:reference")) == own / "b.npz"


def _window(tmp_path: Path) -> Path:
    w = tmp_path / "w.json"
    w.write_text(json.dumps({"jobs": [{"id": "MG"}, {"id": "EP"}, {"id": "CG"}], "max_concurrency": 2}))
    return w


def test_schedule_plans_with_the_users_model_and_model_path_overrides_both(folders, tmp_path: Path, capsys) -> None:
    shipped, own = folders
    _copy(shipped / "shipped.npz", "sim:reference", "shipped")
    mine = _copy(own / "mine.npz", "sim:reference", "mine")
    given = _copy(tmp_path / "given.npz", "sim:reference", "given")
    w = _window(tmp_path)
    assert main(["schedule", str(w), "--node", "sim:reference", "--policy", "agent", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"]["id"] == mine
    assert main(["schedule", str(w), "--node", "sim:reference", "--policy", "agent", "--model", str(tmp_path / "given.npz"),
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"]["id"] == given


def test_the_service_says_the_model_is_the_users_own(folders) -> None:
    from service.api.served import load_served_model

    shipped, own = folders
    _copy(shipped / "shipped.npz", "sim:reference", "shipped")
    node = load_node("sim:reference")
    info = load_served_model(None, node).info
    assert info is not None and info.source == "shipped" and info.shipped
    mine = _copy(own / "mine.npz", "sim:reference", "mine")
    info = load_served_model(None, node).info
    assert info is not None and info.id == mine and info.source == "user" and not info.shipped
    info = load_served_model(str(shipped / "shipped.npz"), node).info
    assert info is not None and info.source == "given" and not info.shipped


@pytest.mark.parametrize("verb", ["schedule", "run", "eval", "serve", "slurm run"])
def test_model_is_an_option_wherever_a_model_is_used(verb: str, capsys) -> None:
    with pytest.raises(SystemExit):
        main([*verb.split(), "--help"])
    assert "--model" in capsys.readouterr().out


def test_the_example_window_bench_passes_model_to_every_run(capsys) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("example_window", Path(__file__).resolve().parents[2] / "bench" / "example_window.py")
    bench = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(bench)  # type: ignore[union-attr]
    with pytest.raises(SystemExit):
        bench.main(["--help"])
    assert "--model" in capsys.readouterr().out
    argv = bench.run_argv("w.json", "agent", "runs", "mine.npz")
    assert argv[1:3] == ["run", "w.json"] and argv[argv.index("--model") + 1] == "mine.npz"
    assert "--model" not in bench.run_argv("w.json", "agent", "runs")
