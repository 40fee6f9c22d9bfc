"""The stream network (architecture ``stream-attention-v1``) in numpy: its shape, parameter names and forward pass
for one state. No torch here (serving plans with this); ``agent.streamnet_torch`` is the same network in torch for
training, with the same parameter names, and a test checks both give the same logits.

Input (one event of a job stream; ``env.episode.stream_gym.observe`` builds it):
* ``tokens`` (q + r, d_token): the q queued jobs the decision chooses among (in queue order), then the r running jobs;
* ``context`` (d_context,): the node now (free CPUs, places, Cmax, queue, the objective);
* ``options`` (K, d_option): the K allocation options of this event (size, domains, memory policy);
* ``pairs`` (q, K, d_pair): each queued job on each option (the node model's view of that start).

Network: every token is embedded and the embedded context added to it; ``layers`` pre-norm blocks of multi-head
self-attention and a ReLU feed-forward follow (no positions: the queue order is a token feature), then a final layer
norm. Two means pool the queued and the running embeddings. The logit of starting queued job i on option k is
``out · relu(tok·h_i + pool·[mean_q, mean_r, context] + opt·options_k + pair·pairs_ik + b)``: one head scores every
(job, option), however many there are (any window, any Cmax). The logit of "nothing more now" is a second head over the
pools and the context. Output: q x K logits (row-major: job i, option k at i·K + k), then "nothing".

The same network is the actor (the logits) and each critic (the same numbers read as Q-values).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from agent.setnet import LN_EPS, NetShape, _layer_norm, _linear

ARCHITECTURE = "stream-attention-v1"


@dataclass(frozen=True)
class StreamNetShape(NetShape):
    """Everything that fixes the parameter shapes (stored in the model file's metadata)."""

    d_token: int
    d_context: int
    d_option: int
    d_pair: int
    d_model: int = 32
    heads: int = 4
    layers: int = 2
    d_ff: int = 64
    d_head_hidden: int = 64

    def param_shapes(self) -> dict[str, tuple[int, ...]]:
        """name -> shape of every parameter (torch's Linear layout: weight (out, in))."""
        d, f, hh = self.d_model, self.d_ff, self.d_head_hidden
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
        pool = 2 * d + self.d_context
        out.update({"norm.weight": (d,), "norm.bias": (d,),
                    "head_tok.weight": (hh, d), "head_tok.bias": (hh,),
                    "head_pool.weight": (hh, pool), "head_pool.bias": (hh,),
                    "head_opt.weight": (hh, self.d_option), "head_opt.bias": (hh,),
                    "head_pair.weight": (hh, self.d_pair), "head_pair.bias": (hh,),
                    "head_out.weight": (1, hh), "head_out.bias": (1,),
                    "none1.weight": (hh, pool), "none1.bias": (hh,),
                    "none2.weight": (1, hh), "none2.bias": (1,)})
        return out


def stream_logits(shape: StreamNetShape, params: Mapping[str, np.ndarray], tokens: np.ndarray, n_queue: int,
                  context: np.ndarray, options: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """The q·K + 1 logits of one state (float32): job i on option k at i·K + k, "nothing" last."""
    n = tokens.shape[0]
    d, H = shape.d_model, shape.heads
    dh = d // H
    c = np.asarray(context, np.float32)
    h = _linear(np.asarray(tokens, np.float32), params, "embed_token") + _linear(c, params, "embed_context")[None, :]
    for i in range(shape.layers):
        p = f"blocks.{i}."
        if n:
            y = _layer_norm(h, params[p + "norm1.weight"], params[p + "norm1.bias"])
            qkv = _linear(y, params, p + "qkv").reshape(n, 3, H, dh).transpose(1, 2, 0, 3)  # (3, H, n, dh)
            s = qkv[0] @ qkv[1].transpose(0, 2, 1) / np.float32(np.sqrt(dh))
            s = s - s.max(axis=-1, keepdims=True)
            a = np.exp(s)
            a /= a.sum(axis=-1, keepdims=True)
            att = (a @ qkv[2]).transpose(1, 0, 2).reshape(n, d)
            h = h + _linear(att, params, p + "out")
            y = _layer_norm(h, params[p + "norm2.weight"], params[p + "norm2.bias"])
            h = h + _linear(np.maximum(_linear(y, params, p + "ff1"), 0.0), params, p + "ff2")
    h = _layer_norm(h, params["norm.weight"], params["norm.bias"]) if n else h
    q = int(n_queue)
    mq = h[:q].mean(axis=0) if q else np.zeros(d, np.float32)
    mr = h[q:].mean(axis=0) if n > q else np.zeros(d, np.float32)
    pool = np.concatenate([mq, mr, c])
    z = (_linear(h[:q], params, "head_tok")[:, None, :] + _linear(pool, params, "head_pool")[None, None, :]
         + _linear(np.asarray(options, np.float32), params, "head_opt")[None, :, :]
         + _linear(np.asarray(pairs, np.float32), params, "head_pair"))  # (q, K, hh)
    start = _linear(np.maximum(z, 0.0), params, "head_out")[..., 0].reshape(-1)
    nothing = _linear(np.maximum(_linear(pool, params, "none1"), 0.0), params, "none2")
    return np.concatenate([start, nothing]).astype(np.float32)


__all__ = ["ARCHITECTURE", "StreamNetShape", "stream_logits", "LN_EPS"]
