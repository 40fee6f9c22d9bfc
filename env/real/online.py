"""The online runner: a job stream run on this node, decided at every real event (``cosched run WINDOW.json --mode
continuous``), journaled so that a killed run resumes without starting any job twice.

* **Events** are real: a job's process ends (its real end, not a prediction) or a job's ``submit_s`` arrives (seconds
  after the run started, wall clock; a resumed run keeps the first start's clock, so the time it was down counts).
  At each event ``decide`` (the caller's: ``service.decide`` makes it from a stream policy) gets the running jobs
  (allocation, seconds run), the arrived queue, how many jobs are still to come and the time, and returns a
  ``Decision``; the runner checks it (Cmax, free CPUs, queued jobs) and starts the chosen jobs.
* **Launch**: each job is started as the executor starts a window's jobs (``env.real.executor``: the plan's launch
  argv, ``numactl --physcpubind`` pinning, its own process group, stdout/stderr in the run directory, a waiter
  thread), with ``COSCHED_ONLINE_JOB=<run token>/<job id>`` in its environment so that its process can be told
  apart from any other.
* **Journal** (``journal.jsonl``, one fsynced JSON line per event): ``online_start``, ``decision`` (before anything
  it decides is done), ``launch`` (before the process is created), ``job_start`` (its pid, after), ``job_cpus``,
  ``change`` (before it is applied: new ways / caps, or fewer CPUs for a job that adapts, its threads then re-pinned
  by ``profiler.repin``), ``job_end`` (after its process ended), ``job_lost``, ``interrupted``, ``run_end``.
* **Resume** (``resume=True``): a job with a ``job_end`` is done. A job journaled as started whose process still
  runs is waited for (its exit status cannot be read: it is not our child); one whose process is gone is reported
  in one line, recorded without an end it saw, and never started again. A job with a ``launch`` but no
  ``job_start`` is looked for by its mark among the processes; found, it is waited for; not found, it may have run
  and ended, so it is reported in one line and not started again. Only a job the journal proves never launched (at
  most decided) goes back to the queue and is decided again. (``cosched run --resume`` of a window stops the
  processes a killed run left and runs their group again whole; an online run never starts a job twice, so it
  keeps them.) A job still running holds the CPUs of its last journaled change, re-pinned onto them again (the run
  may have been killed between the journal's line and the re-pin). SIGINT/SIGTERM stop the deciding and leave the
  running jobs running: ``--resume`` waits for them.

The jobs, results, journal records and the stream document are in ``env.real.online_state``.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from env.episode.stream import Decision
from env.errors import RunError
from env.node.resctrl import create_group, group_path, remove_group, schemata
from env.node.spec import NodeSpec
from env.plan.allocate import Allocation, mba_hardware_value
from env.plan.launch import enforcement, launch_argv
from env.plan.models import PlanJob
from env.real.executor import KILL_GRACE_S, Interrupted, Progress, _Job, allowed_cpus
from env.real.journal import Journal
from env.real.online_state import (MARK, STREAM_FILE, Decide, Held, HeldCpus, JobResult, OnlineJob, OnlineResult,
                                   StreamModel, alloc_of, alloc_record, is_online_run, read_online_journal, read_stream,
                                   stream_model, write_stream)


def _alive(pid: int, mark: bytes) -> bool:
    """The process runs and carries ``mark`` in its environment (a reused pid does not)."""
    try:
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return False
        return mark in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except (OSError, IndexError):
        return False


def _find(mark: bytes) -> int | None:
    """The pid of a live process carrying ``mark``, if any."""
    for p in Path("/proc").iterdir():
        if p.name.isdigit() and _alive(int(p.name), mark):
            return int(p.name)
    return None


class _Live:
    """A running job: ours (``job``: a child with a waiter thread) or adopted on resume (``pid`` only)."""

    def __init__(self, oj: OnlineJob, alloc: Allocation, start_s: float, job: _Job | None = None,
                 pid: int | None = None, group: str | None = None) -> None:
        self.oj, self.alloc, self.start_s, self.job, self.group = oj, alloc, start_s, job, group
        self.pid = job.proc.pid if job is not None else pid
        self.gone_at: float | None = None
        self.killed_at: float | None = None


class OnlineRunner:
    def __init__(self, jobs: list[OnlineJob], node: NodeSpec, run_dir: Path, max_concurrency: int, decide: Decide, *,
                 timeout_s: float | None = None, pin_runtime: Path | None = None,
                 progress: Progress | None = None) -> None:
        self.jobs, self.node, self.run_dir, self.cmax = jobs, node, run_dir, max_concurrency
        self.by_id = {j.id: j for j in jobs}
        self.decide, self.timeout_s, self.pin_runtime = decide, timeout_s, pin_runtime
        self.progress = progress or (lambda kind, info: None)
        self.enf = enforcement(node)
        self.partition = self.enf.method == "resctrl" and (self.enf.l3 or self.enf.mem_bw)

    def _mark(self, jid: str) -> str:
        return f"{self.token}/{jid}"

    def run(self, resume: bool = False) -> OnlineResult:
        path = self.run_dir / "journal.jsonl"
        past = read_online_journal(path) if resume else None
        self.journal = Journal(path)
        self.results: dict[str, JobResult] = {j.id: JobResult(j.id, j.profile, j.submit_s) for j in self.jobs}
        self.live: dict[str, _Live] = {}
        self.notes: list[str] = []
        old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

        def on_signal(signum: int, _frame: Any) -> None:
            raise KeyboardInterrupt(signal.Signals(signum).name)

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        try:
            if past is None:
                self.t0, self.token, self.n = time.time(), f"{self.run_dir.name}-{os.getpid()}-{time.time_ns()}", 0
                self.journal.write("online_start", t0=self.t0, token=self.token, jobs=len(self.jobs), max_concurrency=self.cmax)
                done: set[str] = set()
            else:
                done = self._recover(past)
            self.progress("online_start", {"jobs": len(self.jobs), "resumed": past is not None, "done": len(done)})
            self._loop(done)
            self.journal.write("run_end")
        except KeyboardInterrupt as exc:
            self.journal.write("interrupted", reason=str(exc) or "SIGINT", running=sorted(self.live))
            still = ", ".join(f"{k} (pid {v.pid})" for k, v in self.live.items())
            raise Interrupted(f"interrupted; {len(self.live)} job(s) left running{': ' + still if still else ''}; "
                              f"finish with: cosched run --resume {self.run_dir}") from None
        finally:
            self.journal.close()
            for s, h in old.items():
                signal.signal(s, h)
        return OnlineResult(str(self.run_dir), [self.results[j.id] for j in self.jobs], self.n, self.notes)

    def now(self) -> float:
        return time.time() - self.t0

    # -- resume

    def _recover(self, past: dict[str, Any]) -> set[str]:
        """Done jobs from the journal; jobs started or launched before the kill waited for or reported lost."""
        start = past["start"]
        self.t0, self.token, self.n = start["t0"], start["token"], past["decisions"]
        self.journal.write("online_resume", at_s=round(self.now(), 4))
        done = set()
        for jid, rec in past["job_end"].items():
            r = self.results[jid]
            for k, v in rec.get("result", {}).items():
                setattr(r, k, v)
            done.add(jid)
        for jid, launch in past["launch"].items():
            if jid in done:
                continue
            oj, alloc = self.by_id[jid], alloc_of(launch["alloc"])
            changes = past["change"].get(jid, [])
            mark = self._mark(jid).encode()
            started = past["job_start"].get(jid)
            pid = started["pid"] if started else _find(MARK.encode() + b"=" + mark)
            r = self.results[jid]
            r.cpus, r.memory, r.stdout = list(alloc.cpus), alloc.memory, str(self.run_dir / f"{jid}.out")
            r.start_s = started["at_s"] if started else launch["at_s"]
            r.observed_cpus = past["job_cpus"].get(jid, {}).get("cpus")
            held = launch["alloc"]["cpus"]
            for c in changes:
                if c["alloc"]["cpus"] != held:
                    held = c["alloc"]["cpus"]
                    r.gave_back.append({"at_s": c["at_s"], "cpus": held})
            if pid is not None and _alive(pid, MARK.encode() + b"=" + mark):
                if not started:
                    self.journal.write("job_start", job=jid, pid=pid, at_s=r.start_s, argv=launch["argv"], found=True)
                if changes:  # its last change, applied again: the kill may have come before its re-pin
                    alloc = alloc_of(changes[-1]["alloc"])
                    if set(alloc.cpus) != set(launch["alloc"]["cpus"]):
                        self._repin(jid, pid, alloc)
                self.live[jid] = _Live(oj, alloc, r.start_s, pid=pid, group=launch.get("group"))
                line = f"{jid} was running when the run stopped (pid {pid}): waited for, its exit status unknown"
                self.journal.write("job_adopted", job=jid, pid=pid)
            else:
                r.end_s, r.end_seen = round(self.now(), 4), False
                r.note = (f"started (pid {pid}) before the run stopped; its process is gone and its end was not "
                          "seen: not started again" if started else "its launch was journaled but not its start and "
                          "no process of it runs: it may have run; not started again")
                line = f"{jid}: {r.note}"
                self.journal.write("job_lost", job=jid, result=asdict(r))
                if launch.get("group"):
                    remove_group(launch["group"])
                done.add(jid)
            self.notes.append(line)
            self.progress("resumed_job", {"line": line})
        return done

    # -- the event loop

    def _loop(self, done: set[str]) -> None:
        pending = sorted((j for j in self.jobs if j.id not in done and j.id not in self.live),
                         key=lambda j: (j.submit_s, self.jobs.index(j)))
        queue: list[OnlineJob] = []
        changed = True
        while True:
            now = self.now()
            for jid in [k for k, v in self.live.items() if self._ended(v, now)]:
                self._finish(jid)
                changed = True
            while pending and pending[0].submit_s <= now:
                queue.append(pending.pop(0))
                changed = True
            if not (pending or queue or self.live):
                return
            if changed:
                changed = False
                queue = self._decide(queue, len(pending), now)
                if queue and not self.live and not pending:
                    raise RunError(f"the policy started nothing with {len(queue)} job(s) queued and none running or "
                                   "to come")
            wait = 0.01 if not pending or self.live else max(0.0, min(0.2, pending[0].submit_s - self.now()))
            time.sleep(wait)

    def _ended(self, v: _Live, now: float) -> bool:
        if v.job is not None:
            if not v.job.done and self.timeout_s is not None and now - v.start_s > self.timeout_s:
                if v.killed_at is None:
                    v.job.timed_out, v.killed_at = True, now
                    self._signal(v.pid, signal.SIGTERM)
                elif now - v.killed_at > KILL_GRACE_S:
                    self._signal(v.pid, signal.SIGKILL)
            if not v.job.done and self.results[v.oj.id].observed_cpus is None:
                cpus = allowed_cpus(v.pid, v.job.job.command, v.job.job.launch)  # type: ignore[arg-type]
                if cpus is not None:
                    self.results[v.oj.id].observed_cpus = cpus
                    self.journal.write("job_cpus", job=v.oj.id, cpus=cpus)
            return v.job.done
        if not _alive(v.pid, f"{MARK}={self._mark(v.oj.id)}".encode()):  # type: ignore[arg-type]
            v.gone_at = now
            return True
        return False

    @staticmethod
    def _signal(pid: int | None, sig: int) -> None:
        try:
            os.killpg(pid, sig)  # type: ignore[arg-type]
        except (ProcessLookupError, PermissionError, TypeError):
            pass

    def _finish(self, jid: str) -> None:
        v, r = self.live.pop(jid), self.results[jid]
        if v.job is not None:
            rec = v.job.record()
            r.exit_code, r.signal, r.timed_out = rec.exit_code, rec.signal, rec.timed_out
            r.end_s = round(v.start_s + rec.wall_s, 4)
        else:
            r.end_s, r.note = round(v.gone_at or self.now(), 4), "waited for after a resume: exit status unknown"
        if v.group:
            remove_group(v.group)
        self.journal.write("job_end", job=jid, at_s=r.end_s, result=asdict(r))
        self.progress("job_end", {"job": jid, "at_s": r.end_s, "exit_code": r.exit_code, "note": r.note,
                                  "wall_s": r.end_s - (r.start_s or 0.0), "result": asdict(r)})

    def _decide(self, queue: list[OnlineJob], pending: int, now: float) -> list[OnlineJob]:
        held = [Held(k, v.oj.profile, v.alloc, now - v.start_s) for k, v in self.live.items()]
        d = self.decide(held, list(queue), pending, now)
        self._check(d, queue)
        self.n += 1
        self.journal.write("decision", n=self.n, at_s=round(now, 4), running=sorted(self.live),
                           queue=[j.id for j in queue], starts=[{"job": k, **alloc_record(a)} for k, a in d.starts],
                           changes=[{"job": k, **alloc_record(a)} for k, a in d.changes], note=d.note or None)
        if d.note and d.note not in self.notes:  # why the policy departed from its rule (e.g. its guard), said once
            self.notes.append(d.note)
        self.progress("decision", {"n": self.n, "at_s": now, "starts": [(k, a.cpus) for k, a in d.starts],
                                   "queue": len(queue), "running": len(self.live)})
        for k, a in d.changes:
            self._change(k, a)
        for k, a in d.starts:
            self._launch(self.by_id[k], a)
        started = {k for k, _ in d.starts}
        return [j for j in queue if j.id not in started]

    def _check(self, d: Decision, queue: list[OnlineJob]) -> None:
        queued = {j.id for j in queue}
        free = set(self.node.cpus) - {c for v in self.live.values() for c in v.alloc.cpus}
        bad = [k for k, _ in d.changes if k not in self.live]
        if bad:
            raise RunError(f"the decision changes {', '.join(bad)}, which are not running")
        for k, a in d.changes:
            held = set(self.live[k].alloc.cpus)
            if set(a.cpus) == held:
                continue
            if not a.cpus or not set(a.cpus) < held:
                raise RunError(f"the decision gives {k} CPUs {list(a.cpus)}: a running job may only give CPUs back")
            if not self.live[k].oj.adapts:
                raise RunError(f"the decision takes CPUs from {k}, whose program does not adapt to fewer CPUs while it "
                               "runs (its window job does not say adapts)")
            if self.pin_runtime is not None:
                raise RunError(f"the decision takes CPUs from {k}, but the pinning runtime keeps its threads on the CPUs "
                               "it started with: run without --pin-runtime to give CPUs back")
            free |= held - set(a.cpus)
        for k, a in d.starts:
            if k not in queued or not a.cpus or not set(a.cpus) <= free:
                raise RunError(f"the decision starts {k!r} on CPUs {list(a.cpus)}: it is not queued or they are not free")
            queued.discard(k)
            free -= set(a.cpus)
        if len(self.live) + len(d.starts) > self.cmax:
            raise RunError(f"the decision would run {len(self.live) + len(d.starts)} jobs at once, above Cmax {self.cmax}")

    def _launch(self, oj: OnlineJob, alloc: Allocation) -> None:
        group = group_path(self.node, self.n, oj.id) if self.partition else None
        mb_hw = {d: v for d, p in alloc.mem_bw_percent.items() if (v := mba_hardware_value(self.node, d, p)) is not None}
        argv = launch_argv(self.node, oj.command, alloc, self.enf, resctrl_group=group, mb_hw=mb_hw,
                           pin_runtime=self.pin_runtime)
        at = round(self.now(), 4)
        self.journal.write("launch", job=oj.id, at_s=at, argv=argv, alloc=alloc_record(alloc), group=group, decision=self.n)
        if group is not None:
            create_group(group, schemata(self.node, {d: m for d, (_, m) in alloc.l3.items()} if self.enf.l3 else None,
                                         mb_hw if self.enf.mem_bw else None))
        pj = PlanJob.model_construct(id=oj.id, profile=oj.profile, command=oj.command, env={**oj.env, MARK: self._mark(oj.id)},
                                     cpus=list(alloc.cpus), launch=argv)
        job = _Job(pj, self.run_dir, time.monotonic())
        start = round(self.now() - (time.monotonic() - job.start), 4)  # its process's start: end_s = start_s + wall_s
        self.journal.write("job_start", job=oj.id, pid=job.proc.pid, at_s=start, argv=argv)
        self.live[oj.id] = _Live(oj, alloc, start, job=job, group=group)
        r = self.results[oj.id]
        r.start_s, r.cpus, r.memory, r.stdout = start, list(alloc.cpus), alloc.memory, str(job.out)
        self.progress("job_start", {"job": oj.id, "at_s": start, "cpus": list(alloc.cpus), "pid": job.proc.pid})

    def _change(self, jid: str, alloc: Allocation) -> None:
        """New ways / caps of a running job: written to its resctrl group where this node partitions, else
        journaled as not enforced (with the reason). Fewer CPUs (a job that adapts gives some back): journaled, then
        every thread of the job re-pinned onto the CPUs it keeps, before anything starts on the others."""
        v = self.live[jid]
        if set(alloc.cpus) != set(v.alloc.cpus):
            at = round(self.now(), 4)
            self.journal.write("change", job=jid, alloc=alloc_record(alloc), at_s=at, gives_back=True)
            self._repin(jid, v.pid, alloc)
            v.alloc = Allocation(alloc.cpus, alloc.numa_nodes, v.alloc.memory, v.alloc.l3, v.alloc.mem_bw_percent)
            self.results[jid].gave_back.append({"at_s": at, "cpus": list(alloc.cpus)})
            self.progress("give_back", {"job": jid, "at_s": at, "cpus": list(alloc.cpus)})
            if alloc.l3 == v.alloc.l3 and alloc.mem_bw_percent == v.alloc.mem_bw_percent:
                return
        v.alloc = Allocation(v.alloc.cpus, v.alloc.numa_nodes, v.alloc.memory, alloc.l3, alloc.mem_bw_percent)
        if v.group is None:
            self.journal.write("change", job=jid, alloc=alloc_record(alloc), enforced=False,
                               reason=self.enf.reasons.get("l3") or "no resctrl group")
            return
        mb_hw = {d: x for d, p in alloc.mem_bw_percent.items() if (x := mba_hardware_value(self.node, d, p)) is not None}
        text = schemata(self.node, {d: m for d, (_, m) in alloc.l3.items()} if self.enf.l3 else None,
                        mb_hw if self.enf.mem_bw else None)
        for line in text.splitlines():
            with open(Path(v.group) / "schemata", "w") as f:
                f.write(line + "\n")
        self.journal.write("change", job=jid, alloc=alloc_record(alloc), enforced=True, group=v.group)


    def _repin(self, jid: str, pid: int | None, alloc: Allocation) -> None:
        from profiler.repin import repin

        try:
            repin(pid, alloc.cpus)  # type: ignore[arg-type] - a live job has a pid
        except OSError as exc:
            raise RunError(f"{jid} could not give CPUs back: {exc}; its threads may still run on the CPUs it gave, so "
                           f"nothing more starts: finish with cosched run --resume {self.run_dir}") from None


__all__ = ["MARK", "STREAM_FILE", "Decide", "Held", "HeldCpus", "JobResult", "OnlineJob", "OnlineResult", "OnlineRunner",
           "StreamModel", "alloc_of", "alloc_record", "is_online_run", "read_online_journal", "read_stream",
           "stream_model", "write_stream"]
