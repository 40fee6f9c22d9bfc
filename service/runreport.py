"""The batch runner's presentation: the run report as a terminal table, live progress on stderr."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from env.plan.models import RunReport
from env.plan.stream_plan import ContinuousRunReport


def render_continuous_report(report: ContinuousRunReport) -> None:
    """A continuous run: each job in the order it started, what it waited for, its start and end."""
    console = Console()
    kind = "simulated" if report.simulated else "measured"
    table = Table(title=f"continuous run on {report.plan.node.name} ({report.backend} backend, times {kind})")
    predicted = any(j.predicted_start_s is not None for j in report.jobs)
    for col in ("job", "cpus", "after", "exit", "start s", "end s") + (("predicted s",) if predicted else ()):
        table.add_column(col)
    after = {j.id: j.after for j in report.plan.launches}
    for j in report.jobs:
        status = "timeout" if j.timed_out else str(j.exit_code) if j.exit_code is not None else f"signal {j.signal}"
        cpus = ",".join(map(str, j.cpus)) if j.cpus else "all (solo, profiled)"
        pred = (f"{j.predicted_start_s:.1f}-{j.predicted_end_s:.1f}" if j.predicted_start_s is not None
                and j.predicted_end_s is not None else "-")
        table.add_row(j.id, cpus, ", ".join(after.get(j.id, [])) or "-", status, f"{j.start_s:.2f}", f"{j.end_s:.2f}",
                      *((pred,) if predicted else ()))
    console.print(table)
    for c in report.changes:
        when = f"just before {c.before_launch} (keeps CPUs {','.join(map(str, c.cpus or []))})" if c.before_launch else \
            f"at the end of {c.at_end_of}"
        console.print(f"change of {c.job} {when}: " + ("applied" if c.applied else f"not applied: {c.reason}"),
                      highlight=False)
    console.print(f"total {report.total_s:.2f} s ({kind}), at most {report.max_running} jobs at once "
                  f"(Cmax {report.plan.max_concurrency})")
    if report.predicted_makespan_s is not None:
        console.print(f"predicted {report.predicted_makespan_s:.2f} s ({report.plan.predictions_source or 'prediction'})")
    if report.timeshare_s is not None:
        console.print(f"time sharing {report.timeshare_s:.2f} s ({report.timeshare_source})")
    elif report.timeshare_source:
        console.print(f"time sharing unknown ({report.timeshare_source})")
    if report.throughput_vs_timeshare is not None:
        console.print(f"[bold]throughput vs time sharing: {report.throughput_vs_timeshare:.3f}[/] ({kind})")
    if report.failed:
        console.print(f"[red]failed: {', '.join(report.failed)}[/]")
    if report.run_dir:
        console.print(f"run directory: {report.run_dir}")


def render_report(report: RunReport | ContinuousRunReport) -> None:
    if isinstance(report, ContinuousRunReport):
        return render_continuous_report(report)
    console = Console()
    kind = "simulated" if report.simulated else "measured"
    table = Table(title=f"run on {report.plan.node.name} ({report.backend} backend, times {kind})")
    predicted = any(g.predicted_makespan_s is not None for g in report.groups)
    for col in ("group", "job", "cpus", "exit", "wall s", "group makespan s") + (("predicted s",) if predicted else ()):
        table.add_column(col)
    plan_jobs = {j.id: j for g in report.plan.groups for j in g.jobs}
    for g in report.groups:
        for k, j in enumerate(g.jobs):
            cpus = "all (solo, profiled)" if g.solo_profile else ",".join(map(str, plan_jobs[j.id].cpus)) if j.id in plan_jobs else "?"
            status = "timeout" if j.timed_out else str(j.exit_code) if j.exit_code is not None else f"signal {j.signal}"
            pred = (f"{g.predicted_makespan_s:.2f}" if g.predicted_makespan_s is not None else "-") if k == 0 else ""
            table.add_row(str(g.index + 1) if k == 0 else "", j.id, cpus, status, f"{j.wall_s:.2f}", f"{g.makespan_s:.2f}" if k == 0 else "",
                          *((pred,) if predicted else ()))
    console.print(table)
    console.print(f"total {report.total_s:.2f} s ({kind})")
    if report.timeshare_s is not None:
        console.print(f"time sharing {report.timeshare_s:.2f} s ({report.timeshare_source})")
    elif report.timeshare_source:
        console.print(f"time sharing unknown ({report.timeshare_source})")
    if report.predictions_source:
        console.print(f"group predictions: {report.predictions_source}")
    if report.throughput_vs_timeshare is not None:
        console.print(f"[bold]throughput vs time sharing: {report.throughput_vs_timeshare:.3f}[/] ({kind})")
    if report.failed:
        console.print(f"[red]failed: {', '.join(report.failed)}[/]")
    if report.run_dir:
        console.print(f"run directory: {report.run_dir}")


class LiveProgress:
    """One status line on stderr while groups run (plain lines when stderr is not a terminal); an
    ``env.real.executor.Progress``: the executor's events, from ``run_start`` (how many groups) on."""

    def __init__(self) -> None:
        self.console = Console(stderr=True)
        self.total = 0
        self.status = None
        self.continuous = False

    def __call__(self, kind: str, info: dict[str, Any]) -> None:
        if kind == "run_start":
            self.total = info["groups"] + info["solo"]
            self.continuous = info.get("mode") == "continuous"
            if self.console.is_terminal and self.status is None:
                self.status = self.console.status("starting")
                self.status.start()
            return
        if kind == "tick":
            if self.status and self.continuous:
                self.status.update(f"{info['elapsed']:.1f} s: running {', '.join(info['running'])}")
            elif self.status:
                self.status.update(f"group {info['group'] + 1}/{self.total}: running {', '.join(info['running'])} ({info['elapsed']:.1f} s)")
            return
        if kind == "job_start":  # a continuous plan's launch
            waited = f" after {', '.join(info['after'])}" if info.get("after") else ""
            solo = " alone, while profiling it" if info.get("solo_profile") else ""
            self.console.print(f"{info['at_s']:.2f} s: starting {info['job']}{waited}{solo}", highlight=False)
            return
        if kind == "change":
            what = "applied" if info["applied"] else f"not applied: {info['reason']}"
            self.console.print(f"  change of {info['job']} at the end of {info['at_end_of']}: {what}", highlight=False)
            return
        if kind == "group_start":
            solo = " alone, while profiling it" if info.get("solo_profile") else ""
            self.console.print(f"group {info['group'] + 1}/{self.total}: starting {', '.join(info['jobs'])}{solo}", highlight=False)
        elif kind == "job_end":
            what = "timed out" if info["timed_out"] else f"exit {info['exit_code']}"
            self.console.print(f"  {info['job']}: {what} after {info['wall_s']:.2f} s", highlight=False)
        elif kind == "group_end":
            self.console.print(f"  group {info['group'] + 1} done in {info['makespan_s']:.2f} s", highlight=False)
        elif kind == "orphans_stopped":
            jobs = info["jobs"]
            self.console.print(f"stopped {len(jobs)} process(es) the interrupted run left running: "
                               + ", ".join(f"{j['job']} (pid {j['pid']}, group {j['group'] + 1})" for j in jobs)
                               + "; their group runs again whole", highlight=False, soft_wrap=True)
        elif kind == "timeshare_start":
            self.console.print(f"time sharing: {info['jobs']} job(s) alone on the whole node ({info['run_dir']})", highlight=False)

    def close(self) -> None:
        if self.status:
            self.status.stop()
        sys.stderr.flush()


def run_continuous(plan, args, node, resume=None) -> int:
    """``cosched run PLAN.json`` of a continuous plan (``resume``: an interrupted run's directory): the sim backend
    replays it on the node model; the real backend runs it on this node with live progress, the table, the picture
    and JSON. Exit 1 when a job failed."""
    from pathlib import Path

    from env.real.launches import (
        open_launches,
        run_launches,
        simulate_launches,
        start_launches,
    )
    from service.chart import schedule_chart
    from service.output import emit

    if args.backend == "sim" and resume is None:
        report = simulate_launches(plan)
        emit(report, args.json, lambda: render_continuous_report(report))
        return 1 if report.failed else 0
    if args.dry_run:
        import shlex

        from env.real.launches import preflight_launches

        preflight_launches(plan, node)

        def show() -> None:
            print(f"continuous plan for {plan.node.name} (policy {plan.policy}, Cmax {plan.max_concurrency}), nothing is run:")
            for k, j in enumerate(plan.launches):
                print(f"{k + 1}. {j.id}: cpus {j.cpus}, after {', '.join(j.after) or 'nothing'}")
                print(f"    {shlex.join(j.launch)}")
            for e in plan.excluded:
                print(f"alone, profiled: {e.id}: {shlex.join(e.command)}  ({e.reason})")
            for what, why in plan.enforcement.reasons.items():
                print(f"not enforced: {what}: {why}")

        emit(plan, args.json, show)
        return 0
    from env.node.discover import local_node_id
    from env.real.run import solo_runner

    if resume is not None:
        plan, state = open_launches(Path(resume), node)
        run_dir = Path(resume)
    else:
        run_dir, state = start_launches(plan, node, Path(args.runs)), None
    progress = LiveProgress()
    try:
        report = run_launches(plan, node, run_dir, state=state, timeout_s=args.timeout, fail_fast=args.fail_fast,
                              progress=progress, timeshare="measure" if args.measure_timeshare else "profiles",
                              solo=solo_runner(node, local_node_id()) if any(e.command for e in plan.excluded) else None)
    finally:
        progress.close()
    schedule_chart(report, run_dir / "schedule.png", node.cpus)
    emit(report, args.json, lambda: render_continuous_report(report))
    return 1 if report.failed else 0
