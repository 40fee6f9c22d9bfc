"""Whether a program adapts to CPUs taken from it while it runs (``cosched profile --adapts``), measured.

A program fixes its thread count when it starts. Re-pinned onto fewer CPUs, its threads share them; what that costs
depends on how they wait: an OpenMP program whose threads spin at barriers ran two orders of magnitude slower than
the node model predicts, programs whose threads sleep or take work from a shared counter lost nothing
(``bench/giveback_cost.py``). Nothing outside a program says which kind it is, so it is measured:

* the **kept run**: the command started on the CPUs a give-back keeps (``kept_cpus``: half the node's, dealt over its
  NUMA domains), alone: its time ``kept_s`` is what the node model's rate after a give-back stands for;
* the **give-back run**: the command started on every CPU, and at half its solo time (``full_s``, the profile's solo
  run) every thread of it re-pinned onto the kept CPUs (``profiler.repin``, the runners' own code); stopped at ``cap``
  times the prediction (a program that spins would otherwise run for minutes).

The prediction is ``full_s / 2 + kept_s / 2``; the ratio, measured / predicted, is at least ``cap`` when stopped. The
program adapts when the ratio is at most ``ADAPTS_MAX``. The re-pin must come after the launcher has handed over to
the program (``numactl`` and ``taskset`` exec at once): a program of a few tens of milliseconds is not measured
faithfully this way (it would start on the kept CPUs alone and look as if it adapts), nor one on a busy node:
``cosched profile --adapts`` says why and stores no verdict (``why_not_probed``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from profiler.errors import ProfilerRunError
from profiler.models import ADAPTS_MAX
from profiler.repin import repin

#: A give-back run is stopped at this many times its prediction.
CAP = 4.0
#: A program shorter than this alone is not probed (its launcher's start would be a large part of half its time).
MIN_SOLO_S = 0.5
#: Nor on a node where other processes used this many CPUs or more during the solo run: a spinning program's times
#: depend on what else runs (under a test run's load the OpenMP program of bench/giveback_cost.py measured 0.8 x, not
#: 100 x), so a busy node would call it adaptive.
MAX_OTHER_LOAD_CPUS = 0.25


def why_not_probed(solo_s: float, other_load_cpus: float | None) -> str | None:
    """Why a program with this solo run is not probed (one line), or None."""
    if solo_s < MIN_SOLO_S:
        return f"its solo run took {solo_s:.2f} s; the probe needs {MIN_SOLO_S} s or more (give it more work)"
    if other_load_cpus is not None and other_load_cpus >= MAX_OTHER_LOAD_CPUS:
        return (f"other processes used {other_load_cpus:.2f} CPUs during its solo run: on a busy node a program whose "
                "threads spin can look as if it adapts; profile --adapts on an idle node")
    return None


@dataclass(frozen=True)
class GiveBackProbe:
    kept_cpus: list[int]
    full_s: float  # the solo run on every CPU
    kept_s: float  # started on the kept CPUs
    measured_s: float  # the give-back run (at least this when stopped)
    stopped: bool

    @property
    def predicted_s(self) -> float:
        return self.full_s / 2 + self.kept_s / 2

    @property
    def ratio(self) -> float:
        return self.measured_s / self.predicted_s

    @property
    def adapts(self) -> bool:
        return not self.stopped and self.ratio <= ADAPTS_MAX


def probe_giveback(argv: Sequence[str], launcher: Callable[[Sequence[int] | None], Sequence[str]], kept_cpus: Sequence[int],
                   full_s: float, *, env: Mapping[str, str] | None = None, cwd: str | os.PathLike[str] | None = None,
                   stdout: int | object = subprocess.DEVNULL, stderr: int | object = subprocess.DEVNULL,
                   timeout_s: float | None = None, cap: float = CAP) -> GiveBackProbe:
    """The two runs above; ``launcher(cpus)``: the launch prefix binding a run to ``cpus`` (None: every CPU).
    ProfilerRunError (one line) when a run fails or a re-pin is refused."""
    kept = sorted(kept_cpus)
    kept_s, late = _run([*launcher(kept), *argv], env, cwd, stdout, stderr, timeout_s, "the kept-CPUs run")
    if late:
        raise ProfilerRunError(f"the kept-CPUs run timed out after {timeout_s} s; nothing stored")
    predicted = full_s / 2 + kept_s / 2
    limit = cap * predicted if timeout_s is None else min(cap * predicted, timeout_s)
    measured, stopped = _run([*launcher(None), *argv], env, cwd, stdout, stderr, limit, "the give-back run",
                             repin_at=(full_s / 2, kept))
    return GiveBackProbe(kept, full_s, kept_s, measured, stopped)


def _run(argv: list[str], env: Mapping[str, str] | None, cwd, stdout, stderr, limit: float | None, which: str,  # noqa: ANN001
         repin_at: tuple[float, list[int]] | None = None) -> tuple[float, bool]:
    """(wall seconds, stopped at ``limit``) of one run in its own session."""
    t0 = time.monotonic()
    try:
        p = subprocess.Popen(argv, env={**os.environ, **(env or {})}, cwd=cwd, stdin=subprocess.DEVNULL, stdout=stdout,
                             stderr=stderr, start_new_session=True)
    except OSError as exc:
        raise ProfilerRunError(f"{which} could not start: {exc.strerror or exc}") from None
    try:
        if repin_at is not None:
            try:
                p.wait(timeout=max(0.0, repin_at[0] - (time.monotonic() - t0)))
            except subprocess.TimeoutExpired:
                repin(p.pid, repin_at[1])
        p.wait(timeout=None if limit is None else max(0.0, limit - (time.monotonic() - t0)))
    except subprocess.TimeoutExpired:
        _kill(p)
        return time.monotonic() - t0, True
    except OSError as exc:
        _kill(p)
        raise ProfilerRunError(f"{which}: {exc}") from None
    if p.returncode != 0:
        raise ProfilerRunError(f"{which} failed: exit status {p.returncode}; nothing stored")
    return time.monotonic() - t0, False


def _kill(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait()


__all__ = ["CAP", "MAX_OTHER_LOAD_CPUS", "MIN_SOLO_S", "GiveBackProbe", "probe_giveback", "why_not_probed"]
