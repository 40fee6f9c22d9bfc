"""``cosched eval --backend sim --windows FILE``: policies compared on many windows (all figures simulated)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from env.errors import InputError
from env.planners.evaluate import DEFAULT_EVAL_POLICIES
from env.sim.nodes import DEFAULT_SIM_NODE
from env.planners.search import BUDGET_HELP
from service.commands.schedule import _budget
from service.chart import eval_chart
from service.output import emit


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="compare policies on many windows (throughput vs time sharing)",
                       description="Plan every window with every policy, run the plans on the backend and report "
                       "throughput vs time sharing per window and on average (arithmetic mean).")
    p.add_argument("--backend", choices=("sim", "real"), default="sim", help="sim (default); real evaluation is 'cosched run'")
    p.add_argument("--node", default=DEFAULT_SIM_NODE, help=f"a simulated node (default {DEFAULT_SIM_NODE})")
    p.add_argument("--windows", required=True, metavar="FILE", help="JSON array of window documents, e.g. training/eval_windows.json")
    p.add_argument("--policies", default=",".join(DEFAULT_EVAL_POLICIES), help=f"comma-separated (default {','.join(DEFAULT_EVAL_POLICIES)})")
    p.add_argument("--window-size", type=int, default=6, metavar="W", help="jobs planned together (longer windows are planned W at a time; default 6)")
    p.add_argument("--max-concurrency", type=int, default=None, metavar="C", help="override every window's max_concurrency (Cmax)")
    p.add_argument("--search-budget", type=_budget, default=None, metavar="N",
                   help=BUDGET_HELP)
    p.add_argument("--model", default=None, metavar="M",
                   help="the model file agent, fifo and agent-search plan with (either format; default: the node's shipped model)")
    p.add_argument("--no-guard", action="store_true",
                   help="report each policy's own plan even when it is predicted below time sharing (default: replaced by the best baseline, as cosched schedule does)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random policy and of simulated noise (default 0)")
    p.add_argument("--noise", type=float, default=0.0, metavar="SD", help="simulated measurement noise: each job's time x exp(N(0, SD)), seeded (default 0)")
    p.add_argument("--plot", metavar="PNG", help="also draw a bar chart of the mean throughput per policy")
    p.add_argument("--json", action="store_true", help="print the evaluation as one JSON document")
    p.set_defaults(handler=run)


def render(doc: dict[str, Any]) -> None:
    console = Console()
    kind = "simulated" if doc["simulated"] else "measured"
    table = Table(title=f"throughput vs time sharing on {doc['node']} ({kind})")
    table.add_column("window")
    table.add_column("jobs")
    for p in doc["policies"]:
        table.add_column(p, justify="right")
    best = {w["index"]: max(w["results"][p]["throughput_vs_timeshare"] for p in doc["policies"]) for w in doc["windows"]}
    for w in doc["windows"]:
        cells = []
        for p in doc["policies"]:
            v = w["results"][p]["throughput_vs_timeshare"]
            cells.append(f"[bold]{v:.3f}[/]" if v == best[w["index"]] else f"{v:.3f}")
        table.add_row(str(w["index"]), " ".join(w["jobs"]), *cells)
    table.add_section()
    table.add_row("mean", f"{len(doc['windows'])} windows", *(f"{doc['mean'][p]:.3f}" for p in doc["policies"]))
    console.print(table)
    if "best-found" in doc["policies"]:
        for p in doc["policies"]:
            if p not in ("best-found", "timeshare"):
                gap = 1 - doc["mean"][p] / doc["mean"]["best-found"]
                console.print(f"{p}: {gap * 100:.1f} % below best-found on average ({kind})")


def run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from env.planners.evaluate import evaluate, read_windows
    from env.sim.backend import SimBackend
    from env.sim.nodes import load_node
    from env.sim.world import world_for
    from training.policies import load_for_node
    from training.registry import policy_registry

    if args.backend != "sim":
        raise InputError("evaluation on the real node runs every plan: use 'cosched run' window by window (eval is --backend sim)")
    node = load_node(args.node)
    if not node.simulated:
        raise InputError(f"--backend sim needs a simulated node (sim:NAME), not {args.node!r}")
    policies = policy_registry().parse(args.policies)
    windows = read_windows(args.windows)
    if args.window_size < 1:
        raise InputError("--window-size must be at least 1")
    if args.max_concurrency is not None:
        if not 1 <= args.max_concurrency <= 64:
            raise InputError("--max-concurrency must be between 1 and 64")
        windows = [w.model_copy(update={"max_concurrency": args.max_concurrency}) for w in windows]
    status = Console(stderr=True)

    def progress(i: int, name: str, dt: float) -> None:
        if not args.json and sys.stderr.isatty():
            status.print(f"window {i + 1}/{len(windows)}: {name} ({dt:.1f} s)", end="\r")

    if not 0.0 <= args.noise <= 1.0:
        raise InputError("--noise must be between 0 and 1 (a log-normal standard deviation)")
    backend = SimBackend(node, replace(world_for(node).params, noise_sd=args.noise))
    if args.search_budget is not None and "agent-search" not in policies:
        raise InputError("--search-budget is for the agent-search policy: add it to --policies")
    model = load_for_node(args.model, node) if args.model is not None else None  # one line if unreadable or another node's
    doc = evaluate(windows, node, policies, backend=backend, seed=args.seed, window_size=args.window_size,
                   progress=progress, guard=not args.no_guard, registry=policy_registry(model, args.search_budget))
    doc["guarded"] = not args.no_guard
    doc["noise_sd"] = args.noise
    emit(doc, args.json, lambda: render(doc))
    if args.plot:
        eval_chart(doc, Path(args.plot))
        if not args.json:
            Console().print(f"picture: {args.plot}")
    return 0
