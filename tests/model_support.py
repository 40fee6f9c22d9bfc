"""Model files for tests: a tiny untrained set model, and a file of the earlier MLP format to be refused."""

from __future__ import annotations

from pathlib import Path


def write_tiny_set_model(path: Path, node_name: str = "sim:reference") -> Path:
    """A ``cosched-model/2`` file for a simulated node: a small set encoder at its seeded initial weights (torch's
    initialisation, ``agent.setnet_torch.SetNet``), with the training programs' feature pipeline. Untrained: its
    plans are valid but not good, which is what tests of the plumbing need."""
    import torch

    from agent.modelfile import TrainedFor, write_set_model
    from agent.setnet import ARCHITECTURE, SetNetShape
    from agent.setnet_torch import SetNet
    from env.node.discover import node_id
    from env.episode.window import SET_CONTEXT_NAMES, SET_TOKEN_NAMES
    from env.episode.jobinfo import sim_provider
    from env.sim.nodes import load_node
    from env.sim.catalogue import TRAIN_JOBS
    from profiler.features import FEATURE_SET_ID
    from training.policies import node_shape

    node = load_node(node_name)
    prov = sim_provider(node, tuple(TRAIN_JOBS))
    shape = SetNetShape(d_token=prov.n_features + len(SET_TOKEN_NAMES), d_context=len(SET_CONTEXT_NAMES), d_model=16,
                        heads=2, layers=1, d_ff=16, d_head_hidden=16)
    torch.manual_seed(0)
    write_set_model(path, SetNet(shape).export(), action_encoding="cosched-actions-v1", architecture=ARCHITECTURE,
                    net=shape.to_dict(), observation="set-v1", max_window=32, max_concurrency=4,
                    trained_for=TrainedFor(name=node.name, node_id=node_id(node), shape=node_shape(node)),
                    feature_set=FEATURE_SET_ID, feature_pipeline=prov.pipeline.to_dict(), training={"steps": 0})
    return path


def write_old_mlp_model(path: Path, node_name: str = "sim:reference") -> Path:
    """A file in the earlier MLP format ``cosched-model/1``, built by hand as its writer laid it out (a ``metadata``
    uint8 array of JSON and ``actor.{i}.weight`` / ``actor.{i}.bias`` float32 layers): cosched must refuse it."""
    import json

    import numpy as np

    from env.node.discover import node_id
    from env.sim.nodes import load_node
    from profiler.features import FEATURE_SET_ID

    node = load_node(node_name)
    meta = {"format": "cosched-model/1", "model_id": "sha256:" + "0" * 64, "action_encoding": "cosched-actions-v1",
            "window_size": 6, "max_concurrency": 4, "obs_size": 4, "n_actions": 257, "hidden_sizes": [8],
            "activation": "relu", "trained_for": {"name": node.name, "node_id": node_id(node),
                                                  "shape": {"cpus": len(node.cpus), "numa_domains": len(node.numa),
                                                            "l3_domains": len(node.l3)}},
            "feature_set": FEATURE_SET_ID, "feature_pipeline": {}, "training": {}}
    np.savez(path, metadata=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
             **{"actor.0.weight": np.zeros((8, 4), np.float32), "actor.0.bias": np.zeros(8, np.float32),
                "actor.1.weight": np.zeros((257, 8), np.float32), "actor.1.bias": np.zeros(257, np.float32)})
    return path
