"""The executor's background jobs: they run until the group's other jobs end, then are stopped; the
group's makespan is the others'. Real processes (sleep), no timing asserted beyond order."""

from __future__ import annotations

import json
from pathlib import Path

from env.node.discover import discover
from env.real.executor import Executor
from env.plan.models import Enforcement, NodeRef, Plan, PlanGroup, PlanJob, SchedulePolicy

NODE = discover()


def _job(job_id: str, command: list[str]) -> PlanJob:
    return PlanJob(id=job_id, profile=job_id, command=command, cpus=[NODE.cpus[0]], numa_nodes=[0], memory="first-touch", l3={}, mem_bw_percent={}, launch=command)


def test_background_job_is_stopped_when_the_foreground_ends(tmp_path: Path) -> None:
    jobs = [_job("fg", ["sleep", "0.2"]), _job("bg", ["sleep", "60"])]
    plan = Plan.model_construct(node=NodeRef(**NODE.summary()), policy="t", model=None, window_size=2, max_concurrency=2,
                                schedule_policy=SchedulePolicy(), groups=[PlanGroup(index=0, jobs=jobs)], excluded=[],
                                enforcement=Enforcement(cpus=False, memory=False, l3=False, mem_bw=False), pin_runtime=False)
    group = Executor(plan, NODE, tmp_path, timeout_s=30, background={"bg"}).run()[0]
    rec = {j.id: j for j in group.jobs}
    assert rec["fg"].exit_code == 0 and rec["bg"].signal == 15 and rec["bg"].wall_s < 30
    assert group.makespan_s <= rec["bg"].start_s + rec["bg"].wall_s  # the makespan is the foreground's
    ends = [json.loads(line) for line in (tmp_path / "journal.jsonl").read_text().splitlines() if '"job_end"' in line]
    assert [e["job"] for e in ends] == ["fg", "bg"]
