"""The set-encoder network (architecture ``set-attention-v1``) in numpy: its shape, its parameter names and its
forward pass for one state. No torch here: the service plans with this; ``agent.setnet_torch`` is the same
network in torch for training, with the same parameter names, and a test checks both give the same logits.

Input (any window, any Cmax; the episode builds it, ``env.episode.window.Episode.set_observation``):
* ``tokens`` (n, d_token): one row a job still in play (its features and status values), in any order;
* ``context`` (d_context,): the open group, Cmax, the schedule choice, counts;
* ``current``: the index of the current job's token, or -1 at the schedule step.

Network (after Kool et al.'s attention model, without positions, so no job's place in the queue matters):
every token is embedded and the embedded context added to it; ``layers`` pre-norm blocks of multi-head
self-attention and a ReLU feed-forward follow, then a final layer norm. The head reads the current job's
embedding (zeros at the schedule step), the mean of all embeddings and the context, and gives 257 logits
(one per action of env.plan.actions). Permuting the tokens permutes nothing in the output.

Factored actions (``n_factors`` > 0): besides one logit per action, the head scores each *option* (a core
fraction, a way fraction, a bandwidth cap, a split, an affinity, a memory policy, skip), and an action's logit
adds the scores of its options: ``head2(z) + head_factors(z) @ action_factors.T``. ``action_factors`` (n_actions,
n_factors) is the 0/1 incidence of actions and options, made by the trainer from env.plan.actions and stored with the
weights (this module knows nothing of the encoding). Why: 250 job actions are 5 × 5 × 5 × 2 options; a critic with
one free output each must see every action to learn it, one that scores options learns "half the cores is good
here" once for the 50 actions that share it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence, TypeVar

import numpy as np

ARCHITECTURE = "set-attention-v1"
LN_EPS = 1e-5
PAD_SCORE = -1e9  # the attention score of a padding token (finite: a row of padding only stays a number)
_S = TypeVar("_S", bound="NetShape")


class NetShape:
    """What the networks' shapes share: whole-number fields, a JSON form (the model file's metadata), heads that
    divide the width."""

    d_model: int
    heads: int

    def __post_init__(self) -> None:
        if self.d_model % self.heads:
            raise ValueError(f"d_model {self.d_model} is not a multiple of heads {self.heads}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls: type[_S], d: Mapping[str, Any]) -> _S:
        return cls(**{k: int(v) for k, v in d.items()})


@dataclass(frozen=True)
class SetNetShape(NetShape):
    """Everything that fixes the parameter shapes (stored in the model file's metadata)."""

    d_token: int
    d_context: int
    d_model: int = 64
    heads: int = 4
    layers: int = 2
    d_ff: int = 128
    d_head_hidden: int = 128
    n_actions: int = 257
    n_factors: int = 0  # > 0: the head also scores the actions' options (see module doc)

    def param_shapes(self) -> dict[str, tuple[int, ...]]:
        """name -> shape of every parameter (torch's Linear layout: weight (out, in))."""
        d, f = self.d_model, self.d_ff
        out: dict[str, tuple[int, ...]] = {
            "embed_token.weight": (d, self.d_token), "embed_token.bias": (d,),
            "embed_context.weight": (d, self.d_context), "embed_context.bias": (d,),
        }
        for i in range(self.layers):
            p = f"blocks.{i}."
            out.update({p + "norm1.weight": (d,), p + "norm1.bias": (d,),
                        p + "qkv.weight": (3 * d, d), p + "qkv.bias": (3 * d,),
                        p + "out.weight": (d, d), p + "out.bias": (d,),
                        p + "norm2.weight": (d,), p + "norm2.bias": (d,),
                        p + "ff1.weight": (f, d), p + "ff1.bias": (f,),
                        p + "ff2.weight": (d, f), p + "ff2.bias": (d,)})
        out.update({"norm.weight": (d,), "norm.bias": (d,),
                    "head1.weight": (self.d_head_hidden, 2 * d + self.d_context), "head1.bias": (self.d_head_hidden,),
                    "head2.weight": (self.n_actions, self.d_head_hidden), "head2.bias": (self.n_actions,)})
        if self.n_factors:
            out.update({"head_factors.weight": (self.n_factors, self.d_head_hidden), "head_factors.bias": (self.n_factors,),
                        "action_factors": (self.n_actions, self.n_factors)})
        return out


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    # ufunc reductions in place: ndarray.mean's Python wrapper cost more than the arithmetic here (planning path)
    d = x.shape[-1]
    xc = x - np.add.reduce(x, axis=-1, keepdims=True) / d
    var = np.add.reduce(xc * xc, axis=-1, keepdims=True) / d
    xc /= np.sqrt(var + LN_EPS)
    xc *= w
    xc += b
    return xc


def _linear(x: np.ndarray, p: Mapping[str, np.ndarray], name: str) -> np.ndarray:
    return x @ p[name + ".weight"].T + p[name + ".bias"]


def set_logits(shape: SetNetShape, params: Mapping[str, np.ndarray], tokens: np.ndarray, context: np.ndarray,
               current: int) -> np.ndarray:
    """The 257 logits for one state (float32)."""
    return set_logits_many(shape, params, [(tokens, context, current)])[0]


def set_logits_many(shape: SetNetShape, params: Mapping[str, np.ndarray],
                    states: Sequence[tuple[np.ndarray, np.ndarray, int]]) -> np.ndarray:
    """The logits (len(states), 257) of several (tokens, context, current) states in one pass: the tokens padded to
    the longest state's, padding masked out of the attention (``PAD_SCORE``) and of the mean, as the torch network
    does. One state takes exactly the unpadded arithmetic."""
    B = len(states)
    N = max([t.shape[0] for t, _, _ in states] + [0])
    d, H = shape.d_model, shape.heads
    dh = d // H
    x = np.zeros((B, N, shape.d_token), np.float32)
    counts = np.array([t.shape[0] for t, _, _ in states])
    for i, (t, _, _) in enumerate(states):
        x[i, : t.shape[0]] = t
    c = np.stack([np.asarray(ctx, dtype=np.float32) for _, ctx, _ in states])
    padded = bool((counts < N).any())
    valid = np.arange(N)[None, :] < counts[:, None]  # (B, N)
    h = _linear(x, params, "embed_token") + _linear(c, params, "embed_context")[:, None, :]  # (B, N, d)
    for i in range(shape.layers):
        p = f"blocks.{i}."
        if N:
            y = _layer_norm(h, params[p + "norm1.weight"], params[p + "norm1.bias"])
            qkv = _linear(y, params, p + "qkv").reshape(B, N, 3, H, dh).transpose(2, 0, 3, 1, 4)  # (3, B, H, N, dh)
            q, k, v = qkv[0], qkv[1], qkv[2]
            s = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(dh))  # (B, H, N, N)
            if padded:
                s = np.where(valid[:, None, None, :], s, np.float32(PAD_SCORE))
            s = s - s.max(axis=-1, keepdims=True)
            a = np.exp(s)
            a /= a.sum(axis=-1, keepdims=True)
            att = (a @ v).transpose(0, 2, 1, 3).reshape(B, N, d)
            h = h + _linear(att, params, p + "out")
            y = _layer_norm(h, params[p + "norm2.weight"], params[p + "norm2.bias"])
            h = h + _linear(np.maximum(_linear(y, params, p + "ff1"), 0.0), params, p + "ff2")
    h = _layer_norm(h, params["norm.weight"], params["norm.bias"])
    cur = np.zeros((B, d), np.float32)
    pooled = np.zeros((B, d), np.float32)
    for i, (_, _, k) in enumerate(states):
        n = int(counts[i])
        if 0 <= k < n:
            cur[i] = h[i, k]
        if n:
            pooled[i] = np.add.reduce(h[i, :n], axis=0) / n
    z = np.maximum(_linear(np.concatenate([cur, pooled, c], axis=1), params, "head1"), 0.0)
    out = _linear(z, params, "head2")
    if shape.n_factors:
        out = out + _linear(z, params, "head_factors") @ params["action_factors"].T
    return out.astype(np.float32)


def check_params(shape: SetNetShape, params: Mapping[str, np.ndarray]) -> str | None:
    """None when ``params`` are exactly this shape's parameters (float32, finite); else what is wrong."""
    return check_arrays(shape.param_shapes(), params)


def check_arrays(want: Mapping[str, tuple[int, ...]], params: Mapping[str, np.ndarray], what: str = "") -> str | None:
    """None when ``params`` are exactly the arrays ``want`` names (float32, those shapes, finite); else what is
    wrong (``what`` names whose parameters they are)."""
    if set(params) != set(want):
        missing, extra = sorted(set(want) - set(params)), sorted(set(params) - set(want))
        return f"{what}parameters missing {missing[:3]} / unexpected {extra[:3]}"
    for name, s in want.items():
        a = params[name]
        if a.dtype != np.float32 or a.shape != s:
            return f"{what}parameter {name} is {a.dtype} {a.shape}, expected float32 {s}"
        if not np.isfinite(a).all():
            return f"{what}parameter {name} holds NaN or infinite values"
    return None


__all__ = ["ARCHITECTURE", "SetNetShape", "set_logits", "set_logits_many", "check_params", "check_arrays"]
