"""``cosched schedule WINDOW.json``: the plan for a window (nothing is run)."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from env.baselines import DEFAULT_POLICY, policy_names
from env.cpulist import format_cpulist
from env.models import Plan
from env.nodes import DEFAULT_SIM_NODE
from service.documents import read_window
from service.output import emit


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("schedule", help="print the plan for a window (does not run it)",
                       description="Plan a window: which jobs run together, in which order, and each job's cores, "
                       "memory policy, cache ways, bandwidth cap and exact launch command. Nothing is run.")
    p.add_argument("window", metavar="WINDOW.json", help="the window document")
    p.add_argument("--node", default=DEFAULT_SIM_NODE, help=f"node to plan for: 'local' or 'sim:NAME' (default {DEFAULT_SIM_NODE})")
    p.add_argument("--policy", default=None, help=f"one of {', '.join(policy_names())} (default: agent when a model is given or ships for the node, else {DEFAULT_POLICY})")
    p.add_argument("--model", default=None, help="model file for the agent policy")
    p.add_argument("--seed", type=int, default=0, help="seed of the random policy (default 0)")
    p.add_argument("--pin-runtime", action="store_true", help="launch commands load the C pinning runtime")
    p.add_argument("--json", action="store_true", help="print the plan as one JSON document")
    p.set_defaults(handler=run)


def render(plan: Plan) -> None:
    console = Console()
    sp = plan.schedule_policy
    table = Table(title=f"plan for {plan.node.name} (policy {plan.policy}; {sp.affinity}, {sp.memory})")
    for col in ("group", "job", "profile", "cpus", "memory", "L3 ways", "bandwidth %", "predicted s"):
        table.add_column(col)
    for g in plan.groups:
        for k, j in enumerate(g.jobs):
            ways = ", ".join(f"{d}:{a.ways} ({a.mask})" for d, a in j.l3.items())
            bw = ", ".join(f"{d}:{v}" for d, v in j.mem_bw_percent.items())
            pred = f"{g.predicted_makespan_s:.1f}" if (k == 0 and g.predicted_makespan_s is not None) else ""
            table.add_row(str(g.index) if k == 0 else "", j.id, j.profile, format_cpulist(j.cpus), j.memory, ways, bw, pred)
    console.print(table)
    for e in plan.excluded:
        console.print(f"excluded: {e.id}: {e.reason}")
    for what, why in plan.enforcement.reasons.items():
        console.print(f"not enforced: {what}: {why}")
    if plan.predicted_throughput_vs_timeshare is not None:
        console.print(f"predicted throughput vs time sharing: {plan.predicted_throughput_vs_timeshare:.3f} "
                      f"({plan.predictions_source or 'prediction'})")


def run(args: argparse.Namespace) -> int:
    from service.planning import plan_window

    window = read_window(args.window)
    plan = plan_window(window, args.node, policy=args.policy, model=args.model, pin_runtime=args.pin_runtime, seed=args.seed)
    emit(plan, args.json, lambda: render(plan))
    return 0
