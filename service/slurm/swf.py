"""Job traces in the Standard Workload Format (SWF) and their mapping onto a simulated cluster
(``service.slurm.tracesim`` runs them).

The trace (``read_swf``): one line a job, fields 1 job id, 2 submit (s), 4 runtime (s), 5 allocated processors
(8 requested processors where 5 is missing), 9 requested time (-1: none), 12 user, 14 executable; header lines
``; MaxNodes:`` / ``; MaxProcs:`` give the machine. Jobs without a runtime or a processor count (cancelled before
they ran) are dropped.

From trace to cluster (``map_jobs``), a documented and seeded rule:

* **nodes**: a job's trace nodes are ceil(processors / (MaxProcs / MaxNodes)), scaled to the simulated cluster as
  max(1, round(trace nodes x N / MaxNodes)), at most N; arrival times are kept, so the offered load stays that of the
  trace;
* **program**: one of the node model's programs (the 19 of ``sim:reference``), chosen by a seeded draw keyed by
  the job's executable number, else its user, else its id (a user's or an application's jobs run one program);
* **work**: the program's work scaled so that alone on its nodes (the whole node each) it takes the trace's runtime:
  its node-model noise factor is runtime / the program's solo time; a multi-node job runs its program on every node
  it holds and progresses at the pace of its slowest node (bulk synchronous);
* **estimate**: the trace's requested time where it has one and it is not below the runtime, else the runtime;
  on a shared node, that times the program's slowdown alone on one of Cmax equal slots (what a user asking for a
  slot would request);
* **load** (optional): submit times divided by a factor, the same jobs at a higher offered load.
"""

from __future__ import annotations

import gzip
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from env.errors import InputError


@dataclass(frozen=True)
class SwfJob:
    id: int
    submit_s: float
    run_s: float
    procs: int
    req_s: float  # -1: none
    user: int
    app: int


@dataclass(frozen=True)
class Trace:
    path: str
    max_nodes: int
    max_procs: int
    jobs: list[SwfJob]
    dropped: int  # lines without a runtime or a processor count


def read_swf(path: str | Path, *, skip: int = 0, limit: int | None = None) -> Trace:
    """The jobs of an SWF file (plain or .gz) in file order, ``skip`` usable jobs skipped and at most ``limit`` kept."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such trace file (an SWF file, plain or .gz; see docs/slurm-scale.md for where to get one)")
    opener = gzip.open if p.suffix == ".gz" else open
    header: dict[str, int] = {}
    jobs: list[SwfJob] = []
    dropped = seen = 0
    try:
        with opener(p, "rt", encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                s = line.strip()
                if not s:
                    continue
                if s.startswith(";"):
                    key, _, val = s[1:].partition(":")
                    if key.strip() in ("MaxNodes", "MaxProcs") and val.strip().isdigit():
                        header[key.strip()] = int(val.strip())
                    continue
                v = s.split()
                if len(v) < 18:
                    raise InputError(f"{p}:{n}: {len(v)} fields, an SWF job line has 18")
                run, procs = float(v[3]), int(v[4]) if int(v[4]) > 0 else int(v[7])
                if run <= 0 or procs <= 0:
                    dropped += 1
                    continue
                seen += 1
                if seen <= skip:
                    continue
                jobs.append(SwfJob(int(v[0]), float(v[1]), run, procs, float(v[8]), int(v[11]), int(v[13])))
                if limit is not None and len(jobs) >= limit:
                    break
    except (OSError, ValueError, EOFError) as e:
        raise InputError(f"{p}: not a readable SWF trace ({e})") from None
    if not jobs:
        raise InputError(f"{p}: no job with a runtime and a processor count (after skipping {skip})")
    procs = max(j.procs for j in jobs)
    max_procs = header.get("MaxProcs", procs)
    max_nodes = header.get("MaxNodes", max_procs)
    return Trace(str(p), max_nodes, max_procs, jobs, dropped)


@dataclass(frozen=True)
class TraceJob:
    id: str
    submit_s: float
    nodes: int
    run_s: float  # alone on its nodes, each whole
    est_s: float  # what the scheduler believes (requested time or runtime)
    program: str
    adapts: bool = False  # its program loses nothing when CPUs are taken from it while it runs (SWF never says so)


def map_jobs(trace: Trace, programs: Sequence[str], nodes: int, seed: int, load: float = 1.0) -> list[TraceJob]:
    """The trace's jobs on a cluster of ``nodes`` nodes (the rule in the module's docstring); time starts at 0.
    ``load`` > 1 compresses the arrivals (submit times divided by it): the same jobs offered at a higher load."""
    if nodes < 1:
        raise InputError("the cluster needs at least one node")
    if not load > 0:
        raise InputError("--load must be above 0 (1: the trace's own arrival times)")
    ppn = max(1, trace.max_procs // max(1, trace.max_nodes))
    progs = sorted(programs)
    t0 = min(j.submit_s for j in trace.jobs)
    out = []
    for j in trace.jobs:
        tn = -(-j.procs // ppn)
        k = min(nodes, max(1, round(tn * nodes / trace.max_nodes)))
        key = ("app", j.app) if j.app >= 0 else ("user", j.user) if j.user >= 0 else ("job", j.id)
        prog = progs[random.Random(f"{seed}:{key[0]}:{key[1]}").randrange(len(progs))]
        est = max(j.req_s, j.run_s)
        out.append(TraceJob(str(j.id), (j.submit_s - t0) / load, k, j.run_s, est, prog))
    return out


__all__ = ["SwfJob", "Trace", "TraceJob", "map_jobs", "read_swf"]
