"""The real node as a ``Backend``: plans are executed for real on this node (``env.real.run``).

``run(plan)`` is ``cosched run``: a new run directory under ``work_dir``, the whole plan, a measured report.
``evaluate(plan)`` scores a plan for training and evaluation: real runs are slow, so measured outcomes are kept:
a group whose configuration (each job's profile, command, CPUs, memory policy, ways and bandwidth) was already
measured is not run again, its recorded makespan is reused (and counted as reused); any other group is run
alone as a one-group plan through the same path. The measurements live in a JSON file written after every
group, so a training run that stops can resume without re-measuring anything.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from env.errors import RunError
from env.node.spec import NodeSpec
from env.plan.models import Plan, PlanGroup, RunReport
from env.real.executor import Progress, preflight
from env.real.journal import JournalState
from env.real.run import execute_plan, open_run, start_run


def group_key(group: PlanGroup) -> str:
    """The configuration of a group, independent of order and of the job ids."""
    jobs = sorted(
        json.dumps([j.profile, j.command, j.env, j.cpus, j.memory, {k: v.mask for k, v in j.l3.items()}, j.mem_bw_percent], sort_keys=True)
        for j in group.jobs
    )
    return json.dumps(jobs)


class RealBackend:
    name = "real"
    simulated = False

    def __init__(self, node: NodeSpec, work_dir: Path, *, timeout_s: float | None = None, reuse: bool = True,
                 progress: Progress | None = None, fail_fast: bool = False, measure_timeshare: bool = False) -> None:
        """``work_dir``: where run directories are made (and ``evaluate``'s measurements kept).
        ``fail_fast``, ``measure_timeshare``: ``run``'s (``cosched run``'s flags)."""
        self.node = node
        self.work_dir = work_dir
        self.timeout_s = timeout_s
        self.reuse = reuse
        self.progress = progress
        self.fail_fast = fail_fast
        self.measure_timeshare = measure_timeshare
        self._cache_path = work_dir / "measurements.json"
        self._measurements: dict[str, list[float]] | None = None  # read on first use: run() does not need it
        self.runs = 0  # groups actually executed by evaluate()
        self.reused = 0  # groups answered from earlier measurements

    # -- a whole plan, as cosched run runs it

    def run(self, plan: Plan, seed: int | None = None) -> RunReport:
        """Execute ``plan`` in a new run directory; its report (measured; ``seed`` has no say on a real node)."""
        return self._execute(plan, start_run(plan, self.node, self.work_dir))

    def resume(self, run_dir: Path) -> RunReport:
        """Finish an interrupted run without re-running the groups its journal says are done."""
        plan, state = open_run(run_dir, self.node)
        return self._execute(plan, run_dir, state)

    def _execute(self, plan: Plan, run_dir: Path, state: JournalState | None = None) -> RunReport:
        return execute_plan(plan, self.node, run_dir, state=state, timeout_s=self.timeout_s, fail_fast=self.fail_fast,
                            progress=self.progress, timeshare="measure" if self.measure_timeshare else "profiles")

    # -- group makespans, measured once per configuration

    @property
    def measurements(self) -> dict[str, list[float]]:
        if self._measurements is None:
            self._measurements = json.loads(self._cache_path.read_text()) if self._cache_path.exists() else {}
        return self._measurements

    def _save(self) -> None:
        tmp = self._cache_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.measurements, indent=1))
        os.replace(tmp, self._cache_path)

    def evaluate(self, plan: Plan, seed: int | None = None) -> list[float]:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        preflight(plan, self.node)
        makespans = []
        for g in plan.groups:
            key = group_key(g)
            if self.reuse and key in self.measurements:
                self.reused += 1
                makespans.append(self.measurements[key][0])
                continue
            one = plan.model_copy(update={"groups": [g.model_copy(update={"index": 0})], "excluded": []})
            run_dir = self.work_dir / f"group-{len(os.listdir(self.work_dir)):06d}"
            run_dir.mkdir()
            (run_dir / "plan.json").write_text(one.model_dump_json(indent=1))
            # A scoring run: no time sharing to learn, nothing recorded for calibration (as before).
            report = execute_plan(one, self.node, run_dir, timeout_s=self.timeout_s, progress=self.progress,
                                  timeshare="none", record=False)
            result = report.groups[0]
            if report.failed:
                raise RunError(f"jobs {', '.join(report.failed)} failed while training on the real node (see {run_dir})")
            self.runs += 1
            self.measurements.setdefault(key, []).append(result.makespan_s)
            self._save()
            makespans.append(result.makespan_s)
        return makespans
