"""Planning a window for the command line, the service and the Slurm controller: one path, a chosen policy.

The caller hands down the loaded ``NodeSpec``. Simulated nodes (``sim:NAME``) plan from the simulated catalogue,
the local node from its profile store (``env.episode.jobinfo.provider_for``); a model's policies read features
scaled by the model's own pipeline. Every plan passes the guard (``env.planners.guard``), which plans its fallbacks
itself with the baselines' job information.
"""

from __future__ import annotations

from env.episode.jobinfo import provider_for
from env.errors import InputError
from env.node.spec import NodeSpec
from env.plan.launch import PINRT_LIB
from env.plan.models import Plan, RunReport, Window
from env.planners.baselines import PlanContext
from env.planners.guard import guard_plan
from env.sim.nodes import load_node
from training.policies import MODEL_POLICIES, default_policy, shipped_model_for
from training.registry import policy_registry


def plan_window(window: Window, node: NodeSpec, *, policy: str | None = None, model: object | None = None,
                pin_runtime: bool = False, seed: int | None = None, search_budget: int | None = None,
                guard: bool = True) -> Plan:
    """The plan of ``window`` for ``node``: the policy's, unless it is predicted below time sharing (then the best
    baseline's, saying why: ``env.planners.guard``). ``guard=False``: the policy's own plan, always."""
    name = policy or default_policy(node, model)
    if model is not None and name not in MODEL_POLICIES:
        raise InputError(f"--model is for the agent policies; policy {name!r} does not use a model")
    if search_budget is not None and name != "agent-search":
        raise InputError(f"--search-budget is for the agent-search policy, not {name!r}")
    chosen = model if model is not None or name not in MODEL_POLICIES else shipped_model_for(node)  # given, else shipped
    pol = policy_registry(chosen, search_budget).get(name)  # type: ignore[arg-type]
    pipeline = pol.pipeline(node) if name in MODEL_POLICIES else None  # type: ignore[attr-defined] # as in training
    ctx = PlanContext(node=node, provider=provider_for(node, pipeline), seed=seed, simulated=node.simulated,
                      pin_runtime=PINRT_LIB if pin_runtime else None,
                      baseline_provider=provider_for(node) if pipeline is not None else None)  # else the same one
    plan = pol.plan(window, ctx)
    return guard_plan(plan, window, ctx) if guard else plan


def simulate(plan: Plan, seed: int | None = None) -> RunReport:
    """The run report of ``plan`` on the simulated node it was made for."""
    from env.sim.backend import SimBackend

    if not plan.node.name.startswith("sim:"):
        raise InputError(f"the plan is for node {plan.node.name!r}; the sim backend runs plans made for a simulated "
                         "node: plan the window again with --node sim:reference")
    return SimBackend(load_node(plan.node.name)).run(plan, seed=seed)
