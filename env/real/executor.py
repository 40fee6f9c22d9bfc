"""The executor: a plan's groups on this node, one after another, losing nothing (``env.real.run`` wraps it into a run).

* Each group's jobs start together with their ``launch`` argv (never through a shell), each in its own
  process group (``start_new_session``) with its ``env``; stdout/stderr go to files in the run directory.
  The group ends when its last job exits; times come from the monotonic clock.
* A waiter thread per job blocks in ``wait()`` (no polling on a 2-CPU node); the main thread enforces
  timeouts, samples each job's allowed CPUs from /proc (observed, not assumed) and reports progress.
* resctrl groups (when the plan enforces cache/bandwidth through resctrl) are created before the group and
  removed after it, also on failure or interrupt.
* SIGINT/SIGTERM: children's process groups get SIGTERM then SIGKILL, partitioning is cleaned up, the journal
  says ``interrupted``; ``resume`` re-runs only groups without a ``group_end``.
* Background jobs (``background``: ids, e.g. the node model's pressure generator) run until the group's other
  jobs have ended, then get SIGTERM (SIGKILL after a grace); the group's makespan is that of the others.
* Jobs launched under ``perf stat`` (``perf_jobs``: id -> the command's argv[0], the measuring path of
  ``env.real.probes``) get ``profiler.perfrun``'s fixes of perf 6.1's status: a command that ends in its first
  microseconds may be left unreaped with perf returning 0 whatever it returned, so this process is a child
  subreaper, notes the command's pid and reaps it itself for its true status; a command killed by a signal
  (perf returns 0) is known by perf's last stderr line.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Collection, Iterator, Mapping

from env.plan.allocate import mba_hardware_value
from env.node.cpulist import parse_cpulist
from env.errors import CoschedError, InputError
from env.real.journal import Journal, JournalState, read_journal
from env.plan.models import Excluded, Plan, PlanJob, RunGroup, RunJob
from env.node.spec import NodeSpec
from env.plan.builder import check_plan_for_node
from env.node.resctrl import create_group, group_path, remove_group, schemata

KILL_GRACE_S = 2.0


class Interrupted(CoschedError):
    cli_exit_code = 130


@dataclass
class SoloResult:
    exit_code: int | None
    signal: int | None
    wall_s: float
    timed_out: bool = False


# A job without a profile: run it alone on the whole node while profiling it (the caller stores the profile).
SoloRunner = Callable[[Excluded, Path, Path, float | None], SoloResult]
Progress = Callable[[str, dict[str, Any]], None]


def _resolvable(program: str, env: dict[str, str]) -> bool:
    if "/" in program:
        return os.path.isfile(program) and os.access(program, os.X_OK)
    return shutil.which(program, path=env.get("PATH", os.environ.get("PATH"))) is not None


def preflight(plan: Plan, node: NodeSpec) -> None:
    """Everything that can be checked before anything starts, so bad input leaves nothing half-run."""
    check_plan_for_node(plan, node)
    for g in plan.groups:
        for j in g.jobs:
            if not j.command or not j.launch:
                raise InputError(f"job {j.id} has no command: the real backend needs \"command\": [\"prog\", ...]")
            env = {**os.environ, **j.env}
            for program in {j.launch[0], j.command[0]}:
                if not _resolvable(program, env):
                    raise InputError(f"job {j.id}: {program!r} is not an executable file or a program on PATH")
    for e in plan.excluded:
        if e.command and not _resolvable(e.command[0], {**os.environ, **e.env}):
            raise InputError(f"job {e.id}: {e.command[0]!r} is not an executable file or a program on PATH")
    if any(g.jobs for g in plan.groups) and plan.enforcement.method == "resctrl" and not node.resctrl_path:
        raise InputError("the plan enforces cache/bandwidth through resctrl, but this node has no resctrl mounted")


_ENV_WITH_VALUE = frozenset({"-u", "--unset", "-C", "--chdir"})


def program_argv(command: list[str]) -> list[str]:
    """The argv of the program a command runs in the end: ``env [OPTION]... [NAME=VALUE]... PROG ARG...`` execs
    PROG in its own process (the same pid), so the job is PROG's argv; a command without ``env`` is itself."""
    argv = list(command)
    while argv and os.path.basename(argv[0]) == "env":
        i = 1
        while i < len(argv):
            a = argv[i]
            if a == "--":
                i += 1
                break
            split = argv[i + 1] if a in ("-S", "--split-string") and i + 1 < len(argv) else \
                a[len("--split-string="):] if a.startswith("--split-string=") else a[2:] if a.startswith("-S") else None
            if split is not None:  # -S 'PROG ARG': the words of one argument
                argv = argv[:i] + shlex.split(split) + argv[i + (2 if a in ("-S", "--split-string") else 1):]
                continue
            if a in _ENV_WITH_VALUE:
                i += 2
            elif a.startswith("-") or ("=" in a and not a.startswith("=")):
                i += 1
            else:
                break
        argv = argv[i:]
    return argv


def runs_command(pid: int, command: list[str], launch: list[str] | None = None) -> bool:
    """Has ``pid`` exec'd the job's own program? Its cmdline then ends with the command's argv, or with the argv
    of the program behind ``env`` when the command starts with it (``program_argv``; for a script the kernel puts
    the interpreter first and keeps the script path and its arguments). Before that the pid is a copy of this
    process (between fork and exec) or a wrapper of ``launch`` (numactl, ...), whose cmdline is a longer tail of
    the launch argv: that is not the job yet."""
    try:
        cmdline = [a.decode(errors="replace") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]]
    except OSError:
        return False
    wrappers = launch or []
    for argv in (command, program_argv(command)):
        n = len(argv)
        if not (len(cmdline) >= n > 0 and cmdline[len(cmdline) - n:] == argv):
            continue
        if len(cmdline) == n:
            return True
        if not (len(cmdline) <= len(wrappers) and wrappers[len(wrappers) - len(cmdline):] == cmdline):
            return True
    return False


def allowed_cpus(pid: int, command: list[str], launch: list[str] | None = None) -> list[int] | None:
    """Union of the allowed CPUs of a process's threads, once it runs the job's own program."""
    if not runs_command(pid, command, launch):
        return None
    try:
        cpus: set[int] = set()
        for task in Path(f"/proc/{pid}/task").iterdir():
            for line in (task / "status").read_text().splitlines():
                if line.startswith("Cpus_allowed_list:"):
                    cpus.update(parse_cpulist(line.split(":", 1)[1]))
        return sorted(cpus)
    except (OSError, ValueError):
        return None


def _kill_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class _Job:
    def __init__(self, job: PlanJob, run_dir: Path, t0: float, perf_argv0: str | None = None) -> None:
        self.job = job
        self.perf_argv0 = perf_argv0  # launched under perf stat: its command's argv[0] (perf's fixes, above)
        self.workload_code: int | None = None  # the command's own status where perf left it to us
        self.out = run_dir / f"{job.id}.out"
        self.err = run_dir / f"{job.id}.err"
        env = {**os.environ, **job.env}
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = subprocess.Popen(job.launch, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, start_new_session=True)
        self.start = time.monotonic()
        self.start_rel = self.start - t0
        self.end: float | None = None
        self.timed_out = False
        self.killed_at: float | None = None
        self.cpus: list[int] | None = None
        self._thread = threading.Thread(target=self._wait, daemon=True)
        self._thread.start()

    def _wait(self) -> None:
        if self.perf_argv0 is None:
            self.proc.wait()
        else:
            from profiler.perfrun import reap_left_workload, workload_pid

            command = workload_pid(self.proc)  # seen while perf holds it before exec
            self.proc.wait()
            left = reap_left_workload(self.proc.pid, command)
            self.workload_code = os.waitstatus_to_exitcode(left[0]) if left is not None else None
        self.end = time.monotonic()

    def _returncode(self) -> int | None:
        rc = self.proc.returncode
        if self.perf_argv0 is None or rc is None:
            return rc
        if self.workload_code is not None:  # perf's race: it returned 0 and never reaped the command; we did
            return self.workload_code
        if rc == 0:  # a command killed by a signal: perf returns 0 and says so on its last stderr line
            from profiler.perfrun import signal_from_stderr

            try:
                with open(self.err, "rb") as f:
                    f.seek(max(0, f.seek(0, os.SEEK_END) - 8192))
                    sig = signal_from_stderr(f.read(), self.perf_argv0)
            except OSError:
                sig = None
            return -sig if sig else rc
        return rc

    @property
    def done(self) -> bool:
        return self.end is not None

    def record(self) -> RunJob:
        rc = self._returncode()
        return RunJob(
            id=self.job.id,
            exit_code=rc if rc is not None and rc >= 0 and not self.timed_out else None,
            signal=-rc if rc is not None and rc < 0 else None,
            wall_s=round((self.end or time.monotonic()) - self.start, 4),
            start_s=round(self.start_rel, 4),
            stdout=str(self.out),
            stderr=str(self.err),
            timed_out=self.timed_out,
            observed_cpus=self.cpus,
        )


class Executor:
    def __init__(
        self,
        plan: Plan,
        node: NodeSpec,
        run_dir: Path,
        *,
        timeout_s: float | None = None,
        fail_fast: bool = False,
        progress: Progress | None = None,
        solo_runner: SoloRunner | None = None,
        background: Collection[str] = (),
        perf_jobs: Mapping[str, str] | None = None,
    ) -> None:
        self.plan, self.node, self.run_dir = plan, node, run_dir
        self.background = frozenset(background)
        self.perf_jobs = dict(perf_jobs or {})
        if self.perf_jobs:
            from profiler.perfrun import become_subreaper

            become_subreaper()
        self.timeout_s, self.fail_fast = timeout_s, fail_fast
        self.progress = progress or (lambda kind, info: None)
        self.solo_runner = solo_runner
        self._stop = False

    # -- the groups to run: the plan's, then one solo stage per job without a profile
    def stages(self) -> Iterator[tuple[int, list[PlanJob] | Excluded]]:
        for g in self.plan.groups:
            yield g.index, g.jobs
        base = len(self.plan.groups)
        for k, e in enumerate(e for e in self.plan.excluded if e.command):
            yield base + k, e

    def run(self, state: JournalState | None = None) -> list[RunGroup]:
        journal = Journal(self.run_dir / "journal.jsonl")
        results: list[RunGroup] = []
        old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

        def on_signal(signum: int, _frame: Any) -> None:
            raise KeyboardInterrupt(signal.Signals(signum).name)

        signal.signal(signal.SIGTERM, on_signal)
        try:
            solo = sum(1 for e in self.plan.excluded if e.command)
            journal.write("run_start", resumed=state is not None, groups=len(self.plan.groups), solo=solo)
            self.progress("run_start", {"groups": len(self.plan.groups), "solo": solo, "resumed": state is not None})
            if state is not None and state.stopped:
                self.progress("orphans_stopped", {"jobs": state.stopped})
            for index, what in self.stages():
                if state is not None and index in state.done_groups:
                    results.append(self._from_journal(index, what, state))
                    continue
                if self._stop:
                    break
                if isinstance(what, Excluded):
                    results.append(self._run_solo(index, what, journal))
                else:
                    results.append(self._run_group(index, what, journal))
            journal.write("run_end", stopped_early=self._stop)
        except KeyboardInterrupt as exc:
            journal.write("interrupted", reason=str(exc) or "SIGINT")
            raise Interrupted(f"interrupted; finish it with: cosched run --resume {self.run_dir}") from None
        finally:
            journal.close()
            for s, h in old.items():
                signal.signal(s, h)
        return results

    def _from_journal(self, index: int, what: list[PlanJob] | Excluded, state: JournalState) -> RunGroup:
        end = state.done_groups[index]
        jobs = [RunJob.model_validate(r["record"]) for r in state.jobs.get(index, {}).values()]
        return RunGroup(index=index, makespan_s=end["makespan_s"], jobs=jobs, solo_profile=isinstance(what, Excluded))

    def _resctrl_groups(self, index: int, jobs: list[PlanJob]) -> list[str]:
        enf = self.plan.enforcement
        if enf.method != "resctrl" or not (enf.l3 or enf.mem_bw):
            return []
        made = []
        try:
            for j in jobs:
                path = group_path(self.node, index, j.id)
                l3 = {int(d): int(a.mask, 16) for d, a in j.l3.items()} if enf.l3 else None
                mb = {int(d): v for d, pct in j.mem_bw_percent.items() if (v := mba_hardware_value(self.node, int(d), pct)) is not None} if enf.mem_bw else None
                create_group(path, schemata(self.node, l3, mb))
                made.append(path)
        except Exception:
            for p in made:
                remove_group(p)
            raise
        return made

    def _run_group(self, index: int, jobs: list[PlanJob], journal: Journal) -> RunGroup:
        journal.write("group_start", group=index, jobs=[j.id for j in jobs])
        self.progress("group_start", {"group": index, "jobs": [j.id for j in jobs]})
        groups = self._resctrl_groups(index, jobs)
        running: list[_Job] = []
        reported: set[str] = set()
        t0 = time.monotonic()
        try:
            for j in jobs:
                rj = _Job(j, self.run_dir, t0, self.perf_jobs.get(j.id))
                running.append(rj)
                journal.write("job_start", group=index, job=j.id, pid=rj.proc.pid, argv=j.launch)
            next_sample = {r.job.id: 0.0 for r in running}
            foreground = [r for r in running if r.job.id not in self.background] or running
            while True:
                now = time.monotonic()
                if all(r.done for r in foreground):  # the group's work is done: stop what runs in the background
                    for r in running:
                        if not r.done and r.killed_at is None:
                            r.killed_at = now
                            _kill_group(r.proc, signal.SIGTERM)
                for r in running:
                    if r.cpus is None and not r.done and now >= next_sample[r.job.id]:
                        r.cpus = allowed_cpus(r.proc.pid, r.job.command, r.job.launch)
                        next_sample[r.job.id] = now + 0.02
                        if r.cpus is not None:
                            journal.write("job_cpus", group=index, job=r.job.id, cpus=r.cpus)
                    if not r.done and self.timeout_s is not None and now - r.start > self.timeout_s and r.killed_at is None:
                        r.timed_out, r.killed_at = True, now
                        _kill_group(r.proc, signal.SIGTERM)
                    if not r.done and r.killed_at is not None and now - r.killed_at > KILL_GRACE_S:
                        _kill_group(r.proc, signal.SIGKILL)
                    if r.done and r.job.id not in reported:
                        reported.add(r.job.id)
                        rec = r.record()
                        journal.write("job_end", group=index, job=r.job.id, record=rec.model_dump())
                        self.progress("job_end", {"group": index, "job": r.job.id, "exit_code": rec.exit_code, "wall_s": rec.wall_s, "timed_out": rec.timed_out})
                        if self.fail_fast and (rec.exit_code != 0):
                            self._stop = True
                            for other in running:
                                if not other.done and other.killed_at is None:
                                    other.killed_at = now
                                    _kill_group(other.proc, signal.SIGTERM)
                if len(reported) == len(running):
                    break
                self.progress("tick", {"group": index, "elapsed": now - t0, "running": [r.job.id for r in running if not r.done]})
                time.sleep(0.01)
        except BaseException:
            for r in running:
                if not r.done:
                    _kill_group(r.proc, signal.SIGTERM)
            deadline = time.monotonic() + KILL_GRACE_S
            while any(not r.done for r in running) and time.monotonic() < deadline:
                time.sleep(0.02)
            for r in running:
                if not r.done:
                    _kill_group(r.proc, signal.SIGKILL)
                    r.proc.wait()
            raise
        finally:
            for g in groups:
                remove_group(g)
        makespan = max(r.end for r in foreground if r.end is not None) - t0
        journal.write("group_end", group=index, makespan_s=round(makespan, 4))
        self.progress("group_end", {"group": index, "makespan_s": makespan})
        return RunGroup(index=index, makespan_s=round(makespan, 4), jobs=[r.record() for r in running])

    def _run_solo(self, index: int, job: Excluded, journal: Journal) -> RunGroup:
        journal.write("group_start", group=index, jobs=[job.id], solo_profile=True)
        self.progress("group_start", {"group": index, "jobs": [job.id], "solo_profile": True})
        if self.solo_runner is None:
            raise InputError(f"job {job.id} has no profile and no way to profile it was given")
        out, err = self.run_dir / f"{job.id}.out", self.run_dir / f"{job.id}.err"
        res = self.solo_runner(job, out, err, self.timeout_s)
        rec = RunJob(id=job.id, exit_code=res.exit_code, signal=res.signal, wall_s=round(res.wall_s, 4), stdout=str(out), stderr=str(err), timed_out=res.timed_out)
        journal.write("job_end", group=index, job=job.id, record=rec.model_dump())
        self.progress("job_end", {"group": index, "job": job.id, "exit_code": rec.exit_code, "wall_s": rec.wall_s, "timed_out": rec.timed_out})
        journal.write("group_end", group=index, makespan_s=rec.wall_s)
        self.progress("group_end", {"group": index, "makespan_s": rec.wall_s})
        if self.fail_fast and rec.exit_code != 0:
            self._stop = True
        return RunGroup(index=index, makespan_s=rec.wall_s, jobs=[rec], solo_profile=True)


def resume_state(run_dir: Path) -> JournalState:
    if not run_dir.is_dir():
        raise InputError(f"{run_dir} is not a directory: give the run directory that 'cosched run' printed")
    if not os.access(run_dir, os.R_OK | os.W_OK | os.X_OK):
        raise InputError(f"{run_dir} is not readable and writable: cannot resume there")
    state = read_journal(run_dir / "journal.jsonl")
    state.stopped = [{"job": rec.get("job"), "group": rec.get("group"), "pid": rec.get("pid")}
                     for rec in state.orphans() if _kill_orphan(rec)]
    if state.stopped:  # said in the journal before anything runs again (and by the run's progress)
        journal = Journal(run_dir / "journal.jsonl")
        try:
            journal.write("orphans_stopped", jobs=state.stopped)
        finally:
            journal.close()
    return state


def _kill_orphan(rec: dict[str, Any]) -> bool:
    """Stop a job a killed runner left behind, but only if its pid still runs that job's argv
    (a pid may have been reused since); whether it was stopped."""
    pid, argv = rec.get("pid"), rec.get("argv") or []
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
    except OSError:
        return False
    words = [a.encode() for a in argv]
    if cmdline and any(cmdline == words[i:] for i in range(len(words))):
        try:
            os.killpg(pid, signal.SIGKILL)
            return True
        except OSError:
            pass
    return False
