"""The set-encoder network: one definition, numpy (serving) and torch (training) giving the same logits; no
token's position matters; its model file (``cosched-model/2``) and the chooser's sampling."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agent.errors import ModelFileError
from agent.modelfile import NodeShape, TrainedFor, load_set_model, write_set_model
from agent.setnet import ARCHITECTURE, SetNetShape, check_params, set_logits, set_logits_many
from agent.setnet_torch import SetNet, collate
from agent.setpolicy import SetPolicy

SHAPE = SetNetShape(d_token=7, d_context=5, d_model=16, heads=2, layers=2, d_ff=24, d_head_hidden=20, n_actions=257)
NODE = TrainedFor(name="sim:test", node_id="t", shape=NodeShape(cpus=24, numa_domains=2, l3_domains=2))


def _net(seed: int = 0) -> SetNet:
    torch.manual_seed(seed)
    return SetNet(SHAPE)


def _states(seed: int) -> list[tuple[np.ndarray, np.ndarray, int]]:
    rng = np.random.default_rng(seed)
    out = []
    for n, cur in ((5, 2), (1, -1), (1, 0), (12, 11), (0, -1), (32, 7)):
        out.append((rng.normal(size=(n, 7)).astype(np.float32), rng.normal(size=5).astype(np.float32), cur))
    return out


@pytest.mark.parametrize("factors", [0, 6])
def test_numpy_and_torch_give_the_same_logits_on_a_padded_batch(factors: int) -> None:
    shape = SetNetShape(**{**SHAPE.to_dict(), "n_factors": factors})
    torch.manual_seed(0)
    net = SetNet(shape)
    if factors:  # an incidence of actions and options, as the trainer sets it
        net.action_factors.copy_(torch.from_numpy((np.random.default_rng(0).random((257, factors)) < 0.3).astype(np.float32)))
    params = net.export()
    assert check_params(shape, params) is None
    states = _states(1)
    with torch.no_grad():
        batch = net(*collate(states, shape.d_token)).numpy()
    many = set_logits_many(shape, params, states)  # numpy's padded batch: one pass, the same logits
    for i, (t, c, k) in enumerate(states):
        np.testing.assert_allclose(set_logits(shape, params, t, c, k), batch[i], atol=2e-5)
        np.testing.assert_allclose(many[i], batch[i], atol=2e-5)
        np.testing.assert_array_equal(set_logits_many(shape, params, [(t, c, k)])[0], set_logits(shape, params, t, c, k))


def test_permuting_the_tokens_permutes_nothing_in_the_logits() -> None:
    params = _net(3).export()
    rng = np.random.default_rng(5)
    for t, c, k in _states(2):
        if len(t) < 2:
            continue
        perm = rng.permutation(len(t))
        k2 = int(np.flatnonzero(perm == k)[0]) if k >= 0 else -1  # the same job stays current
        np.testing.assert_allclose(set_logits(SHAPE, params, t[perm], c, k2), set_logits(SHAPE, params, t, c, k), atol=1e-5)


def _write(tmp_path, params, name: str = "set.npz", node: TrainedFor = NODE):
    return write_set_model(tmp_path / name, params, action_encoding="cosched-actions-v1", architecture=ARCHITECTURE,
                           net=SHAPE.to_dict(), observation="set-v1", max_window=32, max_concurrency=4,
                           trained_for=node, feature_set="fs")


def test_set_model_file_round_trip_and_refusals(tmp_path) -> None:
    params = _net().export()
    meta = _write(tmp_path, params)
    m = load_set_model(tmp_path / "set.npz", expect_node_shape=NODE.shape, expect_feature_set="fs")
    assert m.meta.model_id == meta.model_id and set(m.params) == set(params)
    # another node's shape: one line naming both
    with pytest.raises(ModelFileError) as e:
        load_set_model(tmp_path / "set.npz", expect_node_shape=NodeShape(cpus=2, numa_domains=1, l3_domains=1))
    assert "\n" not in str(e.value) and "cpus=24" in str(e.value) and "cpus=2," in str(e.value)
    # the old MLP format: refused in one line
    from model_support import write_old_mlp_model

    with pytest.raises(ModelFileError) as e:
        load_set_model(write_old_mlp_model(tmp_path / "old.npz"))
    assert "\n" not in str(e.value) and "cosched-model/1" in str(e.value) and "cosched train" in str(e.value)
    # altered weights: the content id no longer matches
    with np.load(tmp_path / "set.npz") as z:
        arrays = {k: z[k] for k in z.files}
    arrays["actor.head2.bias"] = arrays["actor.head2.bias"] + 1.0
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ModelFileError, match="corrupt"):
        load_set_model(tmp_path / "bad.npz")


class _Ep:
    """The one method SetPolicy asks an episode for."""

    def __init__(self, state) -> None:
        self.state = state

    def set_observation(self):
        from types import SimpleNamespace

        t, c, k = self.state
        return SimpleNamespace(tokens=t, context=c, current=k)


def test_masked_actions_are_never_sampled(tmp_path) -> None:
    net = _net(7)
    with torch.no_grad():  # a strongly peaked policy, so masked favourites would show up if they could
        net.head2.bias[:] = torch.linspace(-30, 30, 257)
    _write(tmp_path, net.export())
    pol = SetPolicy.from_file(tmp_path / "set.npz", deterministic=False, seed=1)
    rng = np.random.default_rng(0)
    states = _states(4)
    for i in range(300):
        mask = rng.random(257) < 0.1
        mask[rng.integers(257)] = True
        ep = _Ep(states[i % len(states)])
        a = pol(None, mask, ep)
        assert mask[a]
        p = pol.probs(None, mask, ep)
        assert (p[~mask] == 0).all() and abs(p.sum() - 1) < 1e-5
    greedy = SetPolicy.from_file(tmp_path / "set.npz")
    mask = np.zeros(257, bool)
    mask[[3, 100]] = True
    assert greedy(None, mask, _Ep(states[0])) == 100  # the larger valid logit (the bias ramp), never 256
