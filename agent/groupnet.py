"""The group-cost network (architecture ``group-cost-v1``) in numpy: its shape, parameter names and forward pass.
No torch here (the service plans with it); ``agent.groupnet_torch`` is the same network in torch for training, with
the same parameter names, and a test checks both give the same values.

It reads a *group* of 1..``max_group`` jobs (their feature vectors, in any order) and predicts, on the node it was
trained for:

* ``V(group)``: the group's best log gain over time sharing, ``log(sum of solo times / makespan)``, over the options
  it was trained on (core fractions per member, schedule);
* ``Q(group, schedule, cores)``: the log gain with one schedule and one core fraction per member.

Network: each member is embedded (two layers), one multi-head self-attention block and a feed-forward layer (both
residual) mix the members; V reads the sum, the max and the count of the member embeddings; Q adds the embedding of
each member's core option to its embedding, passes it through two layers, pools the same way and reads it with the
schedule's embedding. Permuting the members permutes nothing in the output.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from agent.setnet import NetShape, _linear, check_arrays

GROUP_ARCHITECTURE = "group-cost-v1"
NEG = np.float32(-1e4)  # a padding member's value under the max-pool


@dataclass(frozen=True)
class GroupNetShape(NetShape):
    d_feature: int
    d_model: int = 64
    heads: int = 4
    n_cores: int = 5  # core options a member can take
    n_schedules: int = 2  # schedule options of a group
    max_group: int = 4

    def param_shapes(self) -> dict[str, tuple[int, ...]]:
        d = self.d_model
        pooled = 2 * d + 1
        layers = {"embed1": (d, self.d_feature), "embed2": (d, d), "qkv": (3 * d, d), "out": (d, d),
                  "ff1": (d, d), "ff2": (d, d), "v1": (d, pooled), "v2": (1, d),
                  "q_tok1": (d, d), "q_tok2": (d, d), "q1": (d, pooled + d), "q2": (1, d)}
        out: dict[str, tuple[int, ...]] = {}
        for name, (o, i) in layers.items():
            out[name + ".weight"] = (o, i)
            out[name + ".bias"] = (o,)
        out["core.weight"] = (self.n_cores, d)
        out["schedule.weight"] = (self.n_schedules, d)
        return out


def _pool(h: np.ndarray, m: np.ndarray) -> np.ndarray:
    """(..., K, d), (..., K) 0/1 -> (..., 2d + 1): sum, max and count of the members."""
    mm = m[..., None]
    return np.concatenate([(h * mm).sum(-2), np.where(mm > 0, h, NEG).max(-2), m.sum(-1, keepdims=True)], -1)


def encode(shape: GroupNetShape, p: Mapping[str, np.ndarray], x: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Member embeddings (G, K, d) of groups ``x`` (G, K, d_feature) with members ``m`` (G, K) 1/0."""
    G, K, _ = x.shape
    d, H = shape.d_model, shape.heads
    dh = d // H
    h = _linear(np.maximum(_linear(x, p, "embed1"), 0.0), p, "embed2")
    qkv = _linear(h, p, "qkv").reshape(G, K, 3, H, dh).transpose(2, 0, 3, 1, 4)  # (3, G, H, K, dh)
    s = qkv[0] @ qkv[1].transpose(0, 1, 3, 2) / np.float32(np.sqrt(dh))  # (G, H, K, K)
    s = np.where(m[:, None, None, :] > 0, s, np.float32(-1e9))
    s = s - s.max(-1, keepdims=True)
    a = np.exp(s)
    a /= a.sum(-1, keepdims=True)
    h = h + _linear((a @ qkv[2]).transpose(0, 2, 1, 3).reshape(G, K, d), p, "out")
    return (h + _linear(np.maximum(_linear(h, p, "ff1"), 0.0), p, "ff2")).astype(np.float32)


def group_values(shape: GroupNetShape, p: Mapping[str, np.ndarray], h: np.ndarray, m: np.ndarray) -> np.ndarray:
    """V (G,) from ``encode``'s embeddings."""
    return _linear(np.maximum(_linear(_pool(h, m), p, "v1"), 0.0), p, "v2")[..., 0]


def option_values(shape: GroupNetShape, p: Mapping[str, np.ndarray], h: np.ndarray, m: np.ndarray,
                  cores: np.ndarray, schedule: np.ndarray) -> np.ndarray:
    """Q (G, R) of R options per group: ``cores`` (G, R, K) core-option index per member, ``schedule`` (G, R)."""
    # a member's option token depends on the member and its core option only: the G x n_cores x K distinct tokens
    # pass the two layers (as K-row matrices, like an option's own: the same arithmetic, the same float32 values),
    # and the R options gather them
    G, _, K = cores.shape
    tok = h[:, None] + p["core.weight"][None, :, None]  # (G, n_cores, K, d)
    tok = _linear(np.maximum(_linear(tok, p, "q_tok1"), 0.0), p, "q_tok2")
    z = tok[np.arange(G)[:, None, None], cores, np.arange(K)[None, None, :]]  # (G, R, K, d)
    pooled = _pool(z, np.broadcast_to(m[:, None], cores.shape).astype(np.float32))
    q = np.concatenate([pooled, p["schedule.weight"][schedule]], -1)
    return _linear(np.maximum(_linear(q, p, "q1"), 0.0), p, "q2")[..., 0]


def check_group_params(shape: GroupNetShape, params: Mapping[str, np.ndarray]) -> str | None:
    """None when ``params`` are exactly this shape's parameters (float32, finite); else what is wrong."""
    return check_arrays(shape.param_shapes(), params, "group-cost ")


__all__ = ["GROUP_ARCHITECTURE", "GroupNetShape", "encode", "group_values", "option_values", "check_group_params"]
