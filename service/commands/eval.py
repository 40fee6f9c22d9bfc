"""``cosched eval --backend sim --windows FILE``: policies compared on many windows; ``--streams FILE``: on job streams
decided at every event (``env.planners.streams``). All figures simulated."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from env.errors import InputError
from env.planners.evaluate import DEFAULT_EVAL_POLICIES
from env.planners.streams import DEFAULT_STREAM_WINDOW, STREAM_POLICIES
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
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--windows", metavar="FILE", help="JSON array of window documents, e.g. training/eval_windows.json")
    what.add_argument("--streams", metavar="FILE",
                      help="JSON array of stream documents (windows whose jobs may carry submit_s): decided at every event")
    p.add_argument("--policies", default=None,
                   help=f"comma-separated (default {','.join(DEFAULT_EVAL_POLICIES)}; streams: {','.join(STREAM_POLICIES)}; "
                        "also best-found, rollout-giveback)")
    p.add_argument("--window-size", type=int, default=None, metavar="W",
                   help=f"jobs planned together (longer windows are planned W at a time; default 6); streams: the queued "
                        f"jobs a decision chooses among and groups' windows (default {DEFAULT_STREAM_WINDOW})")
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
    if args.streams is not None:
        return run_streams(args, node)
    args.window_size = 6 if args.window_size is None else args.window_size
    policies = policy_registry().parse(args.policies or ",".join(DEFAULT_EVAL_POLICIES))
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


def run_streams(args: argparse.Namespace, node: Any) -> int:
    """``--streams``: every stream decided at every event by every policy, on the node model."""
    from env.planners.evaluate import read_windows
    from env.planners.streams import evaluate_streams, stream_registry
    from service.planning import plan_window

    from training.stream.policy import stream_agents

    for flag, value in (("--search-budget", args.search_budget), ("--plot", args.plot)):
        if value is not None:
            raise InputError(f"{flag} is not used with --streams")
    if args.noise or args.no_guard or args.max_concurrency is not None:
        raise InputError("--noise, --no-guard and --max-concurrency are for --windows; a stream document sets its own "
                         "max_concurrency")
    window = DEFAULT_STREAM_WINDOW if args.window_size is None else args.window_size
    if window < 1:
        raise InputError("--window-size must be at least 1")
    registry = stream_registry(lambda w: plan_window(w, node, seed=args.seed), window, give_back=True)  # model-run
    registry = registry.extended(*stream_agents(node, args.model, window))  # agent, agent-search: a stream model
    policies = registry.parse(args.policies or ",".join(STREAM_POLICIES))
    streams = read_windows(args.streams, "stream")
    status = Console(stderr=True)

    def progress(i: int, name: str, dt: float) -> None:
        if not args.json and sys.stderr.isatty():
            status.print(f"stream {i + 1}/{len(streams)}: {name} ({dt:.1f} s)", end="\r")

    doc = evaluate_streams(streams, node, policies, registry, progress=progress)
    doc["window"] = window
    emit(doc, args.json, lambda: render_streams(doc))
    return 0


def render_streams(doc: dict[str, Any]) -> None:
    console = Console()
    table = Table(title=f"job streams on {doc['node']} (simulated): throughput vs time sharing, mean turnaround (s), "
                        f"mean bounded slowdown")
    table.add_column("stream")
    table.add_column("jobs")
    for p in doc["policies"]:
        table.add_column(p, justify="right")
    rows = [(str(s["index"]), f"{s['jobs']} (Cmax {s['max_concurrency']})", s["results"]) for s in doc["streams"]]
    rows.append(("mean", f"{len(doc['streams'])} streams", doc["mean"]))
    for label, jobs, res in rows:
        table.add_row(label, jobs, *(f"{res[p]['throughput_vs_timeshare']:.3f}  {res[p]['mean_turnaround_s']:.0f}  "
                                     f"{res[p]['mean_bounded_slowdown']:.2f}" for p in doc["policies"]))
    console.print(table)
    if "packing" in doc["policies"]:
        base = doc["mean"]["packing"]["throughput_vs_timeshare"]
        for p in doc["policies"]:
            if p != "packing":
                console.print(f"{p}: {doc['mean'][p]['throughput_vs_timeshare'] / base:.3f} x packing's mean throughput (simulated)")

