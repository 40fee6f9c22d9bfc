"""Running a plan on this node, start to finish: the one path of ``cosched run`` and of ``RealBackend``.

1. ``start_run``: preflight (bad input leaves nothing behind), a fresh run directory holding ``plan.json``;
   ``open_run`` instead finds an interrupted run's plan and journal (its orphans stopped).
2. ``execute_plan``: the executor runs the groups (journal, each job's output), then jobs without a profile
   alone while profiling them (``solo_runner``); time sharing is measured (each job alone, ``timeshare/``) or
   predicted from the stored profiles; the ``RunReport`` sets each group beside the node model's prediction,
   keeps the groups in the calibration data and is written to ``report.json``.

Planning a window is the caller's job: this module takes a plan.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from env.errors import InputError
from env.node.spec import NodeSpec
from env.plan.models import Excluded, Plan, RunGroup, RunReport
from env.real.executor import Executor, Progress, SoloResult, SoloRunner, preflight, resume_state
from env.real.journal import JournalState

# How a run learns its time-sharing total: each job run alone in this run, the stored profiles, or not at all.
Timeshare = Literal["measure", "profiles", "none"]


def new_run_dir(base: Path) -> Path:
    """A fresh directory under ``base`` named by the UTC time (``.1``, ``.2``, ... when taken)."""
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


def start_run(plan: Plan, node: NodeSpec, runs: Path) -> Path:
    """Preflight, then a new run directory under ``runs`` with the plan in it."""
    preflight(plan, node)
    run_dir = new_run_dir(runs)
    (run_dir / "plan.json").write_text(plan.model_dump_json(indent=2))
    return run_dir


def open_run(run_dir: Path, node: NodeSpec) -> tuple[Plan, JournalState]:
    """An interrupted run to finish: its plan (checked again) and what its journal says is done."""
    state = resume_state(run_dir)
    try:
        plan = Plan.model_validate_json((run_dir / "plan.json").read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"{run_dir}/plan.json is missing or unreadable: {exc}") from None
    preflight(plan, node)
    return plan, state


def solo_runner(node: NodeSpec, node_id: str) -> SoloRunner:
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


def timeshare_plan(plan: Plan, node: NodeSpec) -> Plan:
    """Time sharing of a plan's jobs: each alone on the whole node, in plan order (``PlanBuilder.place_whole_node``,
    as the ``timeshare`` policy plans it), so its runs are launched like every other job."""
    from env.plan.actions import ScheduleAction
    from env.plan.builder import PlanBuilder
    from env.plan.models import WindowJob

    jobs = [j for g in plan.groups for j in g.jobs]
    b = PlanBuilder(node=node, schedule=ScheduleAction("compact", "first-touch"), max_concurrency=1, window_size=max(1, len(jobs)))
    for j in jobs:
        b.place_whole_node(WindowJob(id=j.id, profile=j.profile, command=j.command, env=j.env))
    return b.build("timeshare")


def measure_timeshare(plan: Plan, node: NodeSpec, run_dir: Path, timeout_s: float | None,
                      progress: Progress | None = None) -> tuple[float | None, str]:
    """Run every planned job alone on the whole node, one after another, through the executor (its own run
    directory ``timeshare/`` with a journal, each job in its own process group, the run's timeout)."""
    ts = timeshare_plan(plan, node)
    ts_dir = run_dir / "timeshare"
    ts_dir.mkdir(exist_ok=True)
    (ts_dir / "plan.json").write_text(ts.model_dump_json(indent=2))
    if progress is not None:
        progress("timeshare_start", {"jobs": len(ts.groups), "run_dir": str(ts_dir)})
    groups = Executor(ts, node, ts_dir, timeout_s=timeout_s).run()
    failed = [j.id for g in groups for j in g.jobs if j.exit_code != 0]
    if failed:
        return None, f"not measured: {', '.join(failed)} failed alone (see {ts_dir})"
    return sum(g.makespan_s for g in groups), "measured in this run: each job alone"


def timeshare_from_profiles(plan: Plan, groups: list[RunGroup], node_id: str) -> tuple[float | None, str]:
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


def build_report(plan: Plan, groups: list[RunGroup], *, run_dir: str | None, timeshare_s: float | None,
                 timeshare_source: str | None) -> RunReport:
    """The report of executed groups (measured times)."""
    total = round(sum(g.makespan_s for g in groups), 4)
    failed = [j.id for g in groups for j in g.jobs if j.exit_code != 0]
    return RunReport(
        run_dir=run_dir,
        backend="real",
        simulated=False,
        plan=plan,
        groups=groups,
        total_s=total,
        timeshare_s=round(timeshare_s, 4) if timeshare_s is not None else None,
        timeshare_source=timeshare_source,
        throughput_vs_timeshare=round(timeshare_s / total, 4) if timeshare_s and total > 0 else None,
        failed=failed,
    )


def execute_plan(plan: Plan, node: NodeSpec, run_dir: Path, *, state: JournalState | None = None,
                 timeout_s: float | None = None, fail_fast: bool = False, progress: Progress | None = None,
                 timeshare: Timeshare = "profiles", record: bool = True) -> RunReport:
    """Run a started (or resumed: ``state``) plan in ``run_dir`` and write its ``report.json``.
    ``record``: the groups beside the node model's prediction and kept in the calibration data."""
    from env.node.discover import local_node_id

    # This node's id keys the profiles and the calibration data; a scoring run (one group, nothing kept) needs none.
    needs_id = record or timeshare == "profiles" or any(e.command for e in plan.excluded)
    nid = local_node_id() if needs_id else ""
    executor = Executor(plan, node, run_dir, timeout_s=timeout_s, fail_fast=fail_fast, progress=progress,
                        solo_runner=solo_runner(node, nid) if needs_id else None)
    groups = executor.run(state)
    if timeshare == "measure":
        ts_s, source = measure_timeshare(plan, node, run_dir, timeout_s, progress)
        if ts_s is not None:
            ts_s += sum(g.makespan_s for g in groups if g.solo_profile)
    elif timeshare == "profiles":
        ts_s, source = timeshare_from_profiles(plan, groups, nid)
    else:
        ts_s, source = None, None
    report = build_report(plan, groups, run_dir=str(run_dir), timeshare_s=ts_s, timeshare_source=source)
    if record:
        from env.calibration.runs import predict_and_record

        report = predict_and_record(report, nid)  # each group beside the node model's prediction, kept for --update
    (run_dir / "report.json").write_text(report.model_dump_json(indent=2))
    return report
