"""The node-model file: --node sim:FILE simulates with the file's parameters and jobs, not the paper's machine."""

from __future__ import annotations

import dataclasses
import json

import pytest
from pydantic import TypeAdapter, ValidationError

from env.errors import InputError
from env.sim.nodes import load_node
from env.sim.catalogue import catalogue
from env.sim.model import JobParams
from env.sim.nodemodel import NodeModel, is_node_model
from env.sim.params import DEFAULT_PARAMS
from env.sim.simulate import plan_from_actions, simulate_plan
from env.sim.variants import NODES_DIR, reference_model, variant_models, write_variants
from env.sim.world import world_for


def _write(tmp_path, model: NodeModel, name: str = "m.json"):
    p = tmp_path / name
    p.write_text(model.model_dump_json())
    return p


def test_every_field_is_required_and_bounded():
    doc = dataclasses.asdict(reference_model().jobs[0].params)
    assert TypeAdapter(JobParams).validate_python(doc) == reference_model().jobs[0].params
    for bad in ({k: v for k, v in doc.items() if k != "ws_mb"}, {**doc, "parallel": 1.5}, {**doc, "extra": 1.0}):
        with pytest.raises(ValidationError):
            TypeAdapter(JobParams).validate_python(bad)
    params = dataclasses.asdict(DEFAULT_PARAMS)
    params.pop("iterations")
    with pytest.raises(ValidationError, match="params.iterations"):
        NodeModel.model_validate({**reference_model().model_dump(), "params": params})


def test_the_file_format_is_unchanged(tmp_path):
    """Every committed node-model file reads and writes back the same (its keys in the same order); the variants
    are written as the same text."""
    for path in [*NODES_DIR.glob("*.json"), NODES_DIR.parents[2] / "training" / "results" / "local" / "node-model.json"]:
        text = path.read_text()
        if not is_node_model(text):
            continue
        doc, back = json.loads(text), json.loads(NodeModel.model_validate_json(text).model_dump_json())
        if "created_at" not in doc["provenance"]:
            del back["provenance"]["created_at"]
        assert back == doc and list(back["params"]) == list(doc["params"]), path
    for path in write_variants(tmp_path):
        assert path.read_text() == (NODES_DIR / path.name).read_text()


def test_a_model_file_replaces_the_catalogue_and_the_parameters(tmp_path, ref_node):
    ref = reference_model()
    slow = ref.model_copy(update={
        "params": dataclasses.replace(ref.params, overlap=0.2),
        "jobs": [j for j in ref.jobs if j.name in ("MG", "EP", "CG")],
    })
    node = load_node(f"sim:{_write(tmp_path, slow)}")
    assert node.name == f"sim:{(tmp_path / 'm.json').resolve()}"
    assert list(catalogue(node)) == ["CG", "EP", "MG"]
    assert world_for(node).params.overlap == 0.2
    plan = plan_from_actions(node, 0, [[("MG", 17), ("EP", 17)]])
    ours = simulate_plan(plan, node).makespans[0]
    theirs = simulate_plan(plan_from_actions(ref_node, 0, [[("MG", 17), ("EP", 17)]]), ref_node).makespans[0]
    assert ours > theirs * 1.02  # less overlap of compute and memory time: slower
    with pytest.raises(InputError, match="unknown job"):
        simulate_plan(plan_from_actions(ref_node, 0, [[("fft", 17)]]).model_copy(update={"node": plan.node}), node)


def test_reference_untouched_by_a_loaded_model(tmp_path, ref_node):
    load_node(f"sim:{_write(tmp_path, variant_models()['variant-a'], 'a.json')}")
    assert world_for(ref_node).model is None and len(catalogue(ref_node)) == 19


def test_bad_model_file_is_one_line(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text('{"kind": "cosched-node-model", "node": 3}')
    with pytest.raises(InputError, match="node model .* is invalid"):
        load_node(f"sim:{p}")


def test_variant_files_are_the_generated_ones(tmp_path):
    for path in write_variants(tmp_path):
        committed = NodeModel.model_validate_json((NODES_DIR / path.name).read_text())
        fresh = NodeModel.model_validate_json(path.read_text())
        assert committed.model_dump(exclude={"provenance": {"created_at"}}) == fresh.model_dump(exclude={"provenance": {"created_at"}})
    a, b = variant_models()["variant-a"], variant_models()["variant-b"]
    ref = reference_model()
    assert a.params.domain_bw_gbs != ref.params.domain_bw_gbs and a.params.remote_latency_ratio != ref.params.remote_latency_ratio
    assert len(b.node.cpus) == 16 and b.node.l3[0].ways == 12 and b.node.l3[0].size_bytes != ref.node.l3[0].size_bytes
    assert load_node("sim:variant-b").name == "sim:variant-b" and len(catalogue(load_node("sim:variant-b"))) == 19
    assert dataclasses.asdict(world_for(load_node("sim:variant-a")).params)["link_gbs"] == 16.0


def _three_job_file(tmp_path):
    ref = reference_model()
    m = ref.model_copy(update={"jobs": [j.model_copy(update={"role": "train"}) for j in ref.jobs if j.name in ("MG", "EP", "CG")]})
    return _write(tmp_path, m, "three.json")


def test_schedule_and_eval_take_a_model_file(tmp_path, capsys):
    import json

    from service.cli import main

    node = f"sim:{_three_job_file(tmp_path)}"
    w = tmp_path / "w.json"
    w.write_text(json.dumps({"jobs": [{"id": n, "profile": n} for n in ("MG", "EP", "CG")], "max_concurrency": 2}))
    ws = tmp_path / "ws.json"
    ws.write_text("[" + w.read_text() + "]")
    assert main(["schedule", str(w), "--node", node, "--policy", "greedy", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["node"]["name"] == f"sim:{(tmp_path / 'three.json').resolve()}"
    assert main(["eval", "--node", node, "--windows", str(ws), "--policies", "greedy,timeshare", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["mean"]["timeshare"] == pytest.approx(1.0)


def test_training_setup_on_a_model_without_held_out_jobs(tmp_path):
    from env.episode.window import RewardConfig
    from training.setup import sim_setup

    node = load_node(f"sim:{_three_job_file(tmp_path)}")
    s = sim_setup(node, window_size=3, cmaxes=[2], jobs=None, n_validation=3, reward=RewardConfig())
    assert sorted(s.jobs) == ["CG", "EP", "MG"] and len(s.validation) == 3  # it used to loop forever
