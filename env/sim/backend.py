"""How a plan gets its group makespans: the ``Backend`` protocol the gym env and evaluation use.

The simulated node implements it here (``SimBackend``); the real node's executor implements the same
``evaluate(plan, seed=None) -> list of group makespans (s)`` (``simulated`` False, slow, resumable).
"""

from __future__ import annotations

from typing import Protocol

from env.plan.models import Plan
from env.node.spec import NodeSpec
from env.sim.params import SimParams


class Backend(Protocol):
    name: str  # "sim" | "real"
    simulated: bool
    node: NodeSpec

    def evaluate(self, plan: Plan, seed: int | None = None) -> list[float]: ...


class SimBackend:
    name = "sim"
    simulated = True

    def __init__(self, node: NodeSpec, params: SimParams | None = None) -> None:
        from env.sim.world import world_for

        self.node = node
        self.params = params if params is not None else world_for(node).params  # a node model's own, if any

    def evaluate(self, plan: Plan, seed: int | None = None) -> list[float]:
        from env.sim.simulate import simulate_plan

        return simulate_plan(plan, self.node, seed=seed, params=self.params).makespans
