"""Planning a window for the command line and the service: the same episode code, a chosen policy.

Simulated nodes (``sim:NAME``) plan from the simulated catalogue (``env.jobinfo.sim_provider``). The local
node's provider (its profile store and the model's feature pipeline) arrives with the trained agent; until
then a window is planned for a simulated node, or a PLAN.json is given.
"""

from __future__ import annotations

from env.baselines import DEFAULT_POLICY, PlanContext, get_policy
from env.errors import InputError
from env.jobinfo import JobInfoProvider, sim_provider
from env.launch import PINRT_LIB
from env.models import Plan, RunReport, Window
from env.nodes import load_node
from env.nodespec import NodeSpec


def provider_for(node: NodeSpec) -> JobInfoProvider:
    if node.name.startswith("sim:"):
        return sim_provider(node)
    raise InputError(f"planning for node {node.name!r} needs its profiles and a trained model, which are not "
                     "available yet: plan for a simulated node (--node sim:reference) or give a PLAN.json")


def plan_window(window: Window, node_name: str, *, policy: str | None = None, model: str | None = None,
                pin_runtime: bool = False, seed: int | None = None) -> Plan:
    node = load_node(node_name)
    pol = get_policy(policy or DEFAULT_POLICY)
    if model is not None and (policy or DEFAULT_POLICY) not in ("agent", "fifo"):
        raise InputError(f"--model is for the agent policies; policy {policy or DEFAULT_POLICY!r} does not use a model")
    ctx = PlanContext(node=node, provider=provider_for(node), seed=seed, simulated=node.name.startswith("sim:"),
                      pin_runtime=PINRT_LIB if pin_runtime else None)
    return pol.plan(window, ctx)


def simulate(plan: Plan, seed: int | None = None) -> RunReport:
    """The run report of ``plan`` on the simulated node it was made for."""
    from env.sim.simulate import run_report

    if not plan.node.name.startswith("sim:"):
        raise InputError(f"the plan is for node {plan.node.name!r}; the sim backend runs plans made for a simulated "
                         "node: plan the window again with --node sim:reference")
    return run_report(plan, load_node(plan.node.name), seed=seed)
