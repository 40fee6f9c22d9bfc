"""Planning a window for the command line and the service: the same episode code, a chosen policy.

(The episode and policies come with the simulated environment; until they exist, windows cannot be
planned here, and plans must be given as PLAN.json.)
"""

from __future__ import annotations

from env.errors import InputError
from env.models import Plan, RunReport, Window


def plan_window(window: Window, node_name: str, *, policy: str | None = None, model: str | None = None, pin_runtime: bool = False) -> Plan:
    raise InputError("planning a window is not available yet: give a PLAN.json")


def simulate(plan: Plan) -> RunReport:
    raise InputError("the simulated backend is not available yet")
