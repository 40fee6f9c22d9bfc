"""Planning a window for the command line and the service: the same episode code, a chosen policy.

Simulated nodes (``sim:NAME``) plan from the simulated catalogue (``env.episode.jobinfo.sim_provider``). The local
node plans from its profile store (profiles keyed by this node's id); the feature pipeline is the model's
when a model is used, else one fitted on the node's stored profiles (the baselines use the raw figures).
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import TYPE_CHECKING

from env.planners.baselines import DEFAULT_POLICY, PlanContext, get_policy
from env.errors import InputError
from env.episode.jobinfo import JobInfoProvider, sim_provider
from env.plan.launch import PINRT_LIB
from env.planners.search import guard_plan
from env.plan.models import Plan, RunReport, Window
from env.sim.nodes import load_node
from env.node.spec import NodeSpec

if TYPE_CHECKING:
    from profiler.features import FeaturePipeline


def provider_for(node: NodeSpec, pipeline: "FeaturePipeline | None" = None) -> JobInfoProvider:
    if node.name.startswith("sim:"):
        return sim_provider(node) if pipeline is None else _sim_with_pipeline(node, pipeline)
    return local_provider(node, pipeline)


_SIM_WITH: dict[tuple[int, int], tuple[NodeSpec, object, JobInfoProvider]] = {}


def _sim_with_pipeline(node: NodeSpec, pipeline: "FeaturePipeline") -> JobInfoProvider:
    """The simulated catalogue scaled by a model's own pipeline (as in its training; no refit, so no
    scikit-learn on the serving path). Cached per node object and pipeline object (load_node hands out one
    object a spec, and pipelines live as long as their model): both are kept alive with their provider, so
    their ids are not reused while the entry stands, and no node is serialised per plan for a key."""
    from env.episode.jobinfo import ProfileProvider

    key = (id(node), id(pipeline))
    hit = _SIM_WITH.get(key)
    if hit is None or hit[0] is not node or hit[1] is not pipeline:
        if len(_SIM_WITH) > 16:  # bounded: nodes and pipelines normally live as long as the process
            _SIM_WITH.clear()
        profiles = _sim_profiles(node.model_dump_json())
        hit = (node, pipeline, ProfileProvider(profiles.get, pipeline, what=f"job in the simulated catalogue of {node.name}"))
        _SIM_WITH[key] = hit
    return hit[2]


@lru_cache(maxsize=8)
def _sim_profiles(node_json: str) -> dict:
    from env.sim.profiles import simulated_profiles

    return simulated_profiles(NodeSpec.model_validate_json(node_json))


def local_provider(node: NodeSpec, pipeline: "FeaturePipeline | None" = None) -> JobInfoProvider:
    """This node's stored profiles as job information."""
    from env.node.discover import node_id
    from env.episode.jobinfo import ProfileProvider
    from profiler.store import ProfileStore

    store, nid = ProfileStore(), node_id(node)
    if pipeline is None:
        pipeline = _fitted_on_store(str(store.path), nid, _store_stamp(store.path))
        if pipeline is None:
            return ProfileProvider(lambda name: None, None, what=f"profile on this node ({nid})")  # type: ignore[arg-type]
    return ProfileProvider(lambda name: store.get(name, nid), pipeline, what=f"profile on this node ({nid})")


def _store_stamp(path: "os.PathLike[str] | str") -> tuple[int, ...]:
    """Changes whenever the store is written (the database or its write-ahead log)."""
    stamps = []
    for suffix in ("", "-wal"):
        try:
            st = os.stat(f"{path}{suffix}")
            stamps += [st.st_mtime_ns, st.st_size]
        except OSError:
            stamps += [0, 0]
    return tuple(stamps)


@lru_cache(maxsize=8)
def _fitted_on_store(store_path: str, nid: str, _stamp: tuple[int, ...]) -> "FeaturePipeline | None":
    """The pipeline fitted on the node's stored profiles, refitted only when the store changed."""
    from profiler.features import FeaturePipeline
    from profiler.store import ProfileStore

    stored = ProfileStore(store_path).list(nid)
    return FeaturePipeline.fit(stored) if stored else None


MODEL_POLICIES = ("agent", "fifo", "agent-search")


def default_policy(node: NodeSpec, model: object | None = None) -> str:
    """``agent-search`` when a model is given or ships for ``node`` and the node has a node model to score plans on
    (a simulated node); ``agent`` with a model but no node model (the real node); else the baseline default."""
    from env.planners.search import node_scorer

    if model is None:
        from training.policies import shipped_model_for

        if shipped_model_for(node) is None:
            return DEFAULT_POLICY
    return "agent-search" if node_scorer(node) is not None else "agent"


def plan_window(window: Window, node_name: str, *, policy: str | None = None, model: object | None = None,
                pin_runtime: bool = False, seed: int | None = None, search_budget: int | None = None,
                guard: bool = True) -> Plan:
    """The plan of ``window`` for ``node_name``: the policy's, unless it is predicted below time sharing (then the
    best baseline's, saying why: ``env.planners.search.guard_plan``). ``guard=False``: the policy's own plan, always."""
    node = load_node(node_name)
    name = policy or default_policy(node, model)
    if model is not None and name not in MODEL_POLICIES:
        raise InputError(f"--model is for the agent policies; policy {name!r} does not use a model")
    if search_budget is not None and name != "agent-search":
        raise InputError(f"--search-budget is for the agent-search policy, not {name!r}")
    pipeline = None
    if name in MODEL_POLICIES:
        from training.policies import agent_policy, shipped_model_for

        chosen = model if model is not None else shipped_model_for(node)  # given, else shipped
        if name == "agent-search":
            from env.planners.search import DEFAULT_BUDGET, check_budget
            from training.search_policy import agent_search_policy

            pol = agent_search_policy(chosen, check_budget(search_budget if search_budget is not None else DEFAULT_BUDGET))
        else:
            pol = agent_policy(name, chosen)  # type: ignore[arg-type]
        pipeline = pol.pipeline(node)  # features scaled as in training (the local node's profiles)
    else:
        pol = get_policy(name)
    ctx = PlanContext(node=node, provider=provider_for(node, pipeline), seed=seed, simulated=node.name.startswith("sim:"),
                      pin_runtime=PINRT_LIB if pin_runtime else None)
    plan = pol.plan(window, ctx)
    if not guard:
        return plan
    return guard_plan(plan, window, ctx, lambda baseline: _baseline_plan(baseline, window, node, seed, ctx.pin_runtime))


def _baseline_plan(name: str, window: Window, node: NodeSpec, seed: int | None, pin_runtime: object) -> Plan:
    """A baseline's plan for the guard, with the baselines' own job information (profiles, no model pipeline)."""
    ctx = PlanContext(node=node, provider=provider_for(node), seed=seed, simulated=node.name.startswith("sim:"),
                      pin_runtime=pin_runtime)  # type: ignore[arg-type]
    pol = _BASELINES.get(name)
    if pol is None:  # one object a baseline: the searches keep their evaluator's memo between plans
        pol = _BASELINES[name] = get_policy(name)
    return pol.plan(window, ctx)


_BASELINES: dict[str, object] = {}


def simulate(plan: Plan, seed: int | None = None) -> RunReport:
    """The run report of ``plan`` on the simulated node it was made for."""
    from env.sim.simulate import run_report

    if not plan.node.name.startswith("sim:"):
        raise InputError(f"the plan is for node {plan.node.name!r}; the sim backend runs plans made for a simulated "
                         "node: plan the window again with --node sim:reference")
    return run_report(plan, load_node(plan.node.name), seed=seed)
