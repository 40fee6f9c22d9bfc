"""The group-cost head: one definition, numpy (serving) and torch (training) giving the same values; no member's
place in a group matters; the greedy partition's rules; the model file carrying the head."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from agent.errors import ModelFileError
from agent.groupnet import GROUP_ARCHITECTURE, GroupNetShape, check_group_params, encode, group_values, option_values
from agent.groupnet_torch import GroupNet
from agent.grouping import GroupPlanner
from agent.modelfile import NodeShape, TrainedFor, load_set_model, write_set_model
from agent.setnet import ARCHITECTURE, SetNetShape
from agent.setnet_torch import SetNet

SHAPE = GroupNetShape(d_feature=6, d_model=16, heads=2)


def _params(seed: int = 0) -> dict[str, np.ndarray]:
    torch.manual_seed(seed)
    return GroupNet(SHAPE).export()


def _groups(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(7, 4, 6)).astype(np.float32)
    m = np.array([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 1]],
                 np.float32)
    return x, m, rng.integers(0, 5, (7, 9, 4)), rng.integers(0, 2, (7, 9))


def test_option_values_gathered_member_tokens_are_every_options_own() -> None:
    """option_values passes each (member, core option) token through its layers once and gathers them: to the bit,
    what passing every option's own tokens gives."""
    from agent.setnet import _linear

    p = _params(3)
    x, m, cores, sched = _groups(5)
    h = encode(SHAPE, p, x, m)
    z = h[:, None] + p["core.weight"][cores]  # (G, R, K, d): every option's own tokens
    z = _linear(np.maximum(_linear(z, p, "q_tok1"), 0.0), p, "q_tok2")
    mm = np.broadcast_to(m[:, None], cores.shape).astype(np.float32)[..., None]
    pooled = np.concatenate([(z * mm).sum(-2), np.where(mm > 0, z, np.float32(-1e4)).max(-2), mm[..., 0].sum(-1, keepdims=True)], -1)
    q = np.concatenate([pooled, p["schedule.weight"][sched]], -1)
    want = _linear(np.maximum(_linear(q, p, "q1"), 0.0), p, "q2")[..., 0]
    np.testing.assert_array_equal(option_values(SHAPE, p, h, m, cores, sched), want)


def test_numpy_and_torch_give_the_same_values() -> None:
    torch.manual_seed(0)
    net = GroupNet(SHAPE)
    p = net.export()
    assert check_group_params(SHAPE, p) is None
    x, m, c, s = _groups(1)
    h = encode(SHAPE, p, x, m)
    with torch.no_grad():
        ht = net.encode(torch.from_numpy(x), torch.from_numpy(m))
        vt = net.values(ht, torch.from_numpy(m)).numpy()
        qt = net.option_values(ht, torch.from_numpy(m), torch.from_numpy(c), torch.from_numpy(s)).numpy()
    np.testing.assert_allclose(group_values(SHAPE, p, h, m), vt, atol=1e-5)
    np.testing.assert_allclose(option_values(SHAPE, p, h, m, c, s), qt, atol=1e-5)


def test_padding_and_member_order_do_not_matter() -> None:
    p = _params(2)
    x, m, c, s = _groups(3)
    rng = np.random.default_rng(0)
    x = np.where(m[..., None] > 0, x, rng.normal(size=x.shape).astype(np.float32))  # garbage in the padding
    v = group_values(SHAPE, p, encode(SHAPE, p, x, m), m)
    q = option_values(SHAPE, p, encode(SHAPE, p, x, m), m, c, s)
    x2, c2 = x.copy(), c.copy()
    for g in range(len(x)):  # permute each group's members (and their core options with them)
        k = int(m[g].sum())
        perm = rng.permutation(k)
        x2[g, :k], c2[g, :, :k] = x[g, perm], c[g][:, perm]
    x2 = np.where(m[..., None] > 0, x2, 0.0).astype(np.float32)
    np.testing.assert_allclose(group_values(SHAPE, p, encode(SHAPE, p, x2, m), m), v, atol=1e-4)
    np.testing.assert_allclose(option_values(SHAPE, p, encode(SHAPE, p, x2, m), m, c2, s), q, atol=1e-4)


def test_greedy_partition_takes_the_largest_saving_first_and_keeps_the_open_group_whole() -> None:
    # ranked: {0,1} > {1,2} > {2,3} > singletons
    masks = np.array([0b0011, 0b0110, 0b1100, 0b0001, 0b0010, 0b0100, 0b1000], np.int64)
    assert GroupPlanner.partition(masks, 0b1111) == [0b0011, 0b1100]
    # job 1 already opened a group with job 2: {0,1} and {1} alone are not allowed, {1,2} is
    assert GroupPlanner.partition(masks, 0b1111, forced=0b0110) == [0b0110, 0b0001, 0b1000]
    # only jobs 0, 2, 3 left: {2,3} then {0}
    assert GroupPlanner.partition(masks, 0b1101) == [0b1100, 0b0001]


def _head_meta() -> SimpleNamespace:
    return SimpleNamespace(architecture=GROUP_ARCHITECTURE, net=SHAPE.to_dict(), core_actions=[6, 56, 106, 156, 206],
                           core_cpus=[3, 6, 12, 18, 21], schedule_actions=[0, 3], training={})


def _write(path, group, head) -> None:  # noqa: ANN001
    torch.manual_seed(0)
    shape = SetNetShape(d_token=7, d_context=5, d_model=16, heads=2, layers=1, d_ff=24, d_head_hidden=20)
    write_set_model(path, SetNet(shape).export(), group=group, group_head=head, action_encoding="cosched-actions-v1",
                    architecture=ARCHITECTURE, net=shape.to_dict(), observation="set-v1", max_window=32,
                    max_concurrency=4, trained_for=TrainedFor(name="sim:t", node_id="t", shape=NodeShape(cpus=24, numa_domains=2, l3_domains=2)),
                    feature_set="f")


def test_model_file_round_trips_the_head_and_refuses_a_head_without_its_description(tmp_path) -> None:  # noqa: ANN001
    p = _params(4)
    _write(tmp_path / "m.npz", p, vars(_head_meta()))
    m = load_set_model(tmp_path / "m.npz")
    assert m.meta.group_head is not None and m.meta.group_head.core_cpus == [3, 6, 12, 18, 21]
    assert set(m.group_params) == set(p) and all(np.array_equal(m.group_params[k], p[k]) for k in p)
    _write(tmp_path / "plain.npz", None, None)
    assert load_set_model(tmp_path / "plain.npz").group_params is None
    with pytest.raises(ModelFileError, match="group-cost arrays without a group_head"):
        _write(tmp_path / "bad.npz", p, None)
    with pytest.raises(ModelFileError, match="option tables"):
        _write(tmp_path / "bad.npz", p, {**vars(_head_meta()), "core_cpus": [3, 6]})
