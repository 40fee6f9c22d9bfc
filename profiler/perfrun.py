"""Run one command under ``perf stat -x, -e <events> -o FILE``, never through a shell.

This is the one place that starts a profiled process: ``cosched profile`` uses it for a solo profile, and
the batch runner uses it to run (and profile) a job that has no profile yet. Everything about the
process is a parameter: argv, environment, working directory, where its stdout/stderr go, the launch prefix
(``numactl --physcpubind=...``: made by the caller with ``env.plan.launch.solo_prefix``, the one place that builds
launch argv; this package imports nothing of ours), a timeout.

What perf does not tell us, and how we learn it anyway (perf 6.1, measured here):

* perf returns the workload's exit code, but **0 when the workload is killed by a signal**; it then prints
  ``ARGV0: <signal description>`` (``psignal``) on its stderr. Its stderr (shared with the workload's) goes
  through a pipe that we copy to the caller's destination and whose tail we read for that line.
* perf 6.1 has a race: when the workload exits before perf reaches its ``wait4`` (commands of a few ms),
  its SIGCHLD handler forgets the child, perf returns **0 whatever the workload's status** and never reaps it
  (measured: ``false`` "succeeded" 6 times in 300). So this process makes itself a child subreaper
  (``PR_SET_CHILD_SUBREAPER``, once, process-wide), notes the workload's pid (perf's only child, from
  ``/proc/PERF/task/PERF/children``) and, when perf left it unreaped, reaps it itself for its true status.
  Side effect: orphans of profiled commands are re-parented to this process instead of init.
* perf returns 255 with ``Workload failed: <reason>`` when the command cannot be executed.
* peak memory: ``os.wait4`` on perf gives ``ru_maxrss``, the maximum over perf and its (reaped) workload,
  so it is bounded below by perf's own peak (about 16 MB here): right for real jobs, coarse for tiny ones.
* wall time: monotonic, from just before the start to the reap, woken at once by a pidfd.
"""

from __future__ import annotations

import ctypes
import os
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import IO, Callable, Mapping, Sequence, Union

from profiler.errors import ProfilerInputError, ProfilerRunError
from profiler.events import PERF_EVENTS
from profiler.perfcsv import PerfStat, parse_perf_csv

#: Where a stream of the profiled command goes: None (inherit ours), subprocess.DEVNULL, an fd, a file.
Destination = Union[None, int, IO[bytes]]

_STDERR_TAIL_BYTES = 8192
_PR_SET_CHILD_SUBREAPER = 36
_SIGINT_GRACE_S = 5.0


@dataclass(frozen=True)
class PerfRun:
    """What one run under perf gave."""

    argv: tuple[str, ...]
    """The command as asked for."""
    executed: tuple[str, ...]
    """The argv actually started (perf stat ... -- [launch prefix] argv)."""
    exit_status: int
    """The command's exit code; -N when killed by signal N (subprocess's convention); 127 when not started."""
    wall_s: float
    peak_rss_kb: int
    stat: PerfStat | None
    """perf's counters; None when perf wrote none (the command could not start, perf was killed)."""
    timed_out: bool = False
    start_error: str | None = None
    """perf's 'Workload failed: ...' reason when the command could not be executed."""
    bound_cpus: tuple[int, ...] | None = None
    events: tuple[str, ...] = field(default=PERF_EVENTS)
    node_busy_cpu_s: float | None = None
    """CPU time the whole node spent busy during the run (/proc/stat), the command's own included."""

    @property
    def ok(self) -> bool:
        return self.exit_status == 0 and not self.timed_out and self.start_error is None and self.stat is not None

    @property
    def signal(self) -> int | None:
        return -self.exit_status if self.exit_status < 0 else None

    @property
    def duration_s(self) -> float:
        """The command's own lifetime from perf's duration_time when counted, else our wall time."""
        ns = self.stat.value("duration_time") if self.stat else None
        return ns / 1e9 if ns else self.wall_s

    @property
    def other_load_cpus(self) -> float | None:
        """CPUs used on average by *other* processes during the run (node busy time minus the command's
        task-clock, over the wall time): about 0 on an idle node. None when unknown."""
        own_ms = self.stat.value("task-clock") if self.stat else None
        if self.node_busy_cpu_s is None or own_ms is None or self.wall_s <= 0:
            return None
        return max(0.0, self.node_busy_cpu_s - own_ms / 1000.0) / self.wall_s

    def counters(self) -> dict[str, float | None]:
        if self.stat is None:
            return {e: None for e in self.events}
        return self.stat.counters(self.events)

    def describe_failure(self) -> str:
        """One line saying how the run failed ('' when it did not)."""
        cmd = self.argv[0]
        if self.start_error:
            return f"'{cmd}' could not be started: {self.start_error}"
        if self.timed_out:
            return f"'{cmd}' timed out after {self.wall_s:.1f} s and was stopped"
        if self.signal is not None:
            return f"'{cmd}' was killed by signal {self.signal} ({signal.strsignal(self.signal)})"
        if self.exit_status != 0:
            return f"'{cmd}' failed with exit status {self.exit_status}"
        if self.stat is None:
            return "perf wrote no counters"
        return ""


def find_perf() -> str:
    perf = shutil.which("perf")
    if perf is None:
        raise ProfilerRunError("perf is not installed (apt-get install linux-perf)")
    return perf


@lru_cache(maxsize=1)
def perf_version() -> str:
    """'perf version 6.1.192'."""
    try:
        out = subprocess.run([find_perf(), "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProfilerRunError(f"cannot run 'perf --version': {exc}") from None
    return out.stdout.strip() or out.stderr.strip() or "perf version unknown"


def resolve_command(argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: str | os.PathLike[str] | None = None) -> str:
    """The executable argv[0] names, or ProfilerInputError (bad input: nothing was run)."""
    if not argv:
        raise ProfilerInputError("no command given (usage: ... -- CMD [ARG...])")
    cmd = argv[0]
    if "/" in cmd:
        path = Path(cmd) if os.path.isabs(cmd) or cwd is None else Path(cwd) / cmd
        if not path.is_file():
            raise ProfilerInputError(f"command not found: {cmd}")
        if not os.access(path, os.X_OK):
            raise ProfilerInputError(f"command is not executable: {cmd}")
        return str(path)
    search = (env if env is not None else os.environ).get("PATH", os.defpath)
    found = shutil.which(cmd, path=search)
    if found is None:
        raise ProfilerInputError(f"command not found: {cmd} (not in PATH)")
    return found


def run_under_perf(
    argv: Sequence[str],
    *,
    events: Sequence[str] = PERF_EVENTS,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    stdout: Destination = None,
    stderr: Destination = None,
    timeout_s: float | None = None,
    launch_prefix: Sequence[str] = (),
    bound_cpus: Sequence[int] | None = None,
    perf_output: str | os.PathLike[str] | None = None,
    on_tick: Callable[[float], None] | None = None,
    tick_s: float = 0.25,
) -> PerfRun:
    """Run ``argv`` under perf stat and wait for it. Never raises because the command failed: look at ``ok``.

    ``env`` is the command's whole environment (None: ours). ``launch_prefix`` goes between perf and the
    command (the binding, from ``env.plan.launch.solo_prefix``); ``bound_cpus`` records the CPUs it binds to.
    ``perf_output`` keeps perf's CSV at that path (default: a temporary file, removed).
    ``on_tick(elapsed_s)`` is called about every ``tick_s`` while it runs.
    Raises ProfilerInputError when the command does not exist, ProfilerRunError when perf itself fails.
    """
    argv = tuple(str(a) for a in argv)
    resolve_command(argv, env, cwd)
    perf = find_perf()
    prefix = [str(a) for a in launch_prefix]
    if prefix and shutil.which(prefix[0], path=(env if env is not None else os.environ).get("PATH", os.defpath)) is None:
        raise ProfilerRunError(f"{prefix[0]} is not installed: it starts the command (launch prefix {' '.join(prefix)})")

    with tempfile.TemporaryDirectory(prefix="cosched-perf-") as tmp:
        out_path = Path(perf_output) if perf_output is not None else Path(tmp) / "perf.csv"
        executed = (perf, "stat", "-x", ",", "-e", ",".join(events), "-o", str(out_path), "--", *prefix, *argv)
        copier = _StderrCopier(stderr)
        _become_subreaper()
        busy_before = _node_busy_s()
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                executed,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=subprocess.PIPE,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                start_new_session=True,  # its own process group: a timeout stops perf and the command together
            )
        except OSError as exc:
            raise ProfilerRunError(f"cannot start perf: {exc}") from None
        assert proc.stderr is not None
        copier.start(proc.stderr)
        timed_out = False
        try:
            workload_pid = _find_workload(proc)
            status, rusage, timed_out = _wait(proc, started, timeout_s, on_tick, tick_s)
        except BaseException:
            _stop_group(proc)
            raise
        wall_s = time.monotonic() - started
        orphan = _reap_orphans(proc.pid, workload_pid)  # perf's race: it did not reap the command, we did
        busy_after = _node_busy_s()
        copier.join()
        tail = copier.tail()

        text = out_path.read_text(errors="replace") if out_path.exists() else ""
        perf_code = os.waitstatus_to_exitcode(status)
        stat: PerfStat | None = None
        if _has_counter_lines(text):  # garbage raises PerfOutputError; no lines at all means nothing ran
            stat = parse_perf_csv(text, source=f"perf output of {argv[0]}")

    start_error = _workload_failed(tail)
    killed_by = _killed_by(tail, (prefix or list(argv))[0])
    if start_error is not None:
        exit_status = 127
    elif killed_by is not None:
        exit_status = -killed_by
    elif orphan is not None:
        exit_status = os.waitstatus_to_exitcode(orphan[0])
    else:  # the command's exit code, as perf returns it (negative: perf itself killed, after a timeout)
        exit_status = perf_code
    peak_rss_kb = max(
        int(rusage.ru_maxrss) if rusage is not None else 0, int(orphan[1].ru_maxrss) if orphan is not None else 0
    )
    if stat is None and start_error is None and not timed_out and exit_status >= 0 and perf_code != 0:
        last = _last_line(tail)
        raise ProfilerRunError(f"perf failed (exit status {perf_code}){': ' + last if last else ''}")
    return PerfRun(
        argv=argv,
        executed=executed,
        exit_status=exit_status,
        wall_s=wall_s,
        peak_rss_kb=peak_rss_kb,
        stat=stat,
        timed_out=timed_out,
        start_error=start_error,
        bound_cpus=tuple(bound_cpus) if bound_cpus is not None else None,
        events=tuple(events),
        node_busy_cpu_s=(busy_after - busy_before) if busy_before is not None and busy_after is not None else None,
    )


def _node_busy_s() -> float | None:
    """Seconds of CPU time the node has spent busy since boot (all CPUs; /proc/stat, not idle nor iowait)."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            first = f.readline().split()
        values = [int(v) for v in first[1:9]]  # user nice system idle iowait irq softirq steal
    except (OSError, ValueError, IndexError):
        return None
    busy = sum(values) - values[3] - values[4]
    return busy / os.sysconf("SC_CLK_TCK")


@lru_cache(maxsize=1)
def _become_subreaper() -> bool:
    """prctl(PR_SET_CHILD_SUBREAPER, 1): a workload perf leaves unreaped becomes our child (see above)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _perf_children(perf_pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{perf_pid}/task/{perf_pid}/children").read_text().split()]
    except (OSError, ValueError):
        return []


def _find_workload(proc: subprocess.Popen[bytes], limit_s: float = 2.0) -> int | None:
    """The pid of the command perf forks (it waits for perf's go before exec, so there is time to see it)."""
    pidfd = os.pidfd_open(proc.pid)
    try:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            children = _perf_children(proc.pid)
            if children:
                return children[0]
            if select.select([pidfd], [], [], 0.001)[0]:  # perf already gone
                return None
        return None
    finally:
        os.close(pidfd)


def _reap_orphans(session: int, workload_pid: int | None) -> tuple[int, os.struct_rusage] | None:
    """(wait status, rusage) of the command if perf left it to us (a re-parented zombie), else None.

    Also reaps every other dead process of the run's session (perf's session id is its pid) that was
    re-parented to us, so none stays a zombie. The command is ``workload_pid`` when it was seen, else the
    earliest-started of them."""
    dead = _our_zombies_in_session(session)
    if workload_pid is not None and workload_pid not in dead:
        dead.insert(0, workload_pid)  # maybe not a zombie yet in /proc's view: try it anyway
    target = workload_pid if workload_pid is not None else (dead[0] if dead else None)
    result = None
    for pid in dead:
        try:
            got, status, rusage = os.wait4(pid, os.WNOHANG)
        except ChildProcessError:
            continue  # not our child: perf reaped it, its exit code is right
        if got == pid and pid == target:
            result = (status, rusage)
    return result


def _our_zombies_in_session(session: int) -> list[int]:
    """Dead children of this process whose session is ``session``, earliest started first."""
    found: list[tuple[int, int]] = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return []
    for tid in tasks:
        try:
            children = Path(f"/proc/self/task/{tid}/children").read_text().split()
        except OSError:
            continue
        for child in children:
            try:
                stat = Path(f"/proc/{child}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            # fields: state ppid pgrp session ... starttime (index 19)
            if fields[0] == "Z" and int(fields[3]) == session:
                found.append((int(fields[19]), int(child)))
    return [pid for _, pid in sorted(found)]


def _wait(
    proc: subprocess.Popen[bytes],
    started: float,
    timeout_s: float | None,
    on_tick: Callable[[float], None] | None,
    tick_s: float,
) -> tuple[int, os.struct_rusage | None, bool]:
    """Reap perf with wait4 (for its rusage), woken at once by a pidfd; stop the group on timeout."""
    pidfd = os.pidfd_open(proc.pid)
    timed_out = False
    deadline = None if timeout_s is None else started + timeout_s
    try:
        while True:
            now = time.monotonic()
            wait = tick_s
            if deadline is not None:
                if now >= deadline and not timed_out:
                    timed_out = True
                    _signal_group(proc, signal.SIGINT)  # perf prints its counters; the command is interrupted
                    deadline = now + _SIGINT_GRACE_S
                elif now >= deadline and timed_out:
                    _signal_group(proc, signal.SIGKILL)
                    deadline = None
                if deadline is not None:
                    wait = max(0.0, min(wait, deadline - now))
            ready, _, _ = select.select([pidfd], [], [], wait)
            if ready:
                _, status, rusage = os.wait4(proc.pid, 0)
                proc.returncode = os.waitstatus_to_exitcode(status)
                if timed_out:
                    _signal_group(proc, signal.SIGKILL)  # anything of the command still alive
                return status, rusage, timed_out
            if on_tick is not None:
                on_tick(time.monotonic() - started)
    finally:
        os.close(pidfd)


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """Interrupted while waiting (Ctrl-C, an error): stop perf and the command, reap perf."""
    _signal_group(proc, signal.SIGINT)
    try:
        proc.wait(timeout=_SIGINT_GRACE_S)
    except subprocess.TimeoutExpired:
        _signal_group(proc, signal.SIGKILL)
        proc.wait()
    except ChildProcessError:
        pass


def _has_counter_lines(text: str) -> bool:
    return any(ln.strip() and not ln.lstrip().startswith("#") for ln in text.splitlines())


def _last_line(tail: bytes) -> str:
    lines = [ln.strip() for ln in tail.decode(errors="replace").splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _workload_failed(tail: bytes) -> str | None:
    for line in reversed(tail.decode(errors="replace").splitlines()):
        if line.startswith("Workload failed:"):
            return line.removeprefix("Workload failed:").strip() or "unknown reason"
    return None


def _killed_by(tail: bytes, argv0: str) -> int | None:
    """perf's psignal line 'ARGV0: Killed' as the last line of its stderr -> the signal number."""
    last = _last_line(tail)
    if not last.startswith(f"{argv0}: "):
        return None
    description = last.removeprefix(f"{argv0}: ")
    for sig in signal.valid_signals():
        try:
            if signal.strsignal(sig) == description:
                return int(sig)
        except ValueError:
            continue
    return None


class _StderrCopier:
    """Copies the pipe perf and the command write their stderr to, to the caller's destination; keeps a tail."""

    def __init__(self, destination: Destination) -> None:
        self._dest = destination
        self._tail = bytearray()
        self._thread: threading.Thread | None = None

    def start(self, pipe: IO[bytes]) -> None:
        self._thread = threading.Thread(target=self._copy, args=(pipe,), name="perf-stderr", daemon=True)
        self._thread.start()

    def _copy(self, pipe: IO[bytes]) -> None:
        fd = pipe.fileno()
        try:
            while True:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                self._tail += chunk
                del self._tail[:-_STDERR_TAIL_BYTES]
                self._write(chunk)
        except OSError:
            pass
        finally:
            pipe.close()

    def _write(self, chunk: bytes) -> None:
        dest = self._dest
        try:
            if dest is None:
                os.write(2, chunk)
            elif dest == subprocess.DEVNULL:
                return
            elif isinstance(dest, int):
                os.write(dest, chunk)
            else:
                dest.write(chunk)
                dest.flush()
        except (OSError, ValueError):
            pass

    def join(self) -> None:
        # A background process of the command may keep the pipe open: do not wait for it forever.
        if self._thread is not None:
            self._thread.join(timeout=2.0)

    def tail(self) -> bytes:
        return bytes(self._tail)


# For callers that start ``perf stat -- CMD`` in its own session themselves (env.real's measuring path), the same
# fixes: become_subreaper() before perf starts; workload_pid(perf's Popen) while it runs; after it exited,
# reap_left_workload(perf's pid, that pid): the command's (wait status, rusage) where perf left it unreaped, else
# None; signal_from_stderr(stderr's tail, the command's argv[0]): the signal that killed it (perf returned 0).
become_subreaper, workload_pid, reap_left_workload, signal_from_stderr = (_become_subreaper, _find_workload,
                                                                          _reap_orphans, _killed_by)
