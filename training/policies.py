"""The ``agent`` and ``fifo`` policies: plans from a trained model file, numpy only (no torch on this path).

* ``agent``: the actor chooses every action of the episode (schedule action, allocations, skips), greedily
  (argmax over the valid actions), through ``env.episode.planning.plan_window`` like every other policy.
* ``fifo``: the paper's "RL - FIFO": the window's jobs in queue order, never skipped or reordered; the
  schedule action and every allocation still come from the actor (skip is taken away from its choices).

Which model: the one given (a path or a loaded model), else a user's own model for the node
(``$COSCHED_HOME/models/*.npz``), else the one that ships for it (``training/models/*.npz``, or
``$COSCHED_MODELS_DIR``'s in their place); ``shipped_model_for``: a model whose ``trained_for`` names this node:
``sim:NAME`` for a simulated node, ``local`` with the same shape, preferring the same node id, for this machine. A model trained
for another node shape or feature set is refused with one line (``agent.errors.ModelFileError``, exit 2).

``training.registry.policy_registry`` is every policy by name (the baselines' registry, ``env.planners.registry``,
with these added),
built where it is used: the service and the command line.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from agent.modelfile import LoadedSetModel, NodeShape, load_set_model
from agent.setpolicy import SetPolicy
from env.episode.window import SET_MAX_WINDOW
from env.episode.planning import plan_window
from env.errors import InputError
from env.planners.registry import DEFAULT_POLICY
from env.plan.models import ModelRef, Plan, Window
from env.node.spec import NodeSpec

MODELS_DIR = Path(__file__).resolve().parent / "models"
ENV_MODELS_DIR = "COSCHED_MODELS_DIR"  # another folder of shipped models (tests; a site's own models)


def node_shape(node: NodeSpec) -> NodeShape:
    """What a model must have been trained for (the same rule as the service's GET /model check)."""
    return NodeShape(cpus=len(node.cpus), numa_domains=len(node.numa), l3_domains=len(node.l3))


def models_dir() -> Path:
    return Path(os.environ.get(ENV_MODELS_DIR) or MODELS_DIR)


def user_models_dir() -> Path:
    """Models trained on this node by its users (``make run`` trains one here for a node of a new shape)."""
    from profiler.store import cosched_home

    return cosched_home() / "models"


def local_model_path() -> Path:
    """The model ``make run`` plans this node with: the shipped (or the user's) model for its shape, else the
    file it trains one into first (``$COSCHED_HOME/models/<node id>.npz``)."""
    from env.node.discover import node_id
    from env.sim.nodes import load_node

    node = load_node("local")
    return shipped_model_for(node) or user_models_dir() / f"{node_id(node)}.npz"


def shipped_model_for(node: NodeSpec) -> Path | None:
    """The model file for ``node`` when none is given, or None: a user's own (``$COSCHED_HOME/models``) always
    before a shipped one (``training/models``, or ``$COSCHED_MODELS_DIR`` in its place). Simulated nodes:
    ``trained_for.name`` equal to the node's name. The local node: ``trained_for.name == 'local'`` and the same
    shape; the same node id first. Among a user's equals the newest file, among shipped ones the first by name. Cached until a folder changes."""
    user = user_models_dir()
    paths = [(p, d == user) for d in (models_dir(), user) if d.is_dir() for p in sorted(d.glob("*.npz"))]
    stamp = tuple((str(p), p.stat().st_mtime_ns, own) for p, own in paths)
    return _model_for(node, stamp)


@lru_cache(maxsize=16)
def _model_for(node: NodeSpec, stamp: tuple[tuple[str, int, bool], ...]) -> Path | None:
    from env.node.discover import node_id
    from profiler.features import FEATURE_SET_ID

    shape = node_shape(node)
    want_id = None if node.simulated else node_id(node)
    best: tuple[tuple[bool, int, int], Path] | None = None
    for path, mtime, own in ((Path(p), m, o) for p, m, o in stamp):
        try:
            meta = load_set_model(path).meta
        except Exception:  # noqa: BLE001 - a broken file in the folder is skipped here, refused when named
            continue
        tf = meta.trained_for
        if meta.feature_set != FEATURE_SET_ID or tf.shape != shape:
            continue
        if node.simulated:
            score = 2 if tf.name == node.name else -1
        else:
            score = -1 if tf.name.startswith("sim:") else (2 if tf.node_id == want_id else 1)
        rank = (own, score, mtime if own else 0)  # shipped equals: the first by name, as always
        if score > 0 and (best is None or rank > best[0]):
            best = (rank, path)
    return best[1] if best else None


def load_for_node(model: str | os.PathLike[str] | LoadedSetModel | None, node: NodeSpec) -> LoadedSetModel:
    """The model to plan ``node`` with: the one given (checked against the node's shape and feature set) or
    the shipped one. Raises ModelFileError / InputError (one line) when there is none or it does not fit."""
    from profiler.features import FEATURE_SET_ID

    if isinstance(model, LoadedSetModel):
        loaded = model
        shape = node_shape(node)
        if loaded.meta.trained_for.shape != shape:
            # the same check and message as load_set_model's
            return load_set_model(loaded.path, expect_node_shape=shape, expect_feature_set=FEATURE_SET_ID)
        return loaded
    if model is None:
        found = shipped_model_for(node)
        if found is None:
            raise InputError(f"no trained model for node {node.name!r} ({node_shape(node).describe()}): train one with "
                             f"`cosched train --backend {'sim --node ' + node.name if node.simulated else 'real'}` "
                             "and pass --model, or choose a baseline with --policy greedy")
        model = found
    return load_set_model(model, expect_node_shape=node_shape(node), expect_feature_set=FEATURE_SET_ID)


class AgentPolicy:
    """``agent`` (or ``fifo``) with a model: a path, a loaded model, or None for the shipped one of the node."""

    name = "agent"
    fifo = False

    def __init__(self, model: str | os.PathLike[str] | LoadedSetModel | None = None) -> None:
        self.model_arg = model
        self._loaded: dict[NodeSpec, LoadedSetModel] = {}
        self._pipelines: dict[NodeSpec, Any] = {}
        self._choosers: dict[LoadedSetModel, SetPolicy] = {}  # one chooser a loaded model (held in _loaded)

    def model_for(self, node: NodeSpec) -> LoadedSetModel:
        if node not in self._loaded:
            self._loaded[node] = load_for_node(self.model_arg, node)
        return self._loaded[node]

    def pipeline(self, node: NodeSpec) -> Any:
        """The model's fitted feature pipeline (profiler.features.FeaturePipeline), or None when it has none."""
        from profiler.features import FeaturePipeline

        if node not in self._pipelines:  # one object per model and node: planners cache providers on it
            doc = self.model_for(node).meta.feature_pipeline
            self._pipelines[node] = FeaturePipeline.from_dict(doc) if doc else None
        return self._pipelines[node]

    def prepare(self, window: Window, node: NodeSpec) -> tuple[LoadedSetModel, Window, ModelRef, int]:
        """The model for ``node``, the window as it will be planned (Cmax checked against the model's), the plan's
        model reference and the episode's window size."""
        m = self.model_for(node)
        meta = m.meta
        if window.max_concurrency > meta.max_concurrency >= len(node.cpus):
            # every co-running job has CPUs of its own, so this node never runs more than its CPUs' worth together:
            # a model trained up to that (make run's, on a 2-CPU node) plans the window with that Cmax
            window = window.model_copy(update={"max_concurrency": len(node.cpus)})
        if window.max_concurrency > meta.max_concurrency:
            raise InputError(f"max_concurrency {window.max_concurrency} is above the limit of the model "
                             f"({meta.max_concurrency}, trained for {meta.trained_for.name}): lower it or train a model with --cmaxes up to it")
        ref = ModelRef(id=meta.model_id, trained_for=meta.trained_for.name)
        return m, window, ref, min(meta.max_window, SET_MAX_WINDOW)  # one episode for any W up to the model's

    def plan(self, window: Window, ctx: Any, **notes: Any) -> Plan:
        """The actor's plan (``notes``: more of the plan's fields, e.g. why another policy fell back to it)."""
        m, window, ref, window_size = self.prepare(window, ctx.node)
        return plan_window(window, ctx.node, ctx.provider, self.agent_chooser(m), policy=notes.pop("policy", self.name),
                           window_size=window_size, pin_runtime=ctx.pin_runtime, canonical=True, model=ref,
                           **notes).plan

    def agent_chooser(self, m: LoadedSetModel) -> SetPolicy:
        """The actor of ``m`` as an episode chooser (``SetPolicy``), made once per loaded model."""
        chooser = self._choosers.get(m)
        if chooser is None:
            chooser = self._choosers[m] = SetPolicy(m, fifo=self.fifo)
        return chooser

class FifoPolicy(AgentPolicy):
    name = "fifo"
    fifo = True


def agent_policy(name: str, model: str | os.PathLike[str] | LoadedSetModel | None = None) -> AgentPolicy:
    if name not in ("agent", "fifo"):
        raise InputError(f"{name!r} is not a policy that uses a model (agent, fifo)")
    if isinstance(model, LoadedSetModel):  # the service holds its loaded model for its lifetime
        return _cached_policy(name, model, 0)
    if model is None:  # the shipped model, looked up per node when planning (callers who know the node pass its path)
        return (AgentPolicy if name == "agent" else FifoPolicy)(None)
    # A policy object caches its loaded model (hash-checked once), pipeline and chooser: keep one per model
    # file, refreshed when the file changes.
    try:
        stamp = os.stat(model).st_mtime_ns
    except OSError:
        stamp = -1
    return _cached_policy(name, os.fspath(model), stamp)


@lru_cache(maxsize=32)
def _cached_policy(name: str, model: str | LoadedSetModel, _stamp: int) -> AgentPolicy:
    return (AgentPolicy if name == "agent" else FifoPolicy)(model)


MODEL_POLICIES = ("agent", "fifo", "agent-search")


def default_policy(node: NodeSpec, model: object | None = None) -> str:
    """``agent-search`` when a model is given or ships for ``node`` and the node has a node model to score plans on
    (a simulated node); ``agent`` with a model but no node model (the real node); else the baseline default."""
    from env.planners.scoring import node_scorer

    if model is None and shipped_model_for(node) is None:
        return DEFAULT_POLICY
    return "agent-search" if node_scorer(node) is not None else "agent"


__all__ = ["AgentPolicy", "FifoPolicy", "agent_policy", "default_policy", "MODEL_POLICIES", "shipped_model_for", "load_for_node", "node_shape", "MODELS_DIR"]
