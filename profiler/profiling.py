"""A solo profile of one command: a run on the whole node under perf, then (unless told not to) a second
run bound to one core for the scale factor. A failed run is refused: no profile comes out of it.

Both runs start with the launch prefix the caller gives (``env.plan.launch.solo_prefix``: the whole node, and one
core for the scale factor), so they are launched like every other job.

Scale factor = time on one core / time on the whole node, both times being perf's ``duration_time`` (the
command's own lifetime; our monotonic wall time when perf did not count it). About 1 for a single-threaded
command, about the number of cores for one that scales perfectly.
"""

from __future__ import annotations

import os
import subprocess
from typing import Callable, Literal, Mapping, Sequence

from profiler.errors import ProfilerInputError, ProfilerRunError
from profiler.events import PERF_EVENTS
from profiler.models import Profile, check_profile_name
from profiler.perfrun import Destination, PerfRun, perf_version, resolve_command, run_under_perf

Phase = Literal["all-cores", "one-core"]

def one_core() -> int:
    """The first CPU this process may run on: the one-core run is bound to it."""
    return min(os.sched_getaffinity(0))


#: CPUs -> the launch prefix binding a run to them (``env.plan.launch.solo_prefix`` for a node); None: every CPU.
Launcher = Callable[[Sequence[int] | None], Sequence[str]]


def profile_command(
    name: str,
    argv: Sequence[str],
    node_id: str,
    *,
    scale: bool = True,
    launcher: Launcher | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    stdout: Destination = subprocess.DEVNULL,
    stderr: Destination = subprocess.DEVNULL,
    timeout_s: float | None = None,
    on_phase: Callable[[Phase], None] | None = None,
    on_tick: Callable[[float], None] | None = None,
) -> Profile:
    """Profile ``argv`` solo on this node; returns the Profile (not stored: see ``ProfileStore.put``).

    ``launcher(cpus)`` gives each run's launch prefix (the whole node: None; the one-core run: [one_core()]);
    without it the runs are unbound, and the scale factor cannot be measured (refused).

    Raises ProfilerInputError (bad name, command not found) before running anything, and
    ProfilerRunError when a run fails (non-zero exit, killed, timed out, could not start).
    """
    check_profile_name(name)
    if not node_id:
        raise ProfilerInputError("node_id is empty")
    argv = [str(a) for a in argv]
    resolve_command(argv, env, cwd)
    if scale and launcher is None:
        raise ProfilerInputError("the one-core run needs a launcher (env.plan.launch.solo_prefix) to bind it to one core")
    version = perf_version()

    if on_phase:
        on_phase("all-cores")
    full = run_under_perf(
        argv, env=env, cwd=cwd, stdout=stdout, stderr=stderr, timeout_s=timeout_s, on_tick=on_tick,
        launch_prefix=launcher(None) if launcher else (),
    )
    _refuse_failed(full, "the solo run")

    one: PerfRun | None = None
    if scale:
        if on_phase:
            on_phase("one-core")
        one = run_under_perf(
            argv,
            env=env,
            cwd=cwd,
            stdout=stdout,
            stderr=stderr,
            timeout_s=timeout_s,
            launch_prefix=launcher([one_core()]),  # type: ignore[misc]
            bound_cpus=[one_core()],
            on_tick=on_tick,
        )
        _refuse_failed(one, "the one-core run (scale factor)")

    return build_profile(name, node_id, full, one, perf_version=version)


def build_profile(
    name: str, node_id: str, full: PerfRun, one: PerfRun | None, *, perf_version: str | None
) -> Profile:
    """The Profile of a successful whole-node run and, optionally, its one-core run."""
    counters = full.counters()
    one_core_s = one.duration_s if one is not None else None
    return Profile(
        name=name,
        node_id=node_id,
        command=list(full.argv),
        counters={e: counters.get(e) for e in PERF_EVENTS},
        wall_s=full.wall_s,
        exit_status=full.exit_status,
        peak_rss_kb=full.peak_rss_kb,
        scale_factor=(one_core_s / full.duration_s) if one_core_s is not None else None,
        one_core_s=one_core_s,
        other_load_cpus=_max_or_none(full.other_load_cpus, one.other_load_cpus if one else None),
        perf_version=perf_version,
    )


def _max_or_none(*values: float | None) -> float | None:
    known = [v for v in values if v is not None]
    return round(max(known), 3) if known else None


def _refuse_failed(run: PerfRun, which: str) -> None:
    if run.ok:
        return
    raise ProfilerRunError(f"{which} failed: {run.describe_failure()}; nothing stored")
