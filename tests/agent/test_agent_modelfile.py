"""The model file (``cosched-model/2``): what it refuses, in one line, and that serving from it needs no torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from agent.errors import ModelFileError
from agent.modelfile import SET_MODEL_FORMAT, load_set_model, write_set_model
from agent.setnet import ARCHITECTURE, SetNetShape

REF = {"cpus": 24, "numa_domains": 2, "l3_domains": 2}
HERE = {"cpus": 2, "numa_domains": 1, "l3_domains": 1}
SHAPE = SetNetShape(d_token=16, d_context=8, d_model=16, heads=2, layers=1, d_ff=16, d_head_hidden=16)


def one_line(e: pytest.ExceptionInfo) -> str:
    msg = str(e.value)
    assert msg and "\n" not in msg
    return msg


@pytest.fixture
def model_path(tmp_path: Path) -> Path:
    """Seeded random parameters of a small set encoder (the values do not matter to the file's checks)."""
    rng = np.random.default_rng(7)
    params = {k: rng.normal(size=s).astype(np.float32) for k, s in SHAPE.param_shapes().items()}
    p = tmp_path / "model.npz"
    write_set_model(p, params, action_encoding="cosched-actions-v1", architecture=ARCHITECTURE, net=SHAPE.to_dict(),
                    observation="set-v1", max_window=32, max_concurrency=4,
                    trained_for={"name": "sim:reference", "node_id": "sim:reference@1", "shape": REF},
                    feature_set="paper-12/rates-v1", training={"episodes": 10, "seed": 1})
    return p


def test_round_trip_keeps_weights_and_metadata(model_path: Path) -> None:
    m = load_set_model(model_path, expect_node_shape=REF, expect_feature_set="paper-12/rates-v1")
    rng = np.random.default_rng(7)
    want = {k: rng.normal(size=s).astype(np.float32) for k, s in SHAPE.param_shapes().items()}
    assert set(m.params) == set(want) and all(np.array_equal(m.params[k], want[k]) for k in want)
    assert m.meta.format == SET_MODEL_FORMAT and m.meta.training == {"episodes": 10, "seed": 1}
    assert m.meta.model_id.startswith("sha256:") and load_set_model(model_path).meta.model_id == m.meta.model_id


def test_refuses_the_old_mlp_format_in_one_line(tmp_path: Path) -> None:
    from model_support import write_old_mlp_model

    old = write_old_mlp_model(tmp_path / "old.npz")
    with pytest.raises(ModelFileError) as e:
        load_set_model(old)
    msg = one_line(e)
    assert "cosched-model/1" in msg and "cosched train" in msg and str(old) in msg


def test_refuses_a_model_for_another_node_shape_or_feature_set(model_path: Path) -> None:
    with pytest.raises(ModelFileError) as e:
        load_set_model(model_path, expect_node_shape=HERE)
    msg = one_line(e)
    assert "sim:reference" in msg and "cpus=24" in msg and "cpus=2," in msg and "cosched train" in msg
    with pytest.raises(ModelFileError) as e:
        load_set_model(model_path, expect_feature_set="software-only/rates-v1")
    msg = one_line(e)
    assert "paper-12/rates-v1" in msg and "software-only/rates-v1" in msg


def test_refuses_missing_and_corrupt_files(tmp_path: Path, model_path: Path) -> None:
    with pytest.raises(ModelFileError) as e:
        load_set_model(tmp_path / "nope.npz")
    assert "not found" in one_line(e)
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a zip at all")
    with pytest.raises(ModelFileError) as e:
        load_set_model(garbage)
    assert "corrupt" in one_line(e)
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(model_path.read_bytes()[: model_path.stat().st_size // 2])
    with pytest.raises(ModelFileError) as e:
        load_set_model(truncated)
    assert "corrupt" in one_line(e)


def rewrite(src: Path, dst: Path, *, meta_edit: object = None, arrays_edit: object = None) -> Path:
    """Copy a model file, changing its metadata or arrays without fixing the id."""
    with np.load(src, allow_pickle=False) as z:
        arrays = {n: z[n] for n in z.files}
    doc = json.loads(bytes(arrays.pop("metadata")))
    if callable(meta_edit):
        meta_edit(doc)
    if callable(arrays_edit):
        arrays_edit(arrays)
    np.savez(dst, metadata=np.frombuffer(json.dumps(doc).encode(), np.uint8), **arrays)
    return dst


def test_refuses_another_format_edited_content_and_pickles(tmp_path: Path, model_path: Path) -> None:
    v3 = rewrite(model_path, tmp_path / "v3.npz", meta_edit=lambda d: d.update(format="cosched-model/3"))
    with pytest.raises(ModelFileError) as e:
        load_set_model(v3)
    assert "cosched-model/3" in one_line(e) and SET_MODEL_FORMAT in str(e.value)

    def bump(a: dict[str, np.ndarray]) -> None:
        name = sorted(a)[0]
        a[name] = a[name] + np.float32(1.0)

    with pytest.raises(ModelFileError) as e:
        load_set_model(rewrite(model_path, tmp_path / "edited.npz", arrays_edit=bump))
    assert "content hash" in one_line(e)
    relabelled = rewrite(model_path, tmp_path / "relabelled.npz", meta_edit=lambda d: d["trained_for"]["shape"].update(cpus=2))
    with pytest.raises(ModelFileError) as e:
        load_set_model(relabelled, expect_node_shape=HERE)  # a shape edited to pass the check breaks the hash
    assert "content hash" in one_line(e)
    with pytest.raises(ModelFileError) as e:
        load_set_model(rewrite(model_path, tmp_path / "badmeta.npz", meta_edit=lambda d: d.pop("max_window")))
    assert "invalid metadata" in one_line(e)
    pickled = tmp_path / "pickled.npz"
    with np.load(model_path, allow_pickle=False) as z:
        arrays = {n: z[n] for n in z.files}
    arrays[sorted(k for k in arrays if k != "metadata")[0]] = np.array([object()], dtype=object)
    np.savez(pickled, **arrays)
    with pytest.raises(ModelFileError):
        load_set_model(pickled)


def test_serving_from_a_model_imports_no_torch(model_path: Path) -> None:
    code = (
        "import sys\n"
        "from agent.setpolicy import SetPolicy\n"
        f"p = SetPolicy.from_file({str(model_path)!r})\n"
        "assert p is not None\n"
        "assert 'torch' not in sys.modules, sorted(k for k in sys.modules if 'torch' in k)[:5]\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_cosched_schedule_refuses_an_old_model_file_in_one_line(tmp_path: Path) -> None:
    from model_support import write_old_mlp_model

    old = write_old_mlp_model(tmp_path / "old.npz")
    window = tmp_path / "w.json"
    window.write_text(json.dumps({"jobs": [{"id": "MG"}, {"id": "EP"}], "max_concurrency": 2}))
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-m", "service.cli", "schedule", str(window), "--node", "sim:reference",
                          "--model", str(old)], cwd=root, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "cosched-model/1" in lines[0] and "cosched train" in lines[0], out.stderr
