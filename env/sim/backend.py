"""How a plan is run: the ``Backend`` protocol that ``cosched run``, ``cosched eval``, the gym env and training's
evaluation use, whatever the node.

* ``run(plan, seed=None) -> RunReport``: the plan run as a whole (groups, each job's time, time sharing).
* ``evaluate(plan, seed=None) -> list of group makespans (s)``: the same run's makespans, all that scoring needs.

The simulated node implements it here (``SimBackend``: both from ``env.sim.simulate.simulate_plan``); the real
node in ``env.real.backend.RealBackend`` (``simulated`` False, slow, resumable; both through ``env.real.run``).
"""

from __future__ import annotations

from typing import Protocol

from env.node.spec import NodeSpec
from env.plan.models import Plan, RunReport
from env.sim.params import SimParams


class Backend(Protocol):
    name: str  # "sim" | "real"
    simulated: bool
    node: NodeSpec

    def run(self, plan: Plan, seed: int | None = None) -> RunReport: ...

    def evaluate(self, plan: Plan, seed: int | None = None) -> list[float]: ...


class SimBackend:
    name = "sim"
    simulated = True

    def __init__(self, node: NodeSpec, params: SimParams | None = None) -> None:
        from env.sim.world import world_for

        self.node = node
        self.params = params if params is not None else world_for(node).params  # a node model's own, if any

    def run(self, plan: Plan, seed: int | None = None) -> RunReport:
        from env.sim.simulate import run_report

        return run_report(plan, self.node, seed=seed, params=self.params)

    def evaluate(self, plan: Plan, seed: int | None = None) -> list[float]:
        from env.sim.simulate import simulate_plan

        return simulate_plan(plan, self.node, seed=seed, params=self.params).makespans
