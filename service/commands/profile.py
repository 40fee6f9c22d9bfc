"""``cosched profile`` (solo-profile a command and store it) and ``cosched profiles`` (the profile store)."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from env.node.discover import local_node_id
from profiler.errors import ProfilerInputError
from profiler.events import PERF_EVENTS
from profiler.interference import InterferenceProfile
from profiler.models import Profile, check_profile_name
from profiler.profiling import Phase, one_core
from profiler.store import ProfileStore
from service.chart import interference_chart
from service.output import emit


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "profile",
        help="solo-run a command under perf and store its profile",
        description="Run CMD alone on the whole node under 'perf stat' (the paper's twelve events), then once more "
        "bound to one core for the scale factor, and store the profile under NAME for this node "
        "(in $COSCHED_HOME/profiles.sqlite); that is all the planner needs. With --curves, also measure its "
        "interference curves (Bubble-Up): its slowdown next to the memory-pressure generator at several pressures "
        "(sensitivity) and the reference probe's slowdown next to it (pressure); about ten more runs of CMD, "
        "optional: the node model learns a program's sensitivity from its co-runs ('cosched run'), and "
        "'cosched calibrate' measures the curves of the programs it calibrates on. CMD is never run "
        "through a shell; its output goes to $COSCHED_HOME/logs/profile-NAME.{out,err}. A failed run is not stored.",
        usage="cosched profile --name NAME [--no-scale] [--adapts] [--curves] [--timeout S] [--json] -- CMD [ARG...]",
    )
    p.add_argument("--name", required=True, help="profile name: 1-128 characters of [A-Za-z0-9._:-]")
    p.add_argument("--no-scale", action="store_true", help="skip the one-core run (no scale factor)")
    p.add_argument("--adapts", action="store_true",
                   help="also measure whether the program adapts to CPUs taken from it while it runs (two more runs: "
                   "on half the CPUs, then on all with half taken halfway). rollout-giveback asks only a program that "
                   "adapts to give CPUs back; a window job's own \"adapts\" overrides what its profile says")
    curves = p.add_mutually_exclusive_group()
    curves.add_argument("--curves", action="store_true",
                        help="also measure the interference curves (sensitivity to the pressure generator, pressure on "
                        "the probe; about ten more runs of CMD). Not needed to plan: without them the node model "
                        "learns the program from its co-runs, and 'cosched calibrate' measures what it needs")
    curves.add_argument("--no-interference", action="store_true",
                        help="no interference curves (the default; kept for older scripts)")
    p.add_argument("--timeout", type=float, default=None, metavar="S", help="stop each run after S seconds (a failure)")
    p.add_argument("--json", action="store_true", help="print the stored profile as one JSON document")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD [ARG...]", help="the command to profile")
    p.set_defaults(handler=run_profile)

    q = sub.add_parser(
        "profiles",
        help="list, show or delete stored profiles",
        description="The profile store ($COSCHED_HOME/profiles.sqlite, default ~/.local/share/cosched). "
        "Profiles are keyed by name and node: by default this node's.",
    )
    q.add_argument("action", nargs="?", choices=["list", "show", "delete"], default="list")
    q.add_argument("name", nargs="?", help="profile name (show, delete)")
    q.add_argument("--node-id", default=None, help="the node the profiles belong to (default: this node's id)")
    q.add_argument("--all-nodes", action="store_true", help="list: the profiles of every node")
    q.add_argument("--json", action="store_true", help="print one JSON document")
    q.add_argument("--plot", metavar="FILE.png", default=None, help="show: also draw the interference curves to FILE.png")
    q.set_defaults(handler=run_profiles)


# -- cosched profile ------------------------------------------------------------------------------


def run_profile(args: argparse.Namespace) -> int:
    from env.real.profiling import JobProfiling

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    name = check_profile_name(args.name)
    if not command:
        raise ProfilerInputError("no command given: cosched profile --name NAME -- CMD [ARG...]")
    if args.timeout is not None and args.timeout <= 0:
        raise ProfilerInputError(f"--timeout must be > 0 seconds, not {args.timeout}")
    job = JobProfiling(name, command, scale=not args.no_scale, interference=args.curves, adapts=args.adapts,
                       timeout_s=args.timeout)

    console = Console(stderr=True)
    shown = shlex.join(command)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    shown = escape(shown)
    steps = (1 if args.no_scale else 2) + (1 if job.adapts else 0) + (1 if job.measures_curves else 0)
    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console, transient=False
    ) as progress:
        task_ids: dict[str, Any] = {}

        def on_phase(phase: Phase) -> None:
            for tid in task_ids.values():
                progress.stop_task(tid)
            if phase == "all-cores":
                desc = f"[1/{steps}] {name}: {shown} on the whole node"
            else:
                desc = f"[2/{steps}] {name}: {shown} on one core (cpu {one_core()})"
            task_ids[phase] = progress.add_task(desc, total=None)

        profile = job.solo(on_phase)
        for tid in task_ids.values():
            progress.stop_task(tid)
        from profiler.adaptivity import why_not_probed

        why = why_not_probed(profile.duration_s, profile.other_load_cpus) if job.adapts else None
        if why is not None:
            job.adapts, job.adapts_skipped = False, why
        if job.adapts_skipped:
            console.print(f"[yellow]whether it adapts not measured:[/] {job.adapts_skipped}")
        if job.adapts:
            step = steps - (1 if job.measures_curves else 0)
            task = progress.add_task(f"[{step}/{steps}] {name}: on half the CPUs, then on all with half taken halfway "
                                     "(does it adapt?)", total=None)
            profile = job.giveback(profile)
            progress.stop_task(task)
        job.keep(profile)
        curves = None
        if job.curves_skipped:
            console.print(f"[yellow]interference curves not measured:[/] {job.curves_skipped}")
        if job.measures_curves:
            task = progress.add_task(f"[{steps}/{steps}] {name}: interference curves", total=None)
            curves = job.curves(lambda msg: progress.update(task, description=f"[{steps}/{steps}] {escape(msg)}"))
            progress.stop_task(task)
    emit(_document(profile, curves), args.json,
         lambda: _render_profile(profile, job.store.path, saved="replaced" if job.replaced else "stored", curves=curves))
    return 0


def _document(profile: Profile, curves: InterferenceProfile | None) -> dict[str, Any]:
    """What --json prints: the profile document with its interference curves (null when not measured)."""
    return {**profile.model_dump(mode="json"), "interference": curves.model_dump(mode="json") if curves else None}


# -- cosched profiles -----------------------------------------------------------------------------


def run_profiles(args: argparse.Namespace) -> int:
    if args.action in ("show", "delete") and not args.name:
        raise ProfilerInputError(f"'profiles {args.action}' needs a NAME")
    if args.action == "list" and args.name:
        raise ProfilerInputError("'profiles list' takes no NAME (did you mean 'profiles show NAME'?)")
    if args.name:
        check_profile_name(args.name)
    store = ProfileStore()
    node = args.node_id or (None if (args.action == "list" and args.all_nodes) else local_node_id())

    if args.plot and args.action != "show":
        raise ProfilerInputError("--plot goes with 'profiles show NAME'")
    if args.action == "show":
        profile = store.require(args.name, node)
        curves = store.get_interference(args.name, node)
        if args.plot:
            if curves is None:
                raise ProfilerInputError(f"profile {args.name!r} has no interference curves to plot: cosched profile --curves --name {args.name} -- CMD")
            interference_chart(curves, Path(args.plot))
        emit(_document(profile, curves), args.json, lambda: _render_profile(profile, store.path, curves=curves, plot=args.plot))
    elif args.action == "delete":
        store.require(args.name, node)
        store.delete(args.name, node)
        doc = {"deleted": args.name, "node_id": node, "store": str(store.path)}
        emit(doc, args.json, lambda: Console().print(f"deleted profile [bold]{args.name}[/] of node {node}"))
    else:
        profiles = store.list(None if args.all_nodes and not args.node_id else node)
        doc = {
            "store": str(store.path),
            "node_id": node,
            "profiles": [p.model_dump(mode="json") for p in profiles],
        }
        emit(doc, args.json, lambda: _render_list(profiles, store.path, node))
    return 0


# -- rendering ------------------------------------------------------------------------------------


def _fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "[dim]missing[/]"
    if abs(value) >= 1e6:
        return f"{value:.4g}{unit}"
    return f"{value:,.2f}{unit}" if value != int(value) else f"{int(value):,}{unit}"


def _render_profile(profile: Profile, store_path: Path, saved: str = "profile", curves: InterferenceProfile | None = None,
                    plot: str | None = None) -> None:
    console = Console()
    verb = saved
    console.print(f"[bold]{verb}[/] {profile.name}  node {profile.node_id}  ({store_path})")
    console.print(f"command: {escape(shlex.join(profile.command))}")
    scale = (
        f"{profile.scale_factor:.2f} (one core {profile.one_core_s:.2f} s)"
        if profile.scale_factor is not None and profile.one_core_s is not None
        else "not measured"
    )
    rss = f"{profile.peak_rss_kb / 1024:.1f} MiB" if profile.peak_rss_kb is not None else "?"
    console.print(
        f"solo time {profile.duration_s:.3f} s (wall {profile.wall_s:.3f} s), scale factor {scale}, peak memory {rss}"
    )
    if profile.adapts is not None and profile.giveback_ratio is not None:
        from profiler.adaptivity import CAP

        bound = "at least " if profile.giveback_ratio >= CAP else ""
        console.print(f"adapts to CPUs taken while it runs: {'yes' if profile.adapts else 'no'} (half its CPUs taken "
                      f"halfway: {bound}{profile.giveback_ratio:.2f} x what the node model predicts)")
    table = Table("event", "value", "per second")
    units = {"duration_time": " ns", "task-clock": " ms"}
    for event in PERF_EVENTS:
        value = profile.counters[event]
        rate = None if value is None or event in units else value / profile.duration_s
        table.add_row(event, _fmt(value, units.get(event, "")), _fmt(rate) if rate is not None else "")
    console.print(table)
    if profile.other_load_cpus is not None and profile.other_load_cpus >= 0.25:
        console.print(
            f"[yellow]the node was not idle:[/] other processes used {profile.other_load_cpus:.2f} CPUs on average "
            "during a run; times and the scale factor may be off (profile again on an idle node)"
        )
    missing = profile.missing_counters
    if missing:
        console.print(f"[yellow]{len(missing)} counter(s) missing on this node[/] (not counted, not zero)")
    console.print(f"{profile.perf_version or 'no perf'}; {profile.created_at:%Y-%m-%d %H:%M:%S} UTC")
    if curves is None:
        console.print("[dim]no interference curves (not needed to plan; 'cosched profile --curves' measures them)[/]")
    else:
        _render_curves(console, curves)
        if plot:
            console.print(f"curves drawn to {plot}")


def _render_curves(console: Console, c: InterferenceProfile) -> None:
    label = "simulated" if c.simulated else "measured"
    console.print(f"[bold]interference curves[/] ({label}, one run each; {c.node_seconds:.1f} s of node time, "
                  f"{c.created_at:%Y-%m-%d %H:%M} UTC): on CPUs {c.cpus}, partner on {c.partner_cpus}, alone {c.alone_s:.3f} s")
    table = Table("curve", "x", "slowdown")
    for p in c.sensitivity:
        table.add_row("sensitivity (pressure generator level)", f"{p.x:g}", f"{p.slowdown:.3f}")
    table.add_row("pressure (reference probe's slowdown)", "", f"{c.pressure:.3f}")
    for title, curve in (("L3 ways", c.ways), ("MBA cap %", c.mba)):
        for p in curve or []:
            table.add_row(title, f"{p.x:g}", f"{p.slowdown:.3f}")
    console.print(table)
    if c.ways is None and c.mba is None:
        console.print("[dim]no L3 ways / MBA curves: this node cannot partition its cache or bandwidth (cosched node)[/]")


def _render_list(profiles: list[Profile], store_path: Path, node: str | None) -> None:
    console = Console()
    if not profiles:
        console.print(f"no profiles{' for node ' + node if node else ''} in {store_path}")
        return
    several_nodes = len({p.node_id for p in profiles}) > 1
    columns = ["name", *(["node"] if several_nodes else []), "solo s", "scale", "peak MiB", "counters", "created (UTC)"]
    table = Table(*columns)
    for p in profiles:
        table.add_row(
            p.name,
            *([p.node_id] if several_nodes else []),
            f"{p.duration_s:.2f}",
            f"{p.scale_factor:.2f}" if p.scale_factor is not None else "-",
            f"{p.peak_rss_kb / 1024:.0f}" if p.peak_rss_kb is not None else "-",
            f"{len(p.available_counters)}/{len(PERF_EVENTS)}",
            f"{p.created_at:%Y-%m-%d %H:%M}",
        )
    console.print(table)
    where = f" of node {node}" if node and not several_nodes else ""
    console.print(f"{len(profiles)} profile(s){where} in {store_path}")
