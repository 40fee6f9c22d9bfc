"""The batch runner's presentation: the run report as a terminal table, live progress on stderr."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from env.plan.models import RunReport


def render_report(report: RunReport) -> None:
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

    def __call__(self, kind: str, info: dict[str, Any]) -> None:
        if kind == "run_start":
            self.total = info["groups"] + info["solo"]
            if self.console.is_terminal and self.status is None:
                self.status = self.console.status("starting")
                self.status.start()
            return
        if kind == "tick":
            if self.status:
                self.status.update(f"group {info['group'] + 1}/{self.total}: running {', '.join(info['running'])} ({info['elapsed']:.1f} s)")
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
