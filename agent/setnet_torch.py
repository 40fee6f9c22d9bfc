"""The set-encoder network of ``agent.setnet`` in torch, for training: the same parameters (names and shapes from
``SetNetShape.param_shapes``) and the same arithmetic, on a padded batch of states. ``export`` gives the numpy
parameters the model file stores and ``agent.setnet.set_logits`` reads.

A batch: ``tokens`` (B, N, d_token) padded, ``valid`` (B, N) bool (False for padding), ``context`` (B, d_context),
``current`` (B,) long (-1: no current job, the schedule step).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch
from torch import nn

from agent.setnet import LN_EPS, PAD_SCORE, SetNetShape


class SetNet(nn.Module):
    def __init__(self, shape: SetNetShape) -> None:
        super().__init__()
        self.shape = shape
        d, f = shape.d_model, shape.d_ff
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
        self.head1 = nn.Linear(2 * d + shape.d_context, shape.d_head_hidden)
        self.head2 = nn.Linear(shape.d_head_hidden, shape.n_actions)
        if shape.n_factors:
            self.head_factors = nn.Linear(shape.d_head_hidden, shape.n_factors)
            # a constant (the trainer sets it from the action encoding): saved with the weights, never trained
            self.register_buffer("action_factors", torch.zeros(shape.n_actions, shape.n_factors))

    def forward(self, tokens: torch.Tensor, valid: torch.Tensor, context: torch.Tensor, current: torch.Tensor) -> torch.Tensor:
        B, N, _ = tokens.shape
        d, H = self.shape.d_model, self.shape.heads
        dh = d // H
        h = self.embed_token(tokens) + self.embed_context(context)[:, None, :]
        key_pad = (~valid)[:, None, None, :]  # (B, 1, 1, N)
        for blk in self.blocks:
            y = blk.norm1(h)
            qkv = blk.qkv(y).reshape(B, N, 3, H, dh).permute(2, 0, 3, 1, 4)  # (3, B, H, N, dh)
            q, k, v = qkv[0], qkv[1], qkv[2]
            s = (q @ k.transpose(-1, -2)) / math.sqrt(dh)
            s = s.masked_fill(key_pad, PAD_SCORE)
            att = (torch.softmax(s, dim=-1) @ v).permute(0, 2, 1, 3).reshape(B, N, d)
            h = h + blk.out(att)
            h = h + blk.ff2(torch.relu(blk.ff1(blk.norm2(h))))
        h = self.norm(h)
        vf = valid.to(h.dtype)[:, :, None]
        pooled = (h * vf).sum(1) / vf.sum(1).clamp(min=1.0)
        has = current >= 0
        idx = current.clamp(min=0)
        cur = h[torch.arange(B), idx] * has.to(h.dtype)[:, None]
        z = torch.relu(self.head1(torch.cat([cur, pooled, context], dim=-1)))
        out = self.head2(z)
        if self.shape.n_factors:
            out = out + self.head_factors(z) @ self.action_factors.T
        return out

    def export(self) -> dict[str, np.ndarray]:
        """The parameters as float32 numpy arrays, named as ``SetNetShape.param_shapes`` names them."""
        return {k: v.detach().cpu().numpy().astype(np.float32).copy() for k, v in self.state_dict().items()}

    def load_numpy(self, params: dict[str, np.ndarray]) -> None:
        self.load_state_dict({k: torch.from_numpy(np.asarray(v, np.float32).copy()) for k, v in params.items()})


def collate(states: Sequence[tuple[np.ndarray, np.ndarray, int]], d_token: int) -> tuple[torch.Tensor, ...]:
    """(tokens, context, current) states -> the padded batch tensors (tokens, valid, context, current)."""
    B = len(states)
    N = max(1, max(t.shape[0] for t, _, _ in states))
    tok = np.zeros((B, N, d_token), np.float32)
    valid = np.zeros((B, N), np.bool_)
    for i, (t, _, _) in enumerate(states):
        tok[i, : t.shape[0]] = t
        valid[i, : t.shape[0]] = True
    ctx = np.stack([c for _, c, _ in states]).astype(np.float32)
    cur = np.array([k for _, _, k in states], np.int64)
    return torch.from_numpy(tok), torch.from_numpy(valid), torch.from_numpy(ctx), torch.from_numpy(cur)


__all__ = ["SetNet", "collate"]
