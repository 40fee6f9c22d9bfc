"""``cosched run``: plan (given a window) and execute, in groups or continuously, with a journal and a report.

The command line only: the plan comes from ``service.planning``, the run from the backend (``env.real.run`` does
the work), and the progress, table, picture and JSON from ``service``."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Callable

from env.errors import InputError
from env.plan.models import Plan, RunReport
from env.plan.stream_plan import ContinuousPlan
from env.real.backend import RealBackend
from env.sim.nodes import load_node
from service.chart import schedule_chart
from service.documents import read_window_or_plan
from service.output import emit
from service.runreport import LiveProgress, render_report, run_continuous


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="plan (given a window) and execute it: groups one after another, or each job as what it needs frees",
        description="Execute a plan (PLAN.json) or plan and execute a window (WINDOW.json) on this node. "
        "Writes a run directory with the plan, a journal, each job's output, the report and a picture.",
    )
    p.add_argument("document", nargs="?", help="WINDOW.json or PLAN.json")
    p.add_argument("--backend", choices=("real", "sim"), default="real", help="real: run on this node (default); sim: simulate the plan")
    p.add_argument("--node", default=None, help="node to plan for (default: local for real, sim:reference for sim)")
    p.add_argument("--policy", default=None, help="planning policy for a window, as in 'cosched schedule' (its --help lists them and the "
                   "defaults: agent-search where a model and a node model exist; continuous: rollout; --mode continuous "
                   "also rollout-giveback, which takes CPUs from running jobs that say adapts)")
    p.add_argument("--model", default=None, help="model file for the agent policies (--mode continuous: a stream model, default "
                   "the node's shipped one)")
    p.add_argument("--dry-run", action="store_true", help="print the groups and exact argv without running anything")
    p.add_argument("--pin-runtime", action="store_true", help="load the C pinning runtime into every job (LD_PRELOAD)")
    p.add_argument("--timeout", type=float, default=None, metavar="S", help="stop a job that runs longer than S seconds")
    p.add_argument("--fail-fast", action="store_true", help="stop after the first failing job (default: record it, go on)")
    p.add_argument("--measure-timeshare", action="store_true", help="also run every job alone to measure time sharing")
    p.add_argument("--mode", choices=("groups", "continuous"), default=None,
                   help="for a WINDOW.json: continuous decides online at every real event (a job ends, a job's "
                   "submit_s arrives) with a stream policy (--policy, default rollout), journaled and resumable; "
                   "groups plans groups first; default: the mode 'cosched schedule' gives (the one the node model "
                   "predicts better; groups while it learns a new program from co-runs; continuous where a job gives "
                   "its own solo_s), the plan's continuous "
                   "launches run at real ends")
    p.add_argument("--no-learn-lengths", dest="learn_lengths", action="store_false",
                   help="--mode continuous on this node: decide with the profiles' lengths only (default: each "
                   "program's time alone is learned from its jobs that ended in the run; a job's own solo_s stands "
                   "either way)")
    p.add_argument("--resume", metavar="RUN_DIR", help="finish an interrupted run without re-running finished groups")
    p.add_argument("--runs", default="runs", metavar="DIR", help="where run directories are made (default: ./runs)")
    p.add_argument("--json", action="store_true", help="print the run report as one JSON document")
    p.set_defaults(handler=run)


def _print_dry_run(plan: Plan) -> None:
    print(f"plan for {plan.node.name} (policy {plan.policy}), nothing is run:")
    for g in plan.groups:
        print(f"group {g.index + 1}:")
        for j in g.jobs:
            print(f"  {j.id}: cpus {j.cpus}")
            print(f"    {shlex.join(j.launch)}")
    for e in plan.excluded:
        print(f"alone, profiled: {e.id}: {shlex.join(e.command)}  ({e.reason})")
    for what, why in plan.enforcement.reasons.items():
        print(f"not enforced: {what}: {why}")


def _plan_for(args: argparse.Namespace, node_name: str) -> Plan:
    doc = read_window_or_plan(args.document)
    if isinstance(doc, (Plan, ContinuousPlan)):
        return doc  # type: ignore[return-value]
    if args.backend == "real":
        doc.require_commands()
    from service.planning import plan_document

    # the mode as 'cosched schedule' plans it: asked for, else whichever the node model predicts better
    return plan_document(doc, load_node(node_name), mode=args.mode, policy=args.policy, model=args.model,
                         pin_runtime=args.pin_runtime)


def run(args: argparse.Namespace) -> int:
    from env.real.online import is_online_run

    if (args.resume and is_online_run(Path(args.resume))) or (args.mode == "continuous" and not args.resume
                                                               and args.document and not _is_plan(args.document)):
        from service.commands.run_online import run_online_command

        return run_online_command(args)  # a window decided online: env.real.online
    if args.resume:
        from env.real.launches import is_continuous_run

        if is_continuous_run(Path(args.resume)):  # a continuous plan's run (service.runreport.run_continuous)
            return run_continuous(None, args, load_node("local"), resume=args.resume)
        return _execute(args, lambda backend: backend.resume(Path(args.resume)))
    if not args.document:
        raise InputError("give WINDOW.json or PLAN.json (or --resume RUN_DIR)")
    plan = _plan_for(args, args.node or ("local" if args.backend == "real" else "sim:reference"))
    if isinstance(plan, ContinuousPlan) and args.backend == "real" and not args.dry_run and not _is_plan(args.document):
        # a window whose mode is continuous runs as --mode continuous does: decided online at every real event by the
        # plan's policy (the real ends are what they are; a plan's launches would wait for the predicted order)
        from service.commands.run_online import run_online_command

        args.mode, args.policy, args.mode_reason = "continuous", plan.policy, plan.mode_reason
        return run_online_command(args)
    if isinstance(plan, ContinuousPlan):  # launches at events: env.real.launches
        return run_continuous(plan, args, load_node("local") if args.backend == "real" else None)
    if args.backend == "sim":
        from service.planning import simulate

        report = simulate(plan)
        emit(report, args.json, lambda: render_report(report))
        return 0
    if args.dry_run:
        from env.plan.builder import check_plan_for_node

        check_plan_for_node(plan, load_node("local"))
        emit(plan, args.json, lambda: _print_dry_run(plan))
        return 0
    return _execute(args, lambda backend: backend.run(plan))


def _is_plan(path: str) -> bool:
    from service.documents import read_json

    doc = read_json(path)
    return isinstance(doc, dict) and ("groups" in doc or "launches" in doc)


def _execute(args: argparse.Namespace, how: Callable[[RealBackend], RunReport]) -> int:
    """Run on this node (``how``: a new run or a resumed one) with live progress; the table, picture and JSON."""
    node = load_node("local")
    progress = LiveProgress()
    backend = RealBackend(node, Path(args.runs), timeout_s=args.timeout, fail_fast=args.fail_fast, progress=progress,
                          measure_timeshare=args.measure_timeshare)
    try:
        report = how(backend)
    finally:
        progress.close()
    schedule_chart(report, Path(str(report.run_dir)) / "schedule.png", node.cpus)
    emit(report, args.json, lambda: render_report(report))
    return 1 if report.failed else 0


__all__ = ["register", "RunReport"]
