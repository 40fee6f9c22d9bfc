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
  ``change``, ``job_end`` (after its process ended), ``job_lost``, ``interrupted``, ``run_end``.
* **Resume** (``resume=True``): a job with a ``job_end`` is done. A job journaled as started whose process still
  runs is waited for (its exit status cannot be read: it is not our child); one whose process is gone is reported
  in one line, recorded without an end it saw, and never started again. A job with a ``launch`` but no
  ``job_start`` is looked for by its mark among the processes; found, it is waited for; not found, it may have run
  and ended, so it is reported in one line and not started again. Only a job the journal proves never launched (at
  most decided) goes back to the queue and is decided again. (``cosched run --resume`` of a window stops the
  processes a killed run left and runs their group again whole; an online run never starts a job twice, so it
  keeps them.) SIGINT/SIGTERM stop the deciding and leave the running jobs running: ``--resume`` waits for them.
"""

from __future__ import annotations

import json
import math
import os
import signal
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from env.episode.stream import Decision
from env.errors import InputError, RunError
from env.node.resctrl import create_group, group_path, remove_group, schemata
from env.node.spec import NodeSpec
from env.plan.allocate import Allocation, mba_hardware_value
from env.plan.launch import enforcement, launch_argv
from env.plan.models import PlanJob
from env.real.executor import KILL_GRACE_S, Interrupted, Progress, _Job, allowed_cpus
from env.real.journal import Journal

MARK = "COSCHED_ONLINE_JOB"
STREAM_FILE = "stream.json"


@dataclass(frozen=True)
class OnlineJob:
    id: str
    profile: str
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)
    submit_s: float = 0.0


@dataclass(frozen=True)
class Held:
    """A running job as ``decide`` sees it."""

    id: str
    profile: str
    alloc: Allocation
    seconds_run: float


#: decide(running, queue, jobs still to come, now_s) -> the decision at this event
Decide = Callable[[list[Held], list[OnlineJob], int, float], Decision]


@dataclass
class JobResult:
    id: str
    profile: str
    submit_s: float
    cpus: list[int] = field(default_factory=list)
    memory: str | None = None  # its allocation's memory policy
    start_s: float | None = None
    end_s: float | None = None
    exit_code: int | None = None
    signal: int | None = None
    timed_out: bool = False
    end_seen: bool = True  # False: its process was gone when a resumed run looked (end_s: when it looked)
    observed_cpus: list[int] | None = None
    stdout: str | None = None
    note: str | None = None


@dataclass
class OnlineResult:
    run_dir: str
    jobs: list[JobResult]
    decisions: int
    notes: list[str]

    @property
    def makespan_s(self) -> float | None:
        ends = [j.end_s for j in self.jobs]
        return None if not ends or None in ends else max(ends) - min(j.submit_s for j in self.jobs)  # type: ignore[type-var]

    @property
    def failed(self) -> list[str]:
        return [j.id for j in self.jobs if j.exit_code != 0 and j.end_seen and j.note is None]


    def report(self, *, node: str, policy: str, max_concurrency: int, solo: dict[str, float], solo_source: str,
               decided_on: str) -> dict[str, Any]:
        """The run's report (``report.json``, ``--json``): each job's start, end and CPUs (seconds after the run
        started, measured), the most jobs at once, and the stream's metrics (``env.episode.stream``); ``solo``: each
        job's solo time on the whole node (nan: unknown), which the throughput and the slowdown need."""
        from env.episode.stream import JobRun, StreamRun

        ended = all(j.start_s is not None and j.end_s is not None for j in self.jobs) and bool(self.jobs)
        metrics: dict[str, float | None] = dict.fromkeys(("makespan_s", "throughput_vs_timeshare", "mean_turnaround_s",
                                                          "mean_bounded_slowdown"))
        if ended:
            run = StreamRun(policy, [JobRun(j.id, j.profile, j.submit_s, j.start_s, j.end_s, solo.get(j.id, math.nan),  # type: ignore[arg-type]
                                            tuple(j.cpus)) for j in self.jobs])
            metrics = {k: None if math.isnan(v) else round(v, 4) for k, v in run.metrics().items()}
            if any(math.isnan(solo.get(j.id, math.nan)) for j in self.jobs):
                metrics["throughput_vs_timeshare"] = metrics["mean_bounded_slowdown"] = None
        spans = sorted([(j.start_s, 1) for j in self.jobs if j.start_s is not None] +
                       [(j.end_s, -1) for j in self.jobs if j.start_s is not None and j.end_s is not None])
        most = cur = 0
        for _, d in spans:
            cur += d
            most = max(most, cur)
        return {"run_dir": self.run_dir, "backend": "real", "mode": "continuous", "simulated": False, "node": node,
                "policy": policy, "max_concurrency": max_concurrency, "decided_on": decided_on,
                "decisions": self.decisions, "jobs": [asdict(j) for j in self.jobs], "max_running": most,
                "metrics": metrics, "solo_source": solo_source, "failed": self.failed, "notes": self.notes}


def alloc_record(a: Allocation) -> dict[str, Any]:
    return {"cpus": list(a.cpus), "numa_nodes": list(a.numa_nodes), "memory": a.memory,
            "l3": {str(d): [w, m] for d, (w, m) in a.l3.items()}, "mem_bw_percent": {str(d): p for d, p in a.mem_bw_percent.items()}}


def alloc_of(rec: dict[str, Any]) -> Allocation:
    return Allocation(tuple(rec["cpus"]), tuple(rec["numa_nodes"]), rec["memory"],
                      {int(d): (w, m) for d, (w, m) in rec["l3"].items()}, {int(d): p for d, p in rec["mem_bw_percent"].items()})


def read_online_journal(path: Path) -> dict[str, Any]:
    """What an online run's journal says: its start, decisions, and each job's launch, start, CPUs, end."""
    out: dict[str, Any] = {"start": None, "decisions": 0, "launch": {}, "job_start": {}, "job_cpus": {}, "job_end": {}}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}: not an online run directory of 'cosched run'") from None
    for n, line in enumerate(lines, 1):
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            if n == len(lines):
                break  # a line cut by a crash mid-write: everything before it stands
            raise InputError(f"{path}:{n} is not a JSON line: the journal is damaged") from None
        ev = rec.get("event")
        if ev == "online_start" and out["start"] is None:
            out["start"] = rec
        elif ev == "decision":
            out["decisions"] = max(out["decisions"], rec["n"])
        elif ev in ("launch", "job_start", "job_cpus", "job_end"):
            out[ev][rec["job"]] = rec
        elif ev == "job_lost":
            out["job_end"][rec["job"]] = rec
    if out["start"] is None:
        raise InputError(f"{path} has no online_start: not an online run directory of 'cosched run'")
    return out


@dataclass(frozen=True)
class StreamModel:
    node: NodeSpec  # the simulated node decisions are made on (CPU ids are the real node's)
    kind: Literal["simulated", "model"]
    source: str


def stream_model(node: NodeSpec) -> StreamModel | None:
    """The node model decisions are made on: a simulated node itself; for the real node, the model its plans are
    scored on (``env.planners.scoring.model_node``: its calibrated model with the programs learned since); else None."""
    if node.simulated:
        return StreamModel(node, "simulated", f"simulated: the node model of {node.name}")
    from env.planners.scoring import model_node

    model = model_node(node)
    if model is None:
        return None
    if model.cpus != node.cpus or [sorted(d.cpus) for d in model.numa] != [sorted(d.cpus) for d in node.numa]:
        raise InputError(f"the node model {model.name} is of another shape than this node: run 'cosched calibrate' again")
    return StreamModel(model, "model", f"node model {model.name.removeprefix('sim:')}, calibrated on this node")


@dataclass
class HeldCpus:
    """The node as the model-free policies see it: which CPUs the running jobs hold."""

    node: NodeSpec
    now: float
    running: dict[str, Allocation]

    def free_cpus(self) -> set[int]:
        return set(self.node.cpus) - {c for a in self.running.values() for c in a.cpus}


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
            mark = self._mark(jid).encode()
            started = past["job_start"].get(jid)
            pid = started["pid"] if started else _find(MARK.encode() + b"=" + mark)
            r = self.results[jid]
            r.cpus, r.memory, r.stdout = list(alloc.cpus), alloc.memory, str(self.run_dir / f"{jid}.out")
            r.start_s = started["at_s"] if started else launch["at_s"]
            r.observed_cpus = past["job_cpus"].get(jid, {}).get("cpus")
            if pid is not None and _alive(pid, MARK.encode() + b"=" + mark):
                if not started:
                    self.journal.write("job_start", job=jid, pid=pid, at_s=r.start_s, argv=launch["argv"], found=True)
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
                                  "wall_s": r.end_s - (r.start_s or 0.0)})

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
        for k, a in d.starts:
            if k not in queued or not a.cpus or not set(a.cpus) <= free:
                raise RunError(f"the decision starts {k!r} on CPUs {list(a.cpus)}: it is not queued or they are not free")
            queued.discard(k)
            free -= set(a.cpus)
        if len(self.live) + len(d.starts) > self.cmax:
            raise RunError(f"the decision would run {len(self.live) + len(d.starts)} jobs at once, above Cmax {self.cmax}")
        bad = [k for k, _ in d.changes if k not in self.live]
        if bad:
            raise RunError(f"the decision changes {', '.join(bad)}, which are not running")

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
        journaled as not enforced (with the reason)."""
        v = self.live[jid]
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


def write_stream(run_dir: Path, doc: dict[str, Any]) -> None:
    """The run's own record of what it runs (the stream document, policy, window, Cmax): ``--resume`` needs no flags."""
    (run_dir / STREAM_FILE).write_text(json.dumps(doc, indent=1))


def read_stream(run_dir: Path) -> dict[str, Any]:
    try:
        return json.loads((run_dir / STREAM_FILE).read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"{run_dir}/{STREAM_FILE} is missing or unreadable: {exc}") from None


def is_online_run(run_dir: Path) -> bool:
    return (run_dir / STREAM_FILE).is_file()


__all__ = ["MARK", "Decide", "Held", "HeldCpus", "JobResult", "OnlineJob", "OnlineResult", "OnlineRunner", "StreamModel",
           "is_online_run", "read_online_journal", "read_stream", "stream_model", "write_stream"]
