"""The real node as a training/evaluation ``Backend``: groups are executed for real, one after another.

Real runs are slow, so measured outcomes are kept: a group whose configuration (each job's profile,
command, CPUs, memory policy, ways and bandwidth) was already measured is not run again, its recorded
makespan is reused (and counted as reused). The measurements live in a JSON file written after every
group, so a training run that stops can resume without re-measuring anything.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from env.errors import RunError
from env.real.executor import Executor, preflight
from env.plan.models import Plan, PlanGroup
from env.node.spec import NodeSpec


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

    def __init__(self, node: NodeSpec, work_dir: Path, *, timeout_s: float | None = None, reuse: bool = True, progress: Any = None) -> None:
        self.node = node
        self.work_dir = work_dir
        self.timeout_s = timeout_s
        self.reuse = reuse
        self.progress = progress
        work_dir.mkdir(parents=True, exist_ok=True)
        self._cache_path = work_dir / "measurements.json"
        self.measurements: dict[str, list[float]] = json.loads(self._cache_path.read_text()) if self._cache_path.exists() else {}
        self.runs = 0  # groups actually executed by this backend object
        self.reused = 0  # groups answered from earlier measurements

    def _save(self) -> None:
        tmp = self._cache_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.measurements, indent=1))
        os.replace(tmp, self._cache_path)

    def evaluate(self, plan: Plan, seed: int | None = None) -> list[float]:
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
            result = Executor(one, self.node, run_dir, timeout_s=self.timeout_s, progress=self.progress).run()[0]
            failed = [j.id for j in result.jobs if j.exit_code != 0]
            if failed:
                raise RunError(f"jobs {', '.join(failed)} failed while training on the real node (see {run_dir})")
            self.runs += 1
            self.measurements.setdefault(key, []).append(result.makespan_s)
            self._save()
            makespans.append(result.makespan_s)
        return makespans
