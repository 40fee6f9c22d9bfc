"""``cosched schedule WINDOW.json``: the plan for a window (nothing is run)."""

from __future__ import annotations

import argparse

from rich import box
from rich.console import Console
from rich.table import Table

from env.errors import InputError
from env.node.cpulist import format_cpulist
from env.plan.models import Plan
from env.planners.registry import DEFAULT_POLICY
from env.planners.search import BUDGET_HELP, check_budget
from env.sim.nodes import DEFAULT_SIM_NODE, load_node
from service.documents import read_window
from service.output import emit
from training.registry import policy_registry


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("schedule", help="print the plan for a window (does not run it)",
                       description="Plan a window: which jobs run together, in which order, and each job's cores, "
                       "memory policy, cache ways, bandwidth cap and exact launch command. Nothing is run. "
                       "Plans for this machine unless --node names a simulated node.")
    p.add_argument("window", metavar="WINDOW.json", help="the window document")
    p.add_argument("--node", default="local", help=f"node to plan for: 'local' (this machine, the default; jobs need "
                   f"profiles on it) or 'sim:NAME' (e.g. {DEFAULT_SIM_NODE})")
    p.add_argument("--policy", default=None, help=f"one of {', '.join(policy_registry().names())} (default: agent-search when a model "
                   f"ships for the node or is given and the node has a node model to score plans on, agent with a model only, else {DEFAULT_POLICY})")
    p.add_argument("--model", default=None, help="model file for the agent policies")
    p.add_argument("--search-budget", type=_budget, default=None, metavar="N",
                   help=BUDGET_HELP)
    p.add_argument("--seed", type=int, default=0, help="seed of the random policy (default 0)")
    p.add_argument("--pin-runtime", action="store_true", help="launch commands load the C pinning runtime")
    p.add_argument("--json", action="store_true", help="print the plan as one JSON document")
    p.set_defaults(handler=run)


def _budget(text: str) -> int:
    """--search-budget: a whole number; its range is checked (one line) by env.planners.search.check_budget."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number of rollouts, not {text!r}") from None
    try:
        return check_budget(value)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--search-budget ")) from None


def _domains(values: dict[str, int]) -> str:
    """Per-domain values, short: one value when every domain has it, else 'value/value' in domain order."""
    vs = [str(v) for _, v in sorted(values.items(), key=lambda kv: int(kv[0]) if kv[0].isdigit() else kv[0])]
    return vs[0] if len(set(vs)) == 1 else "/".join(vs)


def render(plan: Plan, console: Console | None = None) -> None:
    """The plan as a table that fits an 80-column terminal (L3 masks and launch commands are in --json)."""
    console = console or Console()
    sp = plan.schedule_policy
    title = f"plan for {plan.node.name}: {plan.policy}, {sp.affinity}, {sp.memory}"
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    table.add_column("grp", justify="right", no_wrap=True)
    table.add_column("job", overflow="fold", min_width=8)
    table.add_column("cpus", overflow="fold", min_width=5)
    table.add_column("memory", no_wrap=True)
    table.add_column("L3 ways", justify="right", no_wrap=True)
    table.add_column("bw %", justify="right", no_wrap=True)
    table.add_column("pred s", justify="right", no_wrap=True)
    for g in plan.groups:
        for k, j in enumerate(g.jobs):
            name = j.id if j.profile == j.id else f"{j.id} ({j.profile})"
            pred = f"{g.predicted_makespan_s:.1f}" if (k == 0 and g.predicted_makespan_s is not None) else ""
            table.add_row(str(g.index + 1) if k == 0 else "", name, format_cpulist(j.cpus), j.memory,
                          _domains({d: a.ways for d, a in j.l3.items()}), _domains(j.mem_bw_percent), pred)
    console.print(table)
    for e in plan.excluded:
        console.print(f"excluded: {e.id}: {e.reason}")
    for what, why in plan.enforcement.reasons.items():
        console.print(f"not enforced: {what}: {why}")
    if plan.fallback_reason:
        console.print(f"fallback: {plan.fallback_reason}")
    if plan.search is not None:
        agent = plan.search.agent_predicted_throughput_vs_timeshare
        console.print(f"search: {plan.search.rollouts} rollouts, {plan.search.local_calls} local calls "
                      f"(budget {plan.search.budget} a chunk)"
                      + (f"; the agent alone: {agent:.3f} (predicted)" if agent is not None else ""))
    if plan.predicted_throughput_vs_timeshare is not None:
        console.print(f"predicted throughput vs time sharing: {plan.predicted_throughput_vs_timeshare:.3f} "
                      f"({plan.predictions_source or 'prediction'})")
    elif plan.no_prediction:
        console.print(f"no prediction: {plan.no_prediction}")


def run(args: argparse.Namespace) -> int:
    from service.planning import plan_window

    window = read_window(args.window)
    plan = plan_window(window, load_node(args.node), policy=args.policy, model=args.model, pin_runtime=args.pin_runtime, seed=args.seed,
                       search_budget=args.search_budget)
    emit(plan, args.json, lambda: render(plan))
    return 0
