"""The window controller's side of exactly once (mixed into service/slurm/controller.Controller): what it makes
of the SPANK plugin's start and end records (service/slurm/placement.py) and of a slurmctld that restarted from
older state.

* A job held again after it started is never released again; one that never started is (the controller's
  _start_group asks _started_before). One brought back pending after it started is held (_hold_started).
* A journaled job Slurm no longer lists is lost (one line: who, what the records say, the sbatch line that
  submits it again), or done when the plugin recorded its end. Jobs are journaled at first sight (_see), so one
  lost before it was planned is reported too.
* Slurm gives a lost job's id to the next submission: a job whose submit time differs (and that was not requeued
  since) is a new job; the old one's journal row and records go aside (_retire), and it keeps off every node
  that ran a job of that id (_kept_off: that slurmd refuses the id again, and Slurm drains the node). An old job
  that ran on meanwhile writes its end under the plain name; that end goes aside too (_late_ends).
  A start record made before a held job was submitted is an earlier job's of that id, journaled or not (a new
  journal on an old placement directory): it goes aside at the job's first sight (_earlier_holder).
* Each second start the plugin refused is reported once; a job whose end was recorded stale_after_s ago and that
  Slurm shows running again is cancelled in Slurm, so its node frees (Slurm notices minutes later).

Every report is said once, across restarts of the controller (the journal's events).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from env.errors import RunError
from service.slurm import placement
from service.slurm.journal import GroupRow, JobRow, Journal, SeenJob
from service.slurm.slurmcmd import SlurmAPI, SlurmJob, SlurmNode

if TYPE_CHECKING:
    from service.slurm.controller import ControllerConfig

AVOID_S = 150.0  # a node a group could not start on is kept off this long; so is one that ran a job of a held job's
#                 id, when every node did
RAN_KEEP_S = 3600.0  # which node ran each job id is remembered this long at least (a restarted slurmctld reuses ids)
CLOCK_SKEW_S = 1.0  # a start record this much older than a submission may still be that job's (nodes' clocks)


@dataclass
class OldRun:
    """An earlier job of an id Slurm gave again: its start record, moved aside as NAME~TAG, and whether its end is
    recorded (aside too)."""

    name: str
    tag: str
    start: placement.Record
    ended: bool = False


class Recovery:
    cfg: ControllerConfig
    slurm: SlurmAPI
    journal: Journal
    log: Callable[[str], None]
    clock: Callable[[], float]
    _known: dict[int, int] | None
    _seen: set[tuple[int, int]] | None
    _unplanned: dict[int, SeenJob]
    _refused: set[str] | None
    _active: set[int]
    _stale_checked: float
    _read_at: float
    _ran: dict[int, dict[str, tuple[int, float]]]
    _old: dict[int, list[OldRun]] | None
    _all_off_said: set[int]
    _pending_since: dict[tuple[int, int], float]
    _stuck_on: dict[tuple[int, int], dict[str, float]]

    def _stale(self, jobs: dict[int, SlurmJob]) -> None:
        """Journaled jobs Slurm shows RUNNING whose end the plugin recorded long ago (slurmctld restarted from state
        saved while they ran): cancelled in Slurm, so their node frees now (they are not run again either way).
        Checked every stale_after_s / 3 (it reads a file per running job)."""
        now = self.clock()
        if now - self._stale_checked < self.cfg.stale_after_s / 3:
            return
        self._stale_checked = now
        cancel = getattr(self.slurm, "cancel", None)
        known = self._journaled()
        for sj in jobs.values():
            if (cancel is None or sj.state != "RUNNING" or sj.partition != self.cfg.partition or not sj.managed
                    or sj.job_id not in known or not self._same(known[sj.job_id], sj)):
                continue
            end = placement.ended(self.cfg.placement_dir, sj.job_id)
            if end is None or now - end.time < self.cfg.stale_after_s or sj.start_time > end.time:
                continue
            line = (f"job {sj.job_id} ended {end.describe()}, but Slurm shows it running again (slurmctld restarted "
                    f"from state saved while it ran): cancelled in Slurm so that its node frees; it is not run again")
            if not self.journal.report_once("stale", f"{sj.job_id}:{sj.submit_time}", sj.job_id, line):
                continue
            try:
                cancel(sj.job_id)
            except RunError as exc:
                line += f" (the cancel failed: {exc})"
            self.log(line)

    def _same(self, submit: int, sj: SlurmJob) -> bool:
        """Whether Slurm's job ``sj`` is the job journaled with this submit time, not a new job given a lost job's
        id: the same submit time, or requeued since (a requeue moves the submit time on and counts a restart) with
        the same name and directory."""
        if sj.submit_time == submit:
            return True
        if sj.restarts == 0 or sj.submit_time < submit:
            return False
        info = self.journal.seen_job(sj.job_id, submit)
        return info is None or (info.name == sj.name and info.workdir == sj.workdir
                                and (not sj.command or info.command == sj.command))

    def _who(self, job_id: int, submit: int, profile: str | None = None) -> tuple[str, str]:
        """('job 12 (nap, partition cosched)', the command that submits it again) from what was seen of it."""
        info = self.journal.seen_job(job_id, submit)
        if info is None:
            return (f"job {job_id} ({profile or 'no name known'})",
                    f"sbatch --cosched -p {self.cfg.partition} -J {profile or 'NAME'} SCRIPT")
        return f"job {job_id} ({info.name}, partition {info.partition})", info.resubmit()

    def _report(self, kind: str, key: str, job_id: int | None, line: str) -> None:
        if self.journal.report_once(kind, key, job_id, line):
            self.log(line)

    def _absent(self, r: JobRow) -> None:
        """A journaled job Slurm no longer lists: ended long ago (its end recorded by the plugin) or lost."""
        pdir = self.cfg.placement_dir
        placement.remove(pdir, r.job_id)
        end = placement.ended(pdir, r.job_id)
        if end is not None:
            self.journal.set_job(r.job_id, "done", f"ended {end.describe()}; Slurm no longer lists it")
            return
        submit = int(r.eligible)
        who, again = self._who(r.job_id, submit, r.profile)
        start = placement.started(pdir, r.job_id)
        if start is not None:
            line = (f"{who} lost by Slurm after it started {start.describe()} (gone from its queue after a slurmctld "
                    f"restart, no end recorded): it may have been cut short; check its output; to run it again: {again}")
        else:
            line = (f"{who} lost by Slurm before it started (gone from its queue: slurmctld restarted from older "
                    f"state): resubmit it: {again}")
        self.journal.set_job(r.job_id, "lost", line)
        self.journal.set_seen_fate(r.job_id, submit, "lost")
        self._report("lost", f"{r.job_id}:{submit}", r.job_id, line)

    def _ended(self, r: JobRow, sj: SlurmJob) -> None:
        """A released job Slurm says has finished: reported when Slurm ended it without it ever starting."""
        if sj.state == "COMPLETED" or placement.started(self.cfg.placement_dir, r.job_id) is not None:
            return
        if sj.state == "CANCELLED":
            self.journal.set_job(r.job_id, "gone", "cancelled before it started")
            self.log(f"job {r.job_id} was cancelled before it started")
            return
        who, again = self._who(r.job_id, int(r.eligible), r.profile)
        line = (f"{who} lost by Slurm before it started: Slurm ended it {sj.state} ({sj.reason}) and the plugin "
                f"recorded no start: resubmit it: {again}")
        self.journal.set_job(r.job_id, "lost", line)
        self._report("lost", f"{r.job_id}:{int(r.eligible)}", r.job_id, line)

    def _see(self, jobs: dict[int, SlurmJob]) -> None:
        """Journals the partition's held jobs at first sight (what it takes to resubmit them), and reports those
        seen but not yet planned that Slurm has lost since."""
        if self._seen is None:
            self._seen = self.journal.seen_keys()
            self._unplanned = {s.job_id: s for s in self.journal.seen(fate_null=True)}
        for s in list(self._unplanned.values()):
            cur = jobs.get(s.job_id)
            if cur is not None and self._same(s.submit, cur):
                if cur.held and not cur.finished:
                    continue
                fate = "gone" if cur.finished else "outside"  # cancelled, or released by someone else
            else:
                fate = "lost"
                line = (f"job {s.job_id} ({s.name}, partition {s.partition}) lost by Slurm before it started (gone from "
                        f"its queue: slurmctld restarted from older state): resubmit it: {s.resubmit()}")
                self._report("lost", f"{s.job_id}:{s.submit}", s.job_id, line)
            self.journal.set_seen_fate(s.job_id, s.submit, fate)
            del self._unplanned[s.job_id]
        fresh = []
        for j in jobs.values():
            if j.partition == self.cfg.partition and j.managed and j.held and (j.job_id, j.submit_time) not in self._seen:
                self._earlier_holder(j)
                fresh.append(SeenJob(j.job_id, j.submit_time, j.name, j.partition, j.command or self._save_script(j),
                                     j.workdir, j.user, j.stdout, j.options))
        self.journal.add_seen(fresh)
        for s in fresh:
            self._seen.add((s.job_id, s.submit))
            if s.job_id not in self._journaled():
                self._unplanned[s.job_id] = s

    def _held_again(self, j: SlurmJob) -> None:
        """A job whose group is over, held again in Slurm (slurmctld restarted from older state): never released
        again; said once."""
        start = placement.started(self.cfg.placement_dir, j.job_id)
        if start is not None:
            line = (f"job {j.job_id} started {start.describe()}, then a slurmctld restart brought it back held: it is "
                    f"not released again (it runs once; 'scancel {j.job_id}' clears it from Slurm's queue)")
        else:
            line = (f"job {j.job_id} had left the controller's hands without starting (cancelled, or released by "
                    f"someone else), and a slurmctld restart brought it back held: not released by the controller "
                    f"('scontrol release {j.job_id}' runs it, 'scancel {j.job_id}' clears it)")
        self._report("held-again", f"{j.job_id}:{j.submit_time}", j.job_id, line)

    def _started_before(self, job_id: int, sj: SlurmJob) -> bool:
        """True (and said once) when the held job ``sj`` of a group being released already started."""
        start = placement.started(self.cfg.placement_dir, job_id)
        if start is None:
            return False
        line = (f"job {job_id} started {start.describe()}, then a slurmctld restart brought it back held: it is "
                f"not released again (it runs once; 'scancel {job_id}' clears it from Slurm's queue)")
        self.journal.set_job(job_id, "done", line)
        self._report("held-again", f"{job_id}:{sj.submit_time}", job_id, line)
        return True

    def _hold_started(self, jobs: dict[int, SlurmJob]) -> None:
        """A journaled job that already started, which a slurmctld restarted from older state shows pending and
        released again: held before Slurm schedules it (its slurmd would refuse the id it ran, and Slurm would
        drain that node; elsewhere the plugin would refuse it)."""
        hold = getattr(self.slurm, "hold", None)
        known = self._journaled()
        for j in jobs.values():
            if (hold is None or j.state != "PENDING" or j.held or j.partition != self.cfg.partition or not j.managed
                    or j.job_id not in known or not self._same(known[j.job_id], j)):
                continue
            start = placement.started(self.cfg.placement_dir, j.job_id)
            if start is None or start.time >= self._read_at:
                continue  # not started; or started since the queue was read (it was pending then, running now)
            try:
                hold(j.job_id)
            except RunError:
                continue  # it left pending meanwhile (started, cancelled): nothing to hold
            line = (f"job {j.job_id} started {start.describe()}, then a slurmctld restart brought it back pending: held "
                    f"so that it does not start again (it runs once; 'scancel {j.job_id}' clears it from Slurm's queue)")
            self._report("held-again", f"{j.job_id}:{j.submit_time}", j.job_id, line)

    def _unstarted(self, g: GroupRow, members: list[tuple[JobRow, SlurmJob]], node: SlurmNode | None) -> None:
        """A released group's jobs that Slurm keeps pending on its node: held, and given another node (said once).

        Right away when the node is drained or down (a restarted slurmctld gave that slurmd an id it had run), and
        when they have waited stale_after_s (a restarted slurmctld may believe the node busy for minutes: a job that
        ended after its last state save shows running there until the node registers again); never while Slurm's
        reason is BeginTime (its own wait: a requeued job waits out its credential, then starts). When none of the group
        started, the group waits for a node again; when some of it started and has ended, the rest goes to a new
        group of its own. While some of it still runs there, the rest waits beside it."""
        key = (g.window_id, g.idx)
        pdir = self.cfg.placement_dir
        waiting = [(r, sj) for r, sj in members
                   if sj.state == "PENDING" and not sj.held and placement.started(pdir, r.job_id) is None]
        if not waiting:
            self._pending_since.pop(key, None)
            return
        now = self.clock()
        unusable = node is not None and node.unusable
        if not unusable and all(sj.reason == "BeginTime" for _, sj in waiting):
            self._pending_since.pop(key, None)  # Slurm's own wait (a requeue waits out the job's credential)
            return
        since = self._pending_since.setdefault(key, now)
        if not unusable and now - since < self.cfg.stale_after_s:
            return
        others = [(r, sj) for r, sj in members if (r, sj) not in waiting]
        if any(not sj.finished for _, sj in others):
            return  # the rest of its group runs there: it starts beside it
        hold = getattr(self.slurm, "hold", None)
        if hold is None:
            return
        held: list[int] = []
        for r, _ in waiting:
            try:
                hold(r.job_id)
            except RunError:  # it started or went meanwhile: the next reconcile sees it; the others go back as they were
                if held:
                    try:
                        self.slurm.release(held)
                    except RunError:
                        pass
                return
            held.append(r.job_id)
        self._pending_since.pop(key, None)
        if g.node:
            self._stuck_on.setdefault(key, {})[g.node] = now
        sj0 = waiting[0][1]
        why = (f"its node {g.node} is drained or down" if unusable else
               f"Slurm kept {'them' if len(held) > 1 else 'it'} pending on {g.node} for {now - since:.0f} s "
               f"({sj0.state}, reason {sj0.reason or 'none'}; a restarted slurmctld may believe the node busy)")
        if others:
            idx = self.journal.split_off(g.window_id, g.idx, held)
            if g.node:
                self._stuck_on.setdefault((g.window_id, idx), {})[g.node] = now
            self.log(f"window {g.window_id}, group {g.idx}: jobs {','.join(map(str, held))} never started while the rest "
                     f"of the group ran and ended; {why}: held, they wait for another node as group {idx}")
        else:
            self.journal.regroup(g.window_id, g.idx)
            self.log(f"window {g.window_id}, group {g.idx}: none of its jobs started; {why}: held, it waits for "
                     "another node")

    def _retire(self, j: SlurmJob, old_submit: int) -> None:
        """``j`` has the id of a journaled job Slurm lost (reported by _reconcile): the old job's journal row and
        records go aside, so that ``j`` is planned and starts as itself."""
        row = self.journal.job(j.job_id)
        if row is not None:  # released onto a node, the old job may have reached its slurmd with no start recorded
            node = next((g.node for g in self.journal.groups() if (g.window_id, g.idx) == (row.window_id, row.group_idx)
                         and g.node and g.status != "waiting"), None)
            if node:
                self._ran.setdefault(j.job_id, {})[node] = (old_submit, self.clock())
        moved = placement.retire(self.cfg.placement_dir, j.job_id, str(old_submit))
        self._note_retired(j.job_id)
        self.journal.retire(j.job_id)
        self.log(f"job {j.job_id} is a new job with the id of a job Slurm lost (submitted at {j.submit_time}, not "
                 f"{old_submit}): planned as itself" + (f"; the old job's records moved aside ({', '.join(moved)})"
                                                         if moved else ""))

    def _earlier_holder(self, j: SlurmJob) -> None:
        """At first sight of the held job ``j``: a start record under its id made before ``j`` was submitted (and
        ``j`` never requeued, which moves the submit time on) belongs to an earlier job that had the id (slurmctld
        restarted from older state, or a new journal on an old placement directory). Its records go aside, so that
        ``j`` is planned and starts as itself, and ``j`` keeps off the node that ran that job (_kept_off)."""
        if j.job_id in self._journaled():
            return  # a journaled job's id given to j: _retire sees to it
        first = placement.started(self.cfg.placement_dir, j.job_id)
        if first is None or j.restarts or first.time >= j.submit_time - CLOCK_SKEW_S:
            return
        moved = placement.retire(self.cfg.placement_dir, j.job_id, f"before{j.submit_time}")
        self._note_retired(j.job_id)
        self.log(f"job {j.job_id} ({j.name}) has the id of an earlier job, which started {first.describe()}, before "
                 f"this one was submitted: the earlier job's records moved aside ({', '.join(moved)}); planned as itself")

    def _note_nodes(self, jobs: dict[int, SlurmJob]) -> None:
        """Remembers which node ran each job id (any job, co-scheduled or plain): a slurmd that ran an id refuses it,
        and Slurm drains the node, when a restarted slurmctld gives the id to a new job."""
        now = self.clock()
        for j in jobs.values():
            if j.state == "RUNNING" and j.nodes:
                self._ran.setdefault(j.job_id, {})[j.nodes] = (j.submit_time, now)
        if len(self._ran) > 4 * len(jobs) + 1000:
            for jid in [k for k, v in self._ran.items()
                        if k not in jobs and all(now - t > RAN_KEEP_S for _, t in v.values())]:
                del self._ran[jid]

    def _old_runs(self) -> dict[int, list[OldRun]]:
        """Job id -> the earlier jobs of that id whose records went aside (read from the placement directory once a
        life, so that a restarted controller knows them too; then kept here)."""
        if self._old is None:
            self._old = {}
            for name, tag, rec in placement.retired_starts(self.cfg.placement_dir):
                self._old.setdefault(rec.job_id, []).append(OldRun(name, tag, rec))
        return self._old

    def _note_retired(self, jid: int) -> None:
        self._old_runs()[jid] = [OldRun(n, t, r) for n, t, r in placement.retired_starts(self.cfg.placement_dir, jid)]

    def _late_ends(self) -> None:
        """The ends of earlier jobs that ran on after their id went to a new job, moved aside (placement.late_end)."""
        for runs in self._old_runs().values():
            for r in runs:
                if not r.ended:
                    r.ended = placement.late_end(self.cfg.placement_dir, r.name, r.tag, r.start)

    def _kept_off(self, jobs: dict[int, SlurmJob], usable: list[str]) -> dict[int, set[str]]:
        """Held job id -> the nodes it keeps off: those that ran another job of its id (seen running, or its start
        record aside). A slurmd refuses to launch an id it launched before and slurmctld never ended (slurmctld
        lost that job), for minutes after that job ended at least (seen on real daemons: it did not forget in
        150 s), and Slurm drains the node. Kept off for good while another of the ``usable`` nodes could take the
        job; when every one ran a job of its id, only those that did within AVOID_S (said once)."""
        now = self.clock()
        old = self._old_runs()
        every = set(usable)
        out: dict[int, set[str]] = {}
        for jid, sj in jobs.items():
            if not sj.held or (jid not in self._ran and jid not in old):
                continue
            seen = {n: t for n, (submit, t) in self._ran.get(jid, {}).items() if submit != sj.submit_time}
            for r in old.get(jid, ()):
                seen[r.start.node] = max(seen.get(r.start.node, 0.0), r.start.time)
            if not seen:
                continue
            nodes = set(seen)
            if every and nodes >= every:
                nodes = {n for n, t in seen.items() if now - t < AVOID_S}
                if jid not in self._all_off_said:
                    self._all_off_said.add(jid)
                    self.log(f"job {jid}: every usable node of partition {self.cfg.partition} ran an earlier job of "
                             f"its id; it may start on one {AVOID_S:.0f} s after that job was last seen there (if that "
                             "slurmd refuses the id, Slurm drains the node: 'scontrol update NodeName=... "
                             "State=RESUME' after the job has gone elsewhere)")
            if nodes:
                out[jid] = nodes
        return out

    def _avoided(self, jobs: dict[int, SlurmJob], usable: list[str]) -> dict[tuple[int, int], set[str]]:
        """(window, group) -> the nodes it keeps off (_kept_off of its planned jobs)."""
        out: dict[tuple[int, int], set[str]] = {}
        for jid, nodes in self._kept_off(jobs, usable).items():
            r = self.journal.job(jid)
            if r is not None and r.status == "planned":
                out.setdefault((r.window_id, r.group_idx), set()).update(nodes)
        return out

    def _journaled(self) -> dict[int, int]:
        if self._known is None:
            self._known = {k: v[0] for k, v in self.journal.known_submits().items()}  # once a life; then kept here
        return self._known

    def _save_script(self, j: SlurmJob) -> str:
        """A --wrap job's script, saved while slurmctld still has it (its path), or '' when it cannot be."""
        save = getattr(self.slurm, "save_script", None)
        if save is None:
            return ""
        path = self.journal.path.parent / "scripts" / f"{j.job_id}-{j.submit_time}.sh"
        path.parent.mkdir(parents=True, exist_ok=True)
        return str(path) if save(j.job_id, str(path)) else ""

    def _report_refusals(self) -> None:
        """Each second start the plugin refused, reported once."""
        if self._refused is None:
            self._refused = self.journal.event_keys("refused")
        for rec in placement.refusals(self.cfg.placement_dir):
            if rec.name in self._refused:
                continue
            self._refused.add(rec.name)
            first = placement.started(self.cfg.placement_dir, rec.job_id)
            line = (f"job {rec.job_id} came back after it had started {first.describe() if first else 'once'} (a "
                    f"slurmctld restart or a requeue); the plugin refused to start it again {rec.describe()}: it did "
                    "not run twice")
            self._report("refused", rec.name, rec.job_id, line)
