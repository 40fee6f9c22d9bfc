"""``cosched run``: plan (given a window) and execute, group by group, with a journal and a report."""

from __future__ import annotations

import argparse
import os
import shlex
from datetime import datetime, timezone
from pathlib import Path

from env.node.discover import local_node_id
from env.errors import InputError
from env.real.executor import Executor, SoloResult, preflight, resume_state
from env.plan.models import Excluded, Plan, RunGroup, RunReport
from env.sim.nodes import load_node
from env.node.spec import NodeSpec
from service.chart import schedule_chart
from service.documents import read_window_or_plan
from service.output import emit
from service.runreport import LiveProgress, build_report, render_report


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="plan (given a window) and execute a job window, group by group",
        description="Execute a plan (PLAN.json) or plan and execute a window (WINDOW.json) on this node. "
        "Writes a run directory with the plan, a journal, each job's output, the report and a picture.",
    )
    p.add_argument("document", nargs="?", help="WINDOW.json or PLAN.json")
    p.add_argument("--backend", choices=("real", "sim"), default="real", help="real: run on this node (default); sim: simulate the plan")
    p.add_argument("--node", default=None, help="node to plan for (default: local for real, sim:reference for sim)")
    p.add_argument("--policy", default=None, help="planning policy for a window (default: agent when a model exists)")
    p.add_argument("--model", default=None, help="model file for the agent policy")
    p.add_argument("--dry-run", action="store_true", help="print the groups and exact argv without running anything")
    p.add_argument("--pin-runtime", action="store_true", help="load the C pinning runtime into every job (LD_PRELOAD)")
    p.add_argument("--timeout", type=float, default=None, metavar="S", help="stop a job that runs longer than S seconds")
    p.add_argument("--fail-fast", action="store_true", help="stop after the first failing job (default: record it, go on)")
    p.add_argument("--measure-timeshare", action="store_true", help="also run every job alone to measure time sharing")
    p.add_argument("--resume", metavar="RUN_DIR", help="finish an interrupted run without re-running finished groups")
    p.add_argument("--runs", default="runs", metavar="DIR", help="where run directories are made (default: ./runs)")
    p.add_argument("--json", action="store_true", help="print the run report as one JSON document")
    p.set_defaults(handler=run)


def _new_run_dir(base: Path) -> Path:
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H-%M-%S")
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create {base}: {exc.strerror} (choose another --runs DIR)") from exc
    for n in range(1000):
        d = base / (stamp if n == 0 else f"{stamp}.{n}")
        try:
            d.mkdir()
            return d
        except FileExistsError:
            continue
        except OSError as exc:
            raise InputError(f"cannot create {d}: {exc.strerror} (choose another --runs DIR)") from exc
    raise InputError(f"too many runs named {stamp} in {base}")


def _solo_runner(node: NodeSpec, node_id: str):  # noqa: ANN202 - returns env.real.executor.SoloRunner
    """Run a job without a profile alone on the whole node under perf (launched like every job: the whole
    node's launch prefix), and store its profile."""
    from env.plan.launch import solo_prefix
    from profiler.perfrun import perf_version, run_under_perf
    from profiler.profiling import build_profile
    from profiler.store import ProfileStore

    def run_solo(job: Excluded, out: Path, err: Path, timeout_s: float | None) -> SoloResult:
        with open(out, "wb") as o, open(err, "wb") as e:
            res = run_under_perf(job.command, env={**os.environ, **job.env}, stdout=o, stderr=e, timeout_s=timeout_s,
                                 launch_prefix=solo_prefix(node))
        if res.ok:
            ProfileStore().put(build_profile(job.profile or job.id, node_id, res, None, perf_version=perf_version()))
        return SoloResult(
            exit_code=res.exit_status if res.exit_status >= 0 and not res.timed_out else None,
            signal=res.signal,
            wall_s=res.wall_s,
            timed_out=res.timed_out,
        )

    return run_solo


def _timeshare_from_profiles(plan: Plan, groups: list[RunGroup], node_id: str) -> tuple[float | None, str]:
    """Sum of solo durations from the stored profiles; jobs profiled during this run count their solo run."""
    from profiler.store import ProfileStore

    store = ProfileStore()
    total, missing = 0.0, []
    for g in plan.groups:
        for j in g.jobs:
            prof = store.get(j.profile, node_id)
            if prof is None:
                missing.append(j.profile)
            else:
                total += prof.duration_s
    total += sum(g.makespan_s for g in groups if g.solo_profile)
    if missing:
        return None, f"predicted from profiles: missing on this node: {', '.join(sorted(set(missing)))}"
    return total, "predicted from profiles: the sum of the stored solo times"


def timeshare_plan(plan: Plan, node: NodeSpec) -> Plan:
    """Time sharing of a plan's jobs: each alone on the whole node, in plan order (``PlanBuilder.place_whole_node``,
    as the ``timeshare`` policy plans it), so its runs are launched like every other job."""
    from env.plan.actions import ScheduleAction
    from env.plan.models import WindowJob
    from env.plan.builder import PlanBuilder

    jobs = [j for g in plan.groups for j in g.jobs]
    b = PlanBuilder(node=node, schedule=ScheduleAction("compact", "first-touch"), max_concurrency=1, window_size=max(1, len(jobs)))
    for j in jobs:
        b.place_whole_node(WindowJob(id=j.id, profile=j.profile, command=j.command, env=j.env))
    return b.build("timeshare")


def _measure_timeshare(plan: Plan, node: NodeSpec, run_dir: Path, timeout_s: float | None, progress: LiveProgress) -> tuple[float | None, str]:
    """Run every planned job alone on the whole node, one after another, through the executor (its own run
    directory ``timeshare/`` with a journal, each job in its own process group, the run's timeout)."""
    ts = timeshare_plan(plan, node)
    ts_dir = run_dir / "timeshare"
    ts_dir.mkdir(exist_ok=True)
    (ts_dir / "plan.json").write_text(ts.model_dump_json(indent=2))
    progress.console.print(f"time sharing: {len(ts.groups)} job(s) alone on the whole node ({ts_dir})", highlight=False)
    groups = Executor(ts, node, ts_dir, timeout_s=timeout_s).run()
    failed = [j.id for g in groups for j in g.jobs if j.exit_code != 0]
    if failed:
        return None, f"not measured: {', '.join(failed)} failed alone (see {ts_dir})"
    return sum(g.makespan_s for g in groups), "measured in this run: each job alone"


def _print_dry_run(plan: Plan) -> None:
    print(f"plan for {plan.node.name} (policy {plan.policy}), nothing is run:")
    for g in plan.groups:
        print(f"group {g.index}:")
        for j in g.jobs:
            print(f"  {j.id}: cpus {j.cpus}")
            print(f"    {shlex.join(j.launch)}")
    for e in plan.excluded:
        print(f"alone, profiled: {e.id}: {shlex.join(e.command)}  ({e.reason})")
    for what, why in plan.enforcement.reasons.items():
        print(f"not enforced: {what}: {why}")


def _plan_for(args: argparse.Namespace, node_name: str) -> Plan:
    doc = read_window_or_plan(args.document)
    if isinstance(doc, Plan):
        return doc
    if args.backend == "real":
        doc.require_commands()
    from service.planning import plan_window

    return plan_window(doc, node_name, policy=args.policy, model=args.model, pin_runtime=args.pin_runtime)


def run(args: argparse.Namespace) -> int:
    if args.resume:
        return _resume(args)
    if not args.document:
        raise InputError("give WINDOW.json or PLAN.json (or --resume RUN_DIR)")
    node_name = args.node or ("local" if args.backend == "real" else "sim:reference")
    plan = _plan_for(args, node_name)
    if args.backend == "sim":
        from service.planning import simulate

        report = simulate(plan)
        emit(report, args.json, lambda: render_report(report))
        return 0
    node = load_node("local")
    if args.dry_run:
        from env.plan.builder import check_plan_for_node

        check_plan_for_node(plan, node)
        emit(plan, args.json, lambda: _print_dry_run(plan))
        return 0
    preflight(plan, node)
    run_dir = _new_run_dir(Path(args.runs))
    (run_dir / "plan.json").write_text(plan.model_dump_json(indent=2))
    return _execute(args, plan, node, run_dir, None)


def _resume(args: argparse.Namespace) -> int:
    run_dir = Path(args.resume)
    state = resume_state(run_dir)
    try:
        plan = Plan.model_validate_json((run_dir / "plan.json").read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"{run_dir}/plan.json is missing or unreadable: {exc}") from None
    node = load_node("local")
    preflight(plan, node)
    return _execute(args, plan, node, run_dir, state)


def _execute(args: argparse.Namespace, plan: Plan, node: NodeSpec, run_dir: Path, state) -> int:  # noqa: ANN001
    nid = local_node_id()
    n_stages = len(plan.groups) + sum(1 for e in plan.excluded if e.command)
    progress = LiveProgress(n_stages)
    try:
        executor = Executor(plan, node, run_dir, timeout_s=args.timeout, fail_fast=args.fail_fast, progress=progress, solo_runner=_solo_runner(node, nid))
        groups = executor.run(state)
        if args.measure_timeshare:
            timeshare, source = _measure_timeshare(plan, node, run_dir, args.timeout, progress)
            if timeshare is not None:
                timeshare += sum(g.makespan_s for g in groups if g.solo_profile)
        else:
            timeshare, source = _timeshare_from_profiles(plan, groups, nid)
    finally:
        progress.close()
    report = build_report(plan, groups, backend="real", run_dir=str(run_dir), timeshare_s=timeshare, timeshare_source=source)
    from env.calibration.runs import predict_and_record

    report = predict_and_record(report, nid)  # each group beside the node model's prediction, kept for --update
    (run_dir / "report.json").write_text(report.model_dump_json(indent=2))
    schedule_chart(report, run_dir / "schedule.png", node.cpus)
    emit(report, args.json, lambda: render_report(report))
    return 1 if report.failed else 0


__all__ = ["register", "RunReport"]
