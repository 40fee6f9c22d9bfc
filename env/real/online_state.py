"""What an online run keeps and reads besides its event loop (``env.real.online``): the jobs as the runner and the
policies see them, each job's result and the run's report, the journal's allocation records and how a resumed run
reads the journal back, the node model decisions are made on, and the run's stream document."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from env.episode.stream import Decision
from env.errors import InputError
from env.node.spec import NodeSpec
from env.plan.allocate import Allocation

MARK = "COSCHED_ONLINE_JOB"
STREAM_FILE = "stream.json"
@dataclass(frozen=True)
class OnlineJob:
    id: str
    profile: str
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)
    submit_s: float = 0.0
    adapts: bool = False  # may be asked to give CPUs back (WindowJob.adapts)


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
    gave_back: list[dict[str, Any]] = field(default_factory=list)  # {"at_s", "cpus" kept from then on}
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
    out: dict[str, Any] = {"start": None, "decisions": 0, "launch": {}, "job_start": {}, "job_cpus": {}, "job_end": {},
                           "change": {}}
    from env.real.journal import journal_records

    for rec in journal_records(path, "an online run directory of 'cosched run'"):
        ev = rec.get("event")
        if ev == "online_start" and out["start"] is None:
            out["start"] = rec
        elif ev == "decision":
            out["decisions"] = max(out["decisions"], rec["n"])
        elif ev in ("launch", "job_start", "job_cpus", "job_end"):
            out[ev][rec["job"]] = rec
        elif ev == "change":
            out["change"].setdefault(rec["job"], []).append(rec)
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


__all__ = ["MARK", "STREAM_FILE", "Decide", "Held", "HeldCpus", "JobResult", "OnlineJob", "OnlineResult", "StreamModel",
           "alloc_of", "alloc_record", "is_online_run", "read_online_journal", "read_stream", "stream_model", "write_stream"]
