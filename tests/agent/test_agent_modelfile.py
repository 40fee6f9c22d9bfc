"""The model file (round trip, refusals with one clear line) and the torch-free numpy policy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from agent.errors import ModelFileError
from agent.modelfile import MODEL_FORMAT, NodeShape, load_model, write_model
from agent.policy import ActorPolicy
from agent.sac import masked_policy

torch.set_num_threads(1)

REF = {"cpus": 24, "numa_domains": 2, "l3_domains": 2}
HERE = {"cpus": 2, "numa_domains": 1, "l3_domains": 1}
META = dict(
    action_encoding="cosched-actions/1",
    window_size=6,
    max_concurrency=4,
    trained_for={"name": "sim:reference", "node_id": "sim:reference@1", "shape": REF},
    feature_set="paper-12/rates-v1",
    feature_pipeline={"steps": [{"kind": "standard", "mean": [0.0, 1.5], "scale": [1.0, 2.0]}]},
    training={"episodes": 10, "mean_throughput": 1.31, "seed": 1},
)


class Agent:
    """A ``cosched-model/1`` actor (an MLP; the format is still served, no longer trained): seeded random layers in
    torch's (out, in) layout, and a torch computation of the same network to check the numpy serving path against."""

    def __init__(self, sizes: tuple[int, ...], seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.layers = [((torch.randn(o, i, generator=g) / i**0.5).numpy(), (torch.randn(o, generator=g) * 0.1).numpy())
                       for i, o in zip(sizes[:-1], sizes[1:])]

    def layers_numpy(self) -> list:
        return self.layers

    def export_model(self, path: Path, **meta: object):  # noqa: ANN201
        return write_model(path, self.layers, **meta)  # type: ignore[arg-type]

    def probs(self, obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
        h = torch.from_numpy(obs)
        for k, (w, b) in enumerate(self.layers):
            h = h @ torch.from_numpy(w).T + torch.from_numpy(b)
            if k < len(self.layers) - 1:
                h = torch.relu(h)
        return masked_policy(h, torch.from_numpy(mask))[0].numpy()

    def act(self, obs: np.ndarray, mask: np.ndarray, deterministic: bool = True) -> int:
        p = self.probs(obs[None], mask[None])[0]
        return int(np.flatnonzero(mask)[np.argmax(p[mask])])


@pytest.fixture(scope="module")
def agent() -> Agent:
    return Agent((126, 256, 256, 256, 257), seed=7)  # the real shape: 126 → 256 → 256 → 256 → 257


@pytest.fixture
def model_path(tmp_path: Path, agent: Agent) -> Path:
    p = tmp_path / "model.npz"
    agent.export_model(p, **META)
    return p


def test_round_trip_keeps_weights_and_metadata(model_path: Path, agent: Agent) -> None:
    m = load_model(model_path, expect_node_shape=REF, expect_feature_set="paper-12/rates-v1")
    assert m.meta.format == MODEL_FORMAT and m.meta.model_id.startswith("sha256:")
    assert (m.meta.obs_size, m.meta.n_actions, m.meta.hidden_sizes) == (126, 257, [256, 256, 256])
    assert m.meta.window_size == 6 and m.meta.max_concurrency == 4
    assert m.meta.trained_for.shape == NodeShape(**REF) and m.meta.trained_for.node_id == "sim:reference@1"
    assert m.meta.feature_pipeline == META["feature_pipeline"] and m.meta.training == META["training"]
    for (w, b), (w0, b0) in zip(m.layers, agent.layers_numpy()):
        assert np.array_equal(w, w0) and np.array_equal(b, b0) and w.dtype == np.float32
    # The id is the content's: writing the same content again gives the same id.
    again = agent.export_model(model_path.with_name("again.npz"), **META)
    assert again.model_id == m.meta.model_id
    other = agent.export_model(model_path.with_name("other.npz"), **{**META, "training": {"episodes": 11}})
    assert other.model_id != m.meta.model_id
    # Loads without unpickling anything: plain arrays and a JSON document.
    with np.load(model_path, allow_pickle=False) as z:
        assert json.loads(bytes(z["metadata"]))["model_id"] == m.meta.model_id


def one_line(e: pytest.ExceptionInfo[ModelFileError]) -> str:
    msg = str(e.value)
    assert "\n" not in msg and e.value.cli_exit_code == 2
    return msg


def test_refuses_a_model_for_another_node_shape(model_path: Path) -> None:
    with pytest.raises(ModelFileError) as e:
        load_model(model_path, expect_node_shape=HERE)
    msg = one_line(e)
    assert "sim:reference" in msg and "cpus=24" in msg and "cpus=2," in msg and "cosched train" in msg
    with pytest.raises(ModelFileError):
        ActorPolicy.from_file(model_path, expect_node_shape=NodeShape(**HERE))


def test_refuses_a_model_for_another_feature_set(model_path: Path) -> None:
    with pytest.raises(ModelFileError) as e:
        load_model(model_path, expect_feature_set="software-only/rates-v1")
    msg = one_line(e)
    assert "paper-12/rates-v1" in msg and "software-only/rates-v1" in msg


def test_refuses_missing_and_corrupt_files(tmp_path: Path, model_path: Path) -> None:
    with pytest.raises(ModelFileError) as e:
        load_model(tmp_path / "nope.npz")
    assert "not found" in one_line(e)

    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a zip at all")
    with pytest.raises(ModelFileError) as e:
        load_model(garbage)
    assert "corrupt" in one_line(e)

    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(model_path.read_bytes()[: model_path.stat().st_size // 2])
    with pytest.raises(ModelFileError) as e:
        load_model(truncated)
    assert "corrupt" in one_line(e)

    flipped = tmp_path / "flipped.npz"
    data = bytearray(model_path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside a weight array: the zip CRC or the content hash catches it
    flipped.write_bytes(bytes(data))
    with pytest.raises(ModelFileError) as e:
        load_model(flipped)
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


def test_refuses_another_format_version_edited_content_and_pickles(tmp_path: Path, model_path: Path) -> None:
    v2 = rewrite(model_path, tmp_path / "v2.npz", meta_edit=lambda d: d.update(format="cosched-model/2"))
    with pytest.raises(ModelFileError) as e:
        load_model(v2)
    assert "cosched-model/2" in one_line(e) and MODEL_FORMAT in str(e.value)

    def bump(a: dict[str, np.ndarray]) -> None:
        a["actor.3.bias"] = a["actor.3.bias"] + np.float32(1.0)

    edited = rewrite(model_path, tmp_path / "edited.npz", arrays_edit=bump)
    with pytest.raises(ModelFileError) as e:
        load_model(edited)
    assert "content hash" in one_line(e)

    relabelled = rewrite(model_path, tmp_path / "relabelled.npz", meta_edit=lambda d: d["trained_for"]["shape"].update(cpus=2))
    with pytest.raises(ModelFileError) as e:
        load_model(relabelled, expect_node_shape=HERE)  # a shape edited to pass the check breaks the hash
    assert "content hash" in one_line(e)

    bad_meta = rewrite(model_path, tmp_path / "badmeta.npz", meta_edit=lambda d: d.pop("window_size"))
    with pytest.raises(ModelFileError) as e:
        load_model(bad_meta)
    assert "window_size" in one_line(e)

    pickled = tmp_path / "pickled.npz"
    with np.load(model_path, allow_pickle=False) as z:
        arrays = {n: z[n] for n in z.files}
    arrays["actor.0.bias"] = np.array([object()], dtype=object)
    np.savez(pickled, **arrays)
    with pytest.raises(ModelFileError):
        load_model(pickled)


def test_numpy_policy_matches_the_torch_actor(model_path: Path, agent: Agent) -> None:
    policy = ActorPolicy.from_file(model_path, expect_node_shape=REF)
    rng = np.random.default_rng(11)
    obs = (rng.standard_normal((200, 126)) * 2).astype(np.float32)
    mask = rng.random((200, 257)) < rng.uniform(0.01, 1.0, (200, 1))
    mask[np.arange(200), rng.integers(0, 257, 200)] = True
    mask[0] = False
    mask[0, 256] = True  # one valid action
    mask[1] = True  # all valid
    p_np = policy.probs(obs, mask)
    p_torch = agent.probs(obs, mask)
    np.testing.assert_allclose(p_np, p_torch, atol=1e-5, rtol=0)
    assert (p_np[~mask] == 0).all()
    for i in range(200):
        a = policy.act(obs[i], mask[i])
        assert mask[i, a]
        assert a == agent.act(obs[i], mask[i], deterministic=True)
    assert policy.act(obs[0], mask[0]) == 256


def test_numpy_policy_sampling_is_seeded_and_valid(model_path: Path) -> None:
    rng = np.random.default_rng(2)
    obs = rng.standard_normal(126).astype(np.float32)
    mask = np.zeros(257, bool)
    mask[rng.choice(257, 9, replace=False)] = True
    a = ActorPolicy.from_file(model_path, deterministic=False, seed=3)
    b = ActorPolicy.from_file(model_path, deterministic=False, seed=3)
    draws_a = [a.act(obs, mask) for _ in range(5_000)]
    assert draws_a == [b.act(obs, mask) for _ in range(5_000)]
    assert mask[draws_a].all() and len(set(draws_a)) > 1
    with pytest.raises(ValueError, match="observation has 5 values"):
        a.act(np.zeros(5, np.float32), mask)
    with pytest.raises(ValueError, match="no valid action"):
        ActorPolicy.from_file(model_path).act(obs, np.zeros(257, bool))


def test_actor_weights_are_small(model_path: Path) -> None:
    policy = ActorPolicy.from_file(model_path)
    assert policy.weight_bytes < 13 * 2**20
    assert model_path.stat().st_size < 13 * 2**20


def test_policy_imports_no_torch(model_path: Path) -> None:
    code = (
        "import sys\n"
        "from agent.policy import ActorPolicy\n"
        "import agent.modelfile, agent.errors\n"
        f"p = ActorPolicy.from_file({str(model_path)!r})\n"
        "import numpy as np\n"
        "m = np.ones(257, bool)\n"
        "print(p.act(np.zeros(126, np.float32), m))\n"
        "assert 'torch' not in sys.modules, sorted(k for k in sys.modules if 'torch' in k)[:5]\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_write_model_rejects_inconsistent_layers(tmp_path: Path) -> None:
    w = [(np.zeros((4, 3), np.float32), np.zeros(4, np.float32)), (np.zeros((5, 6), np.float32), np.zeros(5, np.float32))]
    with pytest.raises(ModelFileError, match="layer 1"):
        write_model(tmp_path / "m.npz", w, **META)  # type: ignore[arg-type]
    assert not (tmp_path / "m.npz").exists()
