"""How a plan gets its group makespans: the ``Backend`` protocol the gym env and evaluation use.

The simulated node implements it here (``SimBackend``); the real node's executor implements the same
``evaluate(plan, seed=None) -> list of group makespans (s)`` (``simulated`` False, slow, resumable).
"""

from __future__ import annotations

from typing import Protocol

from env.models import Plan
from env.nodespec import NodeSpec
from env.sim.params import DEFAULT_PARAMS, SimParams


class Backend(Protocol):
    name: str  # "sim" | "real"
    simulated: bool
    node: NodeSpec

    def evaluate(self, plan: Plan, seed: int | None = None) -> list[float]: ...


class SimBackend:
    name = "sim"
    simulated = True

    def __init__(self, node: NodeSpec, params: SimParams = DEFAULT_PARAMS) -> None:
        self.node = node
        self.params = params

    def evaluate(self, plan: Plan, seed: int | None = None) -> list[float]:
        from env.sim.simulate import simulate_plan

        return simulate_plan(plan, self.node, seed=seed, params=self.params).makespans
