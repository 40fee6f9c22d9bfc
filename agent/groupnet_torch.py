"""The group-cost network of ``agent.groupnet`` in torch, for training: the same parameters (names and shapes from
``GroupNetShape.param_shapes``) and the same arithmetic on a batch of padded groups."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from agent.groupnet import GroupNetShape


def _pool(h: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    mm = m[..., None]
    return torch.cat([(h * mm).sum(-2), torch.where(mm > 0, h, torch.full_like(h, -1e4)).max(-2).values,
                      m.sum(-1, keepdim=True)], -1)


class GroupNet(nn.Module):
    def __init__(self, shape: GroupNetShape) -> None:
        super().__init__()
        self.shape = shape
        d = shape.d_model
        for name, (o, i) in {"embed1": (d, shape.d_feature), "embed2": (d, d), "qkv": (3 * d, d), "out": (d, d),
                             "ff1": (d, d), "ff2": (d, d), "v1": (d, 2 * d + 1), "v2": (1, d),
                             "q_tok1": (d, d), "q_tok2": (d, d), "q1": (d, 3 * d + 1), "q2": (1, d)}.items():
            setattr(self, name, nn.Linear(i, o))
        self.core = nn.Embedding(shape.n_cores, d)
        self.schedule = nn.Embedding(shape.n_schedules, d)

    def encode(self, x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        G, K, _ = x.shape
        d, H = self.shape.d_model, self.shape.heads
        dh = d // H
        h = self.embed2(torch.relu(self.embed1(x)))
        qkv = self.qkv(h).reshape(G, K, 3, H, dh).permute(2, 0, 3, 1, 4)
        s = qkv[0] @ qkv[1].transpose(-1, -2) / math.sqrt(dh)
        s = s.masked_fill(m[:, None, None, :] == 0, -1e9)
        h = h + self.out((torch.softmax(s, -1) @ qkv[2]).permute(0, 2, 1, 3).reshape(G, K, d))
        return h + self.ff2(torch.relu(self.ff1(h)))

    def values(self, h: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        return self.v2(torch.relu(self.v1(_pool(h, m))))[..., 0]

    def option_values(self, h: torch.Tensor, m: torch.Tensor, cores: torch.Tensor, schedule: torch.Tensor) -> torch.Tensor:
        z = self.q_tok2(torch.relu(self.q_tok1(h[:, None] + self.core(cores))))
        pooled = _pool(z, m[:, None].expand(-1, cores.shape[1], -1))
        return self.q2(torch.relu(self.q1(torch.cat([pooled, self.schedule(schedule)], -1))))[..., 0]

    def export(self) -> dict[str, np.ndarray]:
        return {k: v.detach().cpu().numpy().astype(np.float32).copy() for k, v in self.state_dict().items()}

    def load_numpy(self, params: dict[str, np.ndarray]) -> None:
        self.load_state_dict({k: torch.from_numpy(np.asarray(v, np.float32).copy()) for k, v in params.items()})


__all__ = ["GroupNet"]
