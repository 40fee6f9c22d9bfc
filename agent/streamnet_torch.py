"""The stream network of ``agent.streamnet`` in torch, for training: the same parameters (names and shapes from
``StreamNetShape.param_shapes``) and the same arithmetic, on a padded batch of states. ``export`` gives the numpy
parameters the model file stores and ``agent.streamnet.stream_logits`` reads.

A batch: ``tokens`` (B, Q + R, d_token): Q queued rows (the padded window), then R running rows; ``valid`` (B, Q + R)
bool (False for padding); ``context`` (B, d_context); ``options`` (B, K, d_option); ``pairs`` (B, Q, K, d_pair).
Output (B, Q·K + 1): job i on option k at i·K + k, "nothing" last; padded slots give numbers that the mask removes.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch
from torch import nn

from agent.setnet import LN_EPS, PAD_SCORE
from agent.streamnet import StreamNetShape


class StreamNet(nn.Module):
    def __init__(self, shape: StreamNetShape) -> None:
        super().__init__()
        self.shape = shape
        d, f, hh = shape.d_model, shape.d_ff, shape.d_head_hidden
        self.embed_token = nn.Linear(shape.d_token, d)
        self.embed_context = nn.Linear(shape.d_context, d)
        self.blocks = nn.ModuleList()
        for _ in range(shape.layers):
            blk = nn.Module()
            blk.norm1 = nn.LayerNorm(d, eps=LN_EPS)
            blk.qkv = nn.Linear(d, 3 * d)
            blk.out = nn.Linear(d, d)
            blk.norm2 = nn.LayerNorm(d, eps=LN_EPS)
            blk.ff1 = nn.Linear(d, f)
            blk.ff2 = nn.Linear(f, d)
            self.blocks.append(blk)
        self.norm = nn.LayerNorm(d, eps=LN_EPS)
        pool = 2 * d + shape.d_context
        self.head_tok = nn.Linear(d, hh)
        self.head_pool = nn.Linear(pool, hh)
        self.head_opt = nn.Linear(shape.d_option, hh)
        self.head_pair = nn.Linear(shape.d_pair, hh)
        self.head_out = nn.Linear(hh, 1)
        self.none1 = nn.Linear(pool, hh)
        self.none2 = nn.Linear(hh, 1)

    def forward(self, tokens: torch.Tensor, valid: torch.Tensor, context: torch.Tensor, options: torch.Tensor,
                pairs: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """The logits (B, Q·K + 1). With ``mask`` (B, Q·K + 1, bool) only the valid starts are scored (the head's
        work is then per valid action, not per slot and option); the others are 0, for the masked softmax to drop."""
        B, N, _ = tokens.shape
        Q = pairs.shape[1]
        d, H = self.shape.d_model, self.shape.heads
        dh = d // H
        h = self.embed_token(tokens) + self.embed_context(context)[:, None, :]
        key_pad = (~valid)[:, None, None, :]
        for blk in self.blocks:
            y = blk.norm1(h)
            qkv = blk.qkv(y).reshape(B, N, 3, H, dh).permute(2, 0, 3, 1, 4)
            s = (qkv[0] @ qkv[1].transpose(-1, -2)) / math.sqrt(dh)
            s = s.masked_fill(key_pad, PAD_SCORE)
            att = (torch.softmax(s, dim=-1) @ qkv[2]).permute(0, 2, 1, 3).reshape(B, N, d)
            h = h + blk.out(att)
            h = h + blk.ff2(torch.relu(blk.ff1(blk.norm2(h))))
        h = self.norm(h)
        vf = valid.to(h.dtype)[:, :, None]
        vq, vr = vf[:, :Q], vf[:, Q:]
        mq = (h[:, :Q] * vq).sum(1) / vq.sum(1).clamp(min=1.0)
        mr = (h[:, Q:] * vr).sum(1) / vr.sum(1).clamp(min=1.0)
        pool = torch.cat([mq, mr, context], dim=-1)
        nothing = self.none2(torch.relu(self.none1(pool)))
        K = options.shape[1]
        if mask is not None:
            b, flat = mask[:, :Q * K].nonzero(as_tuple=True)
            slot, k = flat // K, flat % K
            z = self.head_tok(h[b, slot]) + self.head_pool(pool)[b] + self.head_opt(options[b, k]) + \
                self.head_pair(pairs[b, slot, k])
            start = torch.zeros(B, Q * K, dtype=h.dtype).index_put((b, flat), self.head_out(torch.relu(z))[:, 0])
            return torch.cat([start, nothing], dim=-1)
        z = (self.head_tok(h[:, :Q])[:, :, None, :] + self.head_pool(pool)[:, None, None, :]
             + self.head_opt(options)[:, None, :, :] + self.head_pair(pairs))
        start = self.head_out(torch.relu(z))[..., 0].reshape(B, -1)
        return torch.cat([start, nothing], dim=-1)

    def export(self) -> dict[str, np.ndarray]:
        """The parameters as float32 numpy arrays, named as ``StreamNetShape.param_shapes`` names them."""
        return {k: v.detach().cpu().numpy().astype(np.float32).copy() for k, v in self.state_dict().items()}

    def load_numpy(self, params: dict[str, np.ndarray]) -> None:
        self.load_state_dict({k: torch.from_numpy(np.asarray(v, np.float32).copy()) for k, v in params.items()})


def collate(states: Sequence[tuple[np.ndarray, int, np.ndarray, np.ndarray, np.ndarray]], window: int,
            max_running: int) -> tuple[torch.Tensor, ...]:
    """(tokens, n_queue, context, options, pairs) states -> the padded batch (tokens, valid, context, options,
    pairs), the queue padded to ``window`` rows and the running jobs to ``max_running``."""
    B = len(states)
    t0, _, c0, o0, p0 = states[0]
    tok = np.zeros((B, window + max_running, t0.shape[1]), np.float32)
    valid = np.zeros((B, window + max_running), np.bool_)
    pairs = np.zeros((B, window) + p0.shape[1:], np.float32)
    for i, (t, q, _, _, p) in enumerate(states):
        r = t.shape[0] - q
        tok[i, :q], tok[i, window:window + r] = t[:q], t[q:]
        valid[i, :q], valid[i, window:window + r] = True, True
        pairs[i, :q] = p
    ctx = np.stack([c for _, _, c, _, _ in states]).astype(np.float32)
    opts = np.stack([o for _, _, _, o, _ in states]).astype(np.float32)
    return (torch.from_numpy(tok), torch.from_numpy(valid), torch.from_numpy(ctx), torch.from_numpy(opts),
            torch.from_numpy(pairs))


__all__ = ["StreamNet", "collate"]
