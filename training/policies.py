"""The ``agent`` and ``fifo`` policies: plans from a trained model file, numpy only (no torch on this path).

* ``agent``: the actor chooses every action of the episode (schedule action, allocations, skips), greedily
  (argmax over the valid actions), through ``env.episode.window.plan_window`` like every other policy.
* ``fifo``: the paper's "RL - FIFO": the window's jobs in queue order, never skipped or reordered; the
  schedule action and every allocation still come from the actor (skip is taken away from its choices).

Which model: the one given (a path or a loaded model), else the model that ships for the node being planned
(``shipped_model_for``: ``training/models/*.npz`` whose ``trained_for`` names this node: ``sim:NAME`` for a
simulated node, ``local`` with the same shape, preferring the same node id, for this machine). A model trained
for another node shape or feature set is refused with one line (``agent.errors.ModelFileError``, exit 2).

``env.planners.baselines`` imports this module lazily the first time ``agent`` or ``fifo`` is asked for; importing it
registers both names.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from agent.modelfile import LoadedSetModel, NodeShape, load_set_model
from agent.setpolicy import SetPolicy
from env.episode.window import SET_MAX_WINDOW, plan_window
from env.errors import InputError
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
    """The model file for ``node``, or None: the shipped ones, then the user's (``$COSCHED_HOME/models``).
    Simulated nodes: ``trained_for.name`` equal to the node's name. The local node: ``trained_for.name ==
    'local'`` and the same shape; the same node id wins. Cached until a models folder changes."""
    paths = [p for d in (models_dir(), user_models_dir()) if d.is_dir() for p in sorted(d.glob("*.npz"))]
    stamp = tuple((str(p), p.stat().st_mtime_ns) for p in paths)
    return _model_for(node.model_dump_json(), stamp)


@lru_cache(maxsize=16)
def _model_for(node_json: str, stamp: tuple[tuple[str, int], ...]) -> Path | None:
    from env.node.discover import node_id
    from profiler.features import FEATURE_SET_ID

    node = NodeSpec.model_validate_json(node_json)
    shape = node_shape(node)
    want_id = None if node.name.startswith("sim:") else node_id(node)
    best: tuple[int, Path] | None = None
    for path in (Path(p) for p, _ in stamp):
        try:
            meta = load_set_model(path).meta
        except Exception:  # noqa: BLE001 - a broken file in the folder is skipped here, refused when named
            continue
        tf = meta.trained_for
        if meta.feature_set != FEATURE_SET_ID or tf.shape != shape:
            continue
        if node.name.startswith("sim:"):
            score = 2 if tf.name == node.name else -1
        else:
            score = -1 if tf.name.startswith("sim:") else (2 if tf.node_id == want_id else 1)
        if score > 0 and (best is None or score > best[0]):
            best = (score, path)
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
                             f"`cosched train --backend {'sim --node ' + node.name if node.name.startswith('sim:') else 'real'}` "
                             "and pass --model, or choose a baseline with --policy greedy")
        model = found
    return load_set_model(model, expect_node_shape=node_shape(node), expect_feature_set=FEATURE_SET_ID)


class AgentPolicy:
    """``agent`` (or ``fifo``) with a model: a path, a loaded model, or None for the shipped one of the node."""

    name = "agent"
    fifo = False

    def __init__(self, model: str | os.PathLike[str] | LoadedSetModel | None = None) -> None:
        self.model_arg = model
        self._loaded: dict[str, LoadedSetModel] = {}
        self._pipelines: dict[str, Any] = {}
        self._choosers: dict[int, Any] = {}  # keyed by the loaded model held in _loaded
        self._node_keys: dict[int, tuple[NodeSpec, str]] = {}  # id(node) -> (node, its JSON): see _node_key

    def _node_key(self, node: NodeSpec) -> str:
        """The node's JSON, the key of the caches below, serialised once per node object (every plan asks;
        load_node hands out one cached object a spec, which nobody mutates). The object is kept alive with its
        entry so its id is not reused while the entry stands."""
        hit = self._node_keys.get(id(node))
        if hit is not None and hit[0] is node:
            return hit[1]
        if len(self._node_keys) > 16:
            self._node_keys.clear()
        key = node.model_dump_json()
        self._node_keys[id(node)] = (node, key)
        return key

    def model_for(self, node: NodeSpec) -> LoadedSetModel:
        key = self._node_key(node)
        if key not in self._loaded:
            self._loaded[key] = load_for_node(self.model_arg, node)
        return self._loaded[key]

    def pipeline(self, node: NodeSpec) -> Any:
        """The model's fitted feature pipeline (profiler.features.FeaturePipeline), or None when it has none."""
        from profiler.features import FeaturePipeline

        key = self._node_key(node)
        if key not in self._pipelines:  # one object per model and node: planners cache providers on it
            doc = self.model_for(node).meta.feature_pipeline
            self._pipelines[key] = FeaturePipeline.from_dict(doc) if doc else None
        return self._pipelines[key]

    def plan(self, window: Window, ctx: Any) -> Plan:
        m = self.model_for(ctx.node)
        meta = m.meta
        if window.max_concurrency > meta.max_concurrency >= len(ctx.node.cpus):
            # every co-running job has CPUs of its own, so this node never runs more than its CPUs' worth together:
            # a model trained up to that (make run's, on a 2-CPU node) plans the window with that Cmax
            window = window.model_copy(update={"max_concurrency": len(ctx.node.cpus)})
        if window.max_concurrency > meta.max_concurrency:
            raise InputError(f"max_concurrency {window.max_concurrency} is above the limit of the model "
                             f"({meta.max_concurrency}, trained for {meta.trained_for.name}): lower it or train a model with --cmaxes up to it")
        ref = ModelRef(id=meta.model_id, trained_for=meta.trained_for.name)
        # one episode for any W up to the model's, the jobs as a set
        return plan_window(window, ctx.node, ctx.provider, self.chooser(m), policy=self.name,
                           window_size=min(meta.max_window, SET_MAX_WINDOW), pin_runtime=ctx.pin_runtime,
                           canonical=True, model=ref).plan

    def agent_chooser(self, m: LoadedSetModel) -> SetPolicy:
        """The actor of ``m`` as an episode chooser (``SetPolicy``), made once per loaded model."""
        chooser = self._choosers.get(id(m))
        if chooser is None:
            chooser = self._choosers[id(m)] = SetPolicy(m, fifo=self.fifo)
        return chooser  # type: ignore[no-any-return]

    def chooser(self, m: LoadedSetModel) -> Any:
        """The chooser ``plan`` plans with (``agent-search`` wraps the agent's in its search)."""
        return self.agent_chooser(m)


class FifoPolicy(AgentPolicy):
    name = "fifo"
    fifo = True


def agent_policy(name: str, model: str | os.PathLike[str] | LoadedSetModel | None = None) -> AgentPolicy:
    if name not in ("agent", "fifo"):
        raise InputError(f"{name!r} is not a policy that uses a model (agent, fifo)")
    if isinstance(model, LoadedSetModel):
        # The service holds its loaded model for its lifetime: one policy object per model object.
        key = (name, id(model))
        hit = _BY_LOADED.get(key)
        if hit is None or hit[0] is not model:
            if len(_BY_LOADED) > 32:
                _BY_LOADED.clear()
            hit = _BY_LOADED[key] = (model, (AgentPolicy if name == "agent" else FifoPolicy)(model))
        return hit[1]
    if model is None:  # the shipped model, looked up per node when planning (callers who know the node pass its path)
        return (AgentPolicy if name == "agent" else FifoPolicy)(None)
    # A policy object caches its loaded model (hash-checked once), pipeline and chooser: keep one per model
    # file, refreshed when the file changes.
    try:
        stamp = os.stat(model).st_mtime_ns
    except OSError:
        stamp = -1
    return _cached_policy(name, os.fspath(model), stamp)


_BY_LOADED: dict[tuple[str, int], tuple[LoadedSetModel, "AgentPolicy"]] = {}


@lru_cache(maxsize=32)
def _cached_policy(name: str, model: str, _stamp: int) -> AgentPolicy:
    return (AgentPolicy if name == "agent" else FifoPolicy)(model)


def _register() -> None:
    from env.planners.baselines import register_policy

    register_policy("agent", AgentPolicy)
    register_policy("fifo", FifoPolicy)


_register()

__all__ = ["AgentPolicy", "FifoPolicy", "agent_policy", "shipped_model_for", "load_for_node", "node_shape", "MODELS_DIR"]
