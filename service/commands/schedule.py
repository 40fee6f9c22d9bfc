"""``cosched schedule WINDOW.json``: the plan for a window (nothing is run)."""

from __future__ import annotations

import argparse

from rich import box
from rich.console import Console
from rich.table import Table

from env.errors import InputError
from env.node.cpulist import format_cpulist
from env.plan.models import Plan
from env.plan.stream_plan import ContinuousPlan
from env.planners.registry import DEFAULT_POLICY
from env.planners.search import BUDGET_HELP, check_budget
from env.planners.streams import DEFAULT_CONTINUOUS_POLICY, STREAM_POLICIES
from env.sim.nodes import DEFAULT_SIM_NODE, load_node
from service.documents import read_window
from service.output import emit
from training.registry import policy_registry

_STREAM_POLICIES = tuple(p for p in STREAM_POLICIES if p != "groups") + ("best-found", "agent", "agent-search",
                                                                         "rollout-giveback")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("schedule", help="print the plan for a window (does not run it)",
                       description="Plan a window: which jobs run together, in which order, and each job's cores, "
                       "memory policy, cache ways, bandwidth cap and exact launch command. Nothing is run. "
                       "Plans for this machine unless --node names a simulated node.")
    p.add_argument("window", metavar="WINDOW.json", help="the window document")
    p.add_argument("--node", default="local", help=f"node to plan for: 'local' (this machine, the default; jobs need "
                   f"profiles on it) or 'sim:NAME' (e.g. {DEFAULT_SIM_NODE})")
    p.add_argument("--mode", choices=("groups", "continuous"), default=None,
                   help="groups: jobs in groups one after another (barriers); continuous: each job starts at an event "
                   "(a job's end) once what it needs is free, decided by a stream policy on the node model. Default: "
                   "the mode the node model predicts to end sooner (groups where there is no node model; continuous "
                   "where a job gives its own solo_s, which groups refuse); the plan says which and why")
    p.add_argument("--policy", default=None, help=f"groups: one of {', '.join(policy_registry().names())} (default: "
                   f"agent-search when a model ships for the node or is given and the node has a node model to score "
                   f"plans on, agent with a model only, else {DEFAULT_POLICY}); continuous: a stream policy, "
                   f"{', '.join(_STREAM_POLICIES)} (default {DEFAULT_CONTINUOUS_POLICY}). Without --mode a policy of "
                   "one mode only chooses that mode")
    p.add_argument("--model", default=None, help="model file for the agent policies (continuous: a stream model, "
                   "default the node's shipped one)")
    p.add_argument("--search-budget", type=_budget, default=None, metavar="N",
                   help=BUDGET_HELP)
    p.add_argument("--seed", type=int, default=0, help="seed of the random policy (default 0)")
    p.add_argument("--pin-runtime", action="store_true", help="launch commands load the C pinning runtime")
    p.add_argument("--window-size", type=int, default=None, metavar="W",
                   help="continuous: the queued jobs each decision chooses among (default 8)")
    p.add_argument("--plot", metavar="PNG", help="continuous: also draw the plan's predicted launches (cores x time)")
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


def render_continuous(plan: ContinuousPlan, console: Console | None = None) -> None:
    """A continuous plan as a table: each launch, what it waits for, its predicted start and end."""
    console = console or Console()
    table = Table(title=f"continuous plan for {plan.node.name}: {plan.policy}, Cmax {plan.max_concurrency}",
                  box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    for col, just in (("#", "right"), ("job", "left"), ("cpus", "left"), ("memory", "left"), ("L3 ways", "right"),
                      ("bw %", "right"), ("after", "left"), ("start s", "right"), ("end s", "right")):
        table.add_column(col, justify=just, overflow="fold", no_wrap=col in ("memory", "start s", "end s"))  # type: ignore[arg-type]
    for k, j in enumerate(plan.launches):
        name = j.id if j.profile == j.id else f"{j.id} ({j.profile})"
        t = [f"{x:.1f}" if x is not None else "" for x in (j.predicted_start_s, j.predicted_end_s)]
        table.add_row(str(k + 1), name, format_cpulist(j.cpus), j.memory, _domains({d: a.ways for d, a in j.l3.items()}),
                      _domains(j.mem_bw_percent), ", ".join(j.after) or "-", *t)
    console.print(table)
    for c in plan.changes:
        if c.cpus is not None:
            console.print(f"give-back just before {c.before_launch}: {c.job} keeps CPUs {format_cpulist(c.cpus)}")
            continue
        console.print(f"change at the end of {c.at_end_of}: {c.job} to ways {_domains({d: a.ways for d, a in c.l3.items()})}, "
                      f"bandwidth {_domains(c.mem_bw_percent) if c.mem_bw_percent else '-'} %")
    for e in plan.excluded:
        console.print(f"excluded: {e.id}: {e.reason}")
    for what, why in plan.enforcement.reasons.items():
        console.print(f"not enforced: {what}: {why}")
    if plan.predicted_makespan_s is not None:
        tput = plan.predicted_throughput_vs_timeshare
        console.print(f"predicted makespan {plan.predicted_makespan_s:.1f} s"
                      + (f", throughput vs time sharing {tput:.3f}" if tput is not None else "")
                      + f" ({plan.predictions_source or 'prediction'})")
    if plan.mode_reason:
        console.print(f"mode: {plan.mode_reason}")


def render(plan: Plan | ContinuousPlan, console: Console | None = None) -> None:
    """The plan as a table that fits an 80-column terminal (L3 masks and launch commands are in --json)."""
    if isinstance(plan, ContinuousPlan):
        return render_continuous(plan, console)
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
    if getattr(plan, "mode_reason", None):
        console.print(f"mode: {plan.mode_reason}")  # type: ignore[attr-defined]


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from service.planning import plan_document

    window = read_window(args.window)
    node = load_node(args.node)
    plan = plan_document(window, node, mode=args.mode, policy=args.policy, model=args.model,
                         pin_runtime=args.pin_runtime, seed=args.seed, search_budget=args.search_budget,
                         window_size=args.window_size)
    if args.plot:
        if not isinstance(plan, ContinuousPlan):
            raise InputError("--plot draws a continuous plan's launches; this window's plan is in groups "
                             f"({plan.mode_reason}): add --mode continuous")  # type: ignore[union-attr]
        from service.chart import plan_chart

        plan_chart(plan, Path(args.plot), node.cpus)
    emit(plan, args.json, lambda: render(plan))
    return 0
