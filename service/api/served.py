"""The model seam: what the service plans with (the agent and its model file, or a baseline) and GET /model's document.

Nothing here imports torch or the training stack at start-up: the model is read for numpy inference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from agent.modelfile import SetModelMeta, TrainedFor
from env.node.spec import NodeSpec


class SetNetwork(BaseModel):
    """A set-encoder actor (``cosched-model/2``): job tokens of any window of up to ``window_size`` jobs."""

    kind: Literal["set-encoder"] = "set-encoder"
    architecture: str
    shape: dict[str, int]  # agent.setnet.SetNetShape
    observation: str


class ModelFeatures(BaseModel):
    feature_set: str
    names: list[str]


class ModelInfo(BaseModel):
    """What GET /model shows of the loaded model."""

    id: str
    format: str  # cosched-model/2 (the set encoder)
    path: str
    shipped: bool
    #: where it came from: "given" (--model), "user" ($COSCHED_HOME/models: always before a shipped one) or "shipped"
    source: Literal["given", "user", "shipped"] = "given"
    trained_for: TrainedFor
    window_size: int  # the most jobs planned in one episode: the set model's max_window
    max_concurrency: int
    features: ModelFeatures
    action_encoding: str
    network: SetNetwork
    training: dict[str, Any]

    @classmethod
    def of(cls, loaded: Any, shipped: bool, source: str | None = None) -> ModelInfo:
        """``loaded``: agent.modelfile.LoadedSetModel; ``shipped``: not given by hand (``source``: "user" or
        "shipped", as ``model_source`` tells)."""
        from profiler.features import FEATURE_NAMES

        meta: SetModelMeta = loaded.meta
        network = SetNetwork(architecture=meta.architecture, shape=meta.net, observation=meta.observation)
        source = source or (model_source(loaded.path) if shipped else "given")
        return cls(id=meta.model_id, format=meta.format, path=str(loaded.path), shipped=source == "shipped", source=source,
                   trained_for=meta.trained_for, window_size=meta.max_window, max_concurrency=meta.max_concurrency,
                   features=ModelFeatures(feature_set=meta.feature_set, names=list(FEATURE_NAMES)),
                   action_encoding=meta.action_encoding, network=network, training=meta.training)


class ModelDescription(BaseModel):
    """GET /model: the policy the service plans with, its model (None for a baseline) and why there is none."""

    policy: str
    model: ModelInfo | None
    reason: str | None = None  # left out of the document when there is a model


def model_source(path: Any) -> str:
    """"user" for a model of ``$COSCHED_HOME/models`` (a user's own), else "shipped"."""
    from pathlib import Path

    from training.policies import user_models_dir

    return "user" if Path(path).resolve().parent == user_models_dir().resolve() else "shipped"


@dataclass(frozen=True)
class ServedModel:
    """What the service plans with: the agent and its model file, or a baseline policy when there is none."""

    policy: str
    loaded: Any = None  # agent.modelfile.LoadedSetModel: loaded and checked once, handed to every plan
    info: ModelInfo | None = None  # what GET /model shows of the model
    reason: str | None = None  # why no model is used

    def describe(self) -> ModelDescription:
        return ModelDescription(policy=self.policy, model=self.info, reason=self.reason)

    def describe_json(self) -> str:
        return self.describe().model_dump_json(exclude={"reason"} if self.reason is None else None)


def load_served_model(model_path: str | None, node: NodeSpec) -> ServedModel:
    """The model the service plans with, chosen as ``cosched schedule`` chooses it (``service.planning``): the
    given model file, else the one that ships for this node, else none and the baseline default (``greedy``),
    which GET /model says. The model (either format) is read (numpy, no torch) and checked against this node's
    shape and the feature set once, here; a model that cannot be used is an error at start-up (one line, exit 2).
    """
    from service.planning import MODEL_POLICIES, default_policy

    policy = default_policy(node, model_path)
    if policy not in MODEL_POLICIES:
        return ServedModel(policy=policy, reason=f"no model given (cosched serve --model M) and none ships for node "
                           f"{node.name!r}: plans come from the {policy!r} heuristic")
    from training.policies import load_for_node

    loaded = load_for_node(model_path, node)
    return ServedModel(policy=policy, loaded=loaded, info=ModelInfo.of(loaded, shipped=model_path is None))
