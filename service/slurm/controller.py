"""The window controller: held jobs of the co-scheduling partition -> windows -> plans -> groups released
together, one group a node at a time.

One ``step``: read Slurm's jobs and nodes; reconcile the journal with them (jobs cancelled, started by
someone else, finished; releases lost by a restarted slurmctld are sent again); journal a window for the
new held jobs when W of them wait, or the oldest has waited ``gather_s``; give each waiting group, in plan
order, a free node (idle in Slurm, no group of ours on it): journal the node, write the placement files, pin
the jobs to the node, release them in one request. Every Slurm-side action is idempotent, so a step redone
after a crash does no harm; the journal (service/slurm/journal.py) is what makes it safe.

In continuous mode (``mode='continuous'``, service/slurm/continuous.py) there are no windows: at every event on
a node a decision starts held jobs there beside those still running, journaled as a one-group window already
dispatched to the node, and released by the same path.

Bad input never loses a job: an unreachable planner or slurmctld leaves the jobs held and is retried; a
cancelled job leaves its group; a plan for CPUs the partition's nodes do not have is replaced by running
each job alone with the whole node. Each such event is one line in the log.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from env.errors import CoschedError, RunError
from env.node.resctrl import group_name
from env.node.spec import NodeSpec
from env.plan.models import NAME_PATTERN, Plan, Window, WindowJob
from service.slurm import placement
from service.slurm.continuous import Continuous
from service.slurm.journal import GroupRow, JobRow, Journal, NewJob, SeenJob
from service.slurm.recovery import AVOID_S
from service.slurm.slurmcmd import (
    JobGone,
    SlurmAPI,
    SlurmJob,
    SlurmNode,
    SlurmUnavailable,
)

_NAME = re.compile(NAME_PATTERN)

Planner = Callable[[Window], Plan]


class PlannerUnavailable(RunError):
    """The planner (the HTTP service) did not answer: the jobs stay held and planning is retried."""


@dataclass
class ControllerConfig:
    partition: str
    placement_dir: Path
    window: int = 8
    cmax: int = 4
    gather_s: float = 2.0  # a partial window waits this long for more jobs (a burst lands in one window)
    # A job whose end the plugin recorded this long ago, which Slurm shows RUNNING (slurmctld restarted from state
    # saved while it ran), is cancelled in Slurm so its node frees; Slurm itself notices only when the node next
    # registers (measured: about 6.5 minutes after the restart).
    stale_after_s: float = 30.0
    pinrt_env: dict[str, str] = field(default_factory=dict)
    # 'groups': windows planned into groups, each released together on a free node, the next when one frees;
    # 'continuous': a decision at every event on each node (service/slurm/continuous.py), no barrier.
    mode: str = "groups"
    policy: str | None = None  # continuous mode's stream policy (default rollout; packing on a node without a model)
    # continuous mode: each program's length from its jobs that ended here (else its profile's alone)
    learn_lengths: bool = True


@dataclass
class StepResult:
    planned: int = 0  # jobs journaled into new windows
    windows: int = 0
    released: list[int] = field(default_factory=list)
    waiting_groups: int = 0
    active_groups: int = 0
    error: str | None = None


@dataclass
class Controller(Continuous):
    cfg: ControllerConfig
    slurm: SlurmAPI
    planner: Planner
    journal: Journal
    plan_node: Callable[[], NodeSpec | None] = lambda: None
    log: Callable[[str], None] = print
    clock: Callable[[], float] = time.time
    release_delays: list[float] = field(default_factory=list)  # seconds from a job's eligibility to its group's release
    _planner_down_logged: bool = field(default=False, repr=False)
    _slurm_down_logged: bool = field(default=False, repr=False)
    _known: dict[int, int] | None = field(default=None, repr=False)  # job id -> submit time, of the journal's jobs
    _seen: set[tuple[int, int]] | None = field(default=None, repr=False)  # (job id, submit time) seen held
    _unplanned: dict[int, SeenJob] = field(default_factory=dict, repr=False)  # seen, not yet planned
    _refused: set[str] | None = field(default=None, repr=False)  # refusal records already reported
    _active: set[int] = field(default_factory=set, repr=False)  # job ids in groups not over, this step
    _stale_checked: float = field(default=float("-inf"), repr=False)
    _read_at: float = field(default=0.0, repr=False)
    _ran: dict[int, dict[str, tuple[int, float]]] = field(default_factory=dict, repr=False)  # id -> node -> (submit, t)
    _old: dict | None = field(default=None, repr=False)  # id -> earlier jobs of it, records aside (recovery.OldRun)
    _all_off_said: set[int] = field(default_factory=set, repr=False)  # ids every node ran before, said once
    _pending_since: dict[tuple[int, int], float] = field(default_factory=dict, repr=False)  # released group -> seen pending
    _stuck_on: dict[tuple[int, int], dict[str, float]] = field(default_factory=dict, repr=False)  # group -> node left -> t
    _planned_ids: set[int] = field(default_factory=set, repr=False)  # jobs of groups waiting for a node, this step
    _c: dict = field(default_factory=dict, repr=False)  # continuous mode's state (service/slurm/continuous.py)

    # ------------------------------------------------------------------ one cycle

    def step(self, flush: bool = False) -> StepResult:
        res = StepResult()
        try:
            self._read_at = self.clock()  # the queue below is no newer than this
            jobs = {j.job_id: j for j in self.slurm.jobs()}
            nodes = [n for n in self.slurm.nodes() if self.cfg.partition in n.partitions]
        except SlurmUnavailable as exc:
            if not self._slurm_down_logged:
                self.log(f"slurmctld unreachable, retrying (nothing changes meanwhile): {exc}")
                self._slurm_down_logged = True
            res.error = str(exc)
            return res
        if self._slurm_down_logged:
            self.log("slurmctld answers again")
            self._slurm_down_logged = False
        self._note_nodes(jobs)
        self._late_ends()
        self._hold_started(jobs)
        self._reconcile(jobs, {n.name: n for n in nodes})
        self._see(jobs)
        self._report_refusals()
        if self.cfg.mode == "continuous":
            self._decide_nodes(jobs, nodes, res)
        else:
            self._plan_new(jobs, nodes, flush, res)
        self._dispatch(jobs, nodes, res)
        res.waiting_groups = len(self.journal.groups(("waiting",)))
        res.active_groups = len(self.journal.groups(("dispatched", "released")))
        return res

    # ------------------------------------------------------------------ reconcile with Slurm

    def _reconcile(self, jobs: dict[int, SlurmJob], nodes: dict[str, SlurmNode]) -> None:
        active = self.journal.active_jobs()
        self._active = {r.job_id for rows in active.values() for r in rows}
        self._planned_ids = {r.job_id for rows in active.values() for r in rows if r.status == "planned"}
        done: list[tuple[int, int, str | None]] = []
        again: list[tuple[int, int, str | None]] = []
        pdir = self.cfg.placement_dir
        for g in self.journal.groups(("waiting", "dispatched", "released")):
            members: list[tuple[JobRow, SlurmJob]] = []
            for r in active.get((g.window_id, g.idx), []):
                sj = jobs.get(r.job_id)
                if sj is not None and not self._same(int(r.eligible), sj):
                    sj = None  # the id names a newer job: Slurm lost this one and gave its id away
                if sj is None:
                    self._absent(r)
                    continue
                if g.status == "waiting" or (g.status == "dispatched" and sj.held):
                    if sj.finished and placement.started(pdir, r.job_id) is None:
                        self.journal.set_job(r.job_id, "gone", f"{sj.state.lower()} before its group started")
                        self.log(f"job {r.job_id} was {sj.state.lower()} before its group started (window {g.window_id}, "
                                 f"group {g.idx}): the group starts without it")
                        continue
                    if not sj.finished and not sj.held and g.status == "waiting":
                        self.journal.set_job(r.job_id, "outside", f"started outside the controller ({sj.state})")
                        self.log(f"job {r.job_id} was released by someone else ({sj.state}): it leaves window "
                                 f"{g.window_id}, group {g.idx}")
                        continue
                members.append((r, sj))
            if not members:
                done.append((g.window_id, g.idx, None))
                continue
            if g.status == "released":
                if all(sj.finished for _, sj in members):
                    done.append((g.window_id, g.idx, None))
                    for r, sj in members:
                        placement.remove(pdir, r.job_id)
                        self._ended(r, sj)
                elif any(sj.held for _, sj in members):
                    # A release slurmctld did not keep (restarted from state saved before it): its held jobs that never
                    # started are released again (_start_group), on the same node while some of the group runs or
                    # ran there, else on whichever node is idle now (Slurm may believe the old one still busy).
                    if any(placement.started(pdir, r.job_id) is not None for r, _ in members):
                        self.log(f"window {g.window_id}, group {g.idx}: jobs held again after a slurmctld restart; "
                                 f"releasing again on {g.node} those that never started")
                        again.append((g.window_id, g.idx, None))
                    else:
                        self.log(f"window {g.window_id}, group {g.idx}: held again after a slurmctld restart before any "
                                 "of it started; it waits for a node again")
                        self.journal.regroup(g.window_id, g.idx)
                else:
                    self._unstarted(g, members, nodes.get(g.node or ""))
        self._stale(jobs)
        self.journal.set_groups(done, "done")
        self.journal.set_groups(again, "dispatched")

    # ------------------------------------------------------------------ windows

    def _plan_new(self, jobs: dict[int, SlurmJob], nodes: list[SlurmNode], flush: bool, res: StepResult) -> None:
        known = self._journaled()
        new = []
        for j in jobs.values():
            if not (j.partition == self.cfg.partition and j.managed and j.held):
                continue
            if j.job_id in known and not self._same(known[j.job_id], j):
                self._retire(j, known.pop(j.job_id))
            if j.job_id not in known:
                new.append(j)
            elif j.job_id not in self._active:
                self._held_again(j)
        new.sort(key=lambda j: j.job_id)
        if not new:
            return
        now = self.clock()
        oldest = min(j.submit_time for j in new)
        planned: list[tuple[str, list[tuple[int, bool, float | None]], list[NewJob], str]] = []
        while new and (len(new) >= self.cfg.window or flush or now - oldest >= self.cfg.gather_s):
            batch, new = new[: self.cfg.window], new[self.cfg.window:]
            try:
                planned.append(self._plan_window(batch, nodes))
            except PlannerUnavailable as exc:
                if not self._planner_down_logged:
                    self.log(f"planner unreachable; {len(batch)} jobs stay held and planning is retried: {exc}")
                    self._planner_down_logged = True
                res.error = str(exc)
                break
            self._planner_down_logged = False
        # One transaction for all the windows of this step (a commit is a disk flush).
        wids = self.journal.add_windows([(p, g, j) for p, g, j, _ in planned])
        for _, _, jobs_, _ in planned:
            for nj in jobs_:
                known[nj.job_id] = int(nj.eligible)
                self._unplanned.pop(nj.job_id, None)
        for wid, (_, groups, jobs, what) in zip(wids, planned):
            res.planned += len(jobs)
            res.windows += 1
            self.log(f"window {wid}: {len(jobs)} jobs in {len(groups)} groups{what}")

    def _plan_window(self, batch: list[SlurmJob], nodes: list[SlurmNode]
                     ) -> tuple[str, list[tuple[int, bool, float | None]], list[NewJob], str]:
        """One window's plan as the journal keeps it: (plan JSON, groups, jobs, what to log)."""
        valid = [j for j in batch if _NAME.match(j.profile)]
        solo_ids = {j.job_id for j in batch if not _NAME.match(j.profile)}
        plan: Plan | None = None
        groups: list[tuple[int, bool, float | None]] = []
        new_jobs: list[NewJob] = []
        by_id = {j.job_id: j for j in batch}
        if valid:
            window = Window(jobs=[WindowJob(id=str(j.job_id), profile=j.profile) for j in valid],
                            max_concurrency=self.cfg.cmax)
            try:
                plan = self.planner(window)
            except PlannerUnavailable:
                raise
            except CoschedError as exc:
                self.log(f"planning failed ({exc}); {len(valid)} jobs run one at a time with the whole node")
                plan = None
                solo_ids |= {j.job_id for j in valid}
            if plan is not None:
                min_cpus = min((n.cpus for n in nodes), default=0)
                too_big = sorted({c for g in plan.groups for pj in g.jobs for c in pj.cpus if c >= min_cpus})
                if too_big:
                    self.log(f"the plan (for node {plan.node.name}) gives CPUs {too_big[:8]} that Slurm's nodes of "
                             f"partition {self.cfg.partition} do not have (they have {min_cpus}): plan for the partition's "
                             f"node kind (--plan-node); these {len(valid)} jobs run one at a time with the whole node")
                    solo_ids |= {j.job_id for j in valid}
                    plan = None
        node_spec = self.plan_node() if plan is not None else None
        if plan is not None:
            resctrl = plan.enforcement.method == "resctrl" and (plan.enforcement.l3 or plan.enforcement.mem_bw)
            for g in plan.groups:
                groups.append((len(groups), False, g.predicted_makespan_s))
                for pj in g.jobs:
                    sj = by_id[int(pj.id)]
                    lines = placement.placement_lines(
                        pj, node_spec, pinrt="pinrt" in sj.options, pinrt_env=self.cfg.pinrt_env,
                        resctrl_group=group_name(g.index, pj.id) if resctrl and node_spec is not None else None)
                    new_jobs.append(NewJob(sj.job_id, groups[-1][0], sj.profile, sj.options, lines, float(sj.submit_time)))
            for e in plan.excluded:
                solo_ids.add(int(e.id))
                self.log(f"job {e.id} runs alone with the whole node: {e.reason}")
        for jid in sorted(solo_ids):
            sj = by_id[jid]
            groups.append((len(groups), True, None))
            new_jobs.append(NewJob(jid, groups[-1][0], sj.profile, sj.options, None, float(sj.submit_time)))
        what = f" (policy {plan.policy}, planned for {plan.node.name})" if plan is not None else " (each alone)"
        return (plan.model_dump_json() if plan is not None else "null", groups, new_jobs, what)

    # ------------------------------------------------------------------ groups to nodes

    def _dispatch(self, jobs: dict[int, SlurmJob], nodes: list[SlurmNode], res: StepResult) -> None:
        by_name = {n.name: n for n in nodes}
        ours = {g.node for g in self.journal.groups(("dispatched", "released")) if g.node}
        # First what a previous life started (its node is already ours), then new groups on free nodes. The
        # nodes are journaled before any Slurm call, all in one transaction (and the releases in another).
        todo = [(g, by_name[g.node]) for g in self.journal.groups(("dispatched",)) if g.node in by_name]
        free = [n for n in nodes if n.idle and n.name not in ours]
        fresh = []
        avoid = self._avoided(jobs, [n.name for n in nodes if not n.unusable])
        for key, left in self._stuck_on.items():  # a node a group could not start on, kept off for AVOID_S
            avoid.setdefault(key, set()).update(n for n, t in left.items() if self.clock() - t < AVOID_S)
        # (In continuous mode a group back to waiting is decided again, node and all: _decide_nodes.)
        for g in self.journal.groups(("waiting",)) if self.cfg.mode == "groups" else []:
            if not free:
                break
            node = next((n for n in free if n.name not in avoid.get((g.window_id, g.idx), ())), None)
            if node is None:
                continue
            free.remove(node)
            fresh.append((GroupRow(g.window_id, g.idx, node.name, "dispatched", g.solo, g.predicted_s), node))
        self.journal.set_groups([(g.window_id, g.idx, g.node) for g, _ in fresh], "dispatched")
        started: list[GroupRow] = []
        for g, node in todo + fresh:
            try:
                started.append(self._start_group(g, node, jobs, res))
            except SlurmUnavailable as exc:  # the rest stay dispatched: the next step finishes them
                self.log(f"slurmctld unreachable while starting window {g.window_id}, group {g.idx}; retrying: {exc}")
                break
            except RunError as exc:
                self.log(f"window {g.window_id}, group {g.idx} not started this cycle (retried): {exc}")
        self.journal.set_groups([(g.window_id, g.idx, None) for g in started], "released")

    def _start_group(self, g: GroupRow, node: SlurmNode, jobs: dict[int, SlurmJob], res: StepResult) -> GroupRow:
        """Write the placements, pin the jobs to ``node`` and release them in one request (the caller journals
        the group released afterwards)."""
        members = [r for r in self.journal.jobs_of(g.window_id, g.idx) if r.status in ("planned", "dispatched", "released")]
        to_release: list[int] = []
        for r in members:
            sj = jobs.get(r.job_id)
            if sj is None or not sj.held or not self._same(int(r.eligible), sj):
                continue  # already released (a previous life got that far) or gone: reconcile sees to it
            if self._started_before(r.job_id, sj):
                continue  # released and started before slurmctld restarted from older state: never released again
            lines = r.placement if r.placement is not None else placement.whole_node_lines(
                list(range(node.cpus)), pinrt="pinrt" in r.options)
            placement.write(self.cfg.placement_dir, r.job_id, lines)
            try:
                self.slurm.pin(r.job_id, node.name, node.cpus)
            except JobGone:
                # Cancelled, or lost by a slurmctld that restarted since this step read the queue: the next
                # reconcile tells which (and reports a loss).
                continue
            to_release.append(r.job_id)
        if to_release:
            try:
                self.slurm.release(to_release)
            except JobGone:
                for jid in to_release:  # one of them went meanwhile: release the others one by one
                    try:
                        self.slurm.release([jid])
                    except JobGone:
                        pass  # as above: the next reconcile tells cancelled from lost
            now = self.clock()
            for r in members:
                if r.job_id in to_release:
                    self.release_delays.append(now - r.eligible)
        res.released += to_release
        if to_release:
            what = f"decision {g.window_id}" if self.cfg.mode == "continuous" else f"window {g.window_id}, group {g.idx}"
            self.log(f"{what}: released {len(to_release)} job(s) {','.join(map(str, to_release))} together on {node.name}")
        return g

    # ------------------------------------------------------------------ loop

    def pending_work(self) -> bool:
        return bool(self.journal.groups(("waiting", "dispatched"))) or bool(self._c.get("queued"))

    def run(self, poll_s: float = 1.0, once: bool = False, stop: Callable[[], bool] = lambda: False) -> None:
        """Cycle every ``poll_s``; with ``once``, plan what is held now and return when it has all been released. In
        continuous mode a cycle comes as soon as the plugin records the end of a running job (looked for every 50 ms:
        a file per running job), so a freed CPU waits for the next poll no longer."""
        first = True
        while not stop():
            res = self.step(flush=once and first)
            if res.error is None:
                first = False
            if once and not first and not self.pending_work():
                return
            deadline = time.monotonic() + poll_s
            while (left := deadline - time.monotonic()) > 0 and not stop():
                if self.cfg.mode == "continuous" and self._end_recorded():
                    break
                time.sleep(min(left, 0.05))
