"""The tiny simulated problem the fine-tuning and lookahead tests train on (three jobs, W = 3, Cmax 2; the
``setup`` fixture in conftest.py), and a random actor of a small shape for it."""

from __future__ import annotations

import numpy as np
import torch

from env.episode.window import RewardConfig
from env.sim.nodes import load_node
from training.setup import sim_setup

NODE = load_node("sim:reference")


def tiny_setup():
    return sim_setup(NODE, window_size=3, cmaxes=(2,), jobs=("EP", "MG", "CG"), n_validation=3, reward=RewardConfig())


def random_actor(obs_dim: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    torch.manual_seed(seed)
    sizes = [obs_dim, 32, 32, 257]
    return [(lin.weight.detach().numpy().copy(), lin.bias.detach().numpy().copy())
            for lin in (torch.nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))]
