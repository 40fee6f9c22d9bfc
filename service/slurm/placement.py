"""The placement file the SPANK plugin applies on the node: DIR/<SLURM_JOB_ID>.placement, ``key=value`` lines;
and the plugin's once-only records beside it, which the controller reads.

It is written from the plan's job (``env.plan.models.PlanJob``), whose CPUs, memory policy, cache masks and
bandwidth are the allocation the plan's launch argv was made from (env/plan/builder.py): nothing is computed twice.
Written atomically (temp file + rename in the same directory), so the plugin never reads half a file.

The records (native/src/spank/marker.c): DIR/started/JOB.STEP.NODEID, made with O_CREAT|O_EXCL before the
step's tasks run; DIR/ended/ the same name at the step's end; DIR/refused/JOB.STEP.NODEID.NANOSECONDS for each
second start the plugin refused. STEP is ``batch`` (an sbatch job's script) or a number (``srun`` steps; a job
started by srun alone begins with step 0). Each holds one line of ``key=value`` words: node, time, pid,
restarts, and exit or signal in an end record.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from env.node.cpulist import format_cpulist
from env.plan.models import PlanJob
from env.node.spec import NodeSpec
from env.node.resctrl import schemata

VERSION = 1

# The plan's memory policy -> the plugin's (the same meanings as env.plan.allocate.numactl_memory_options:
# local-alloc is strict binding to the job's domains, first-touch the kernel default).
MEMPOLICY = {"first-touch": "default", "interleave": "interleave", "local-alloc": "bind"}


def placement_lines(job: PlanJob, node: NodeSpec | None, *, pinrt: bool, resctrl_group: str | None = None,
                    pinrt_env: dict[str, str] | None = None) -> list[str]:
    """The file's lines for one planned job. ``node`` gives the schemata (resctrl) text when cache or bandwidth
    are enforced on it; None leaves them out."""
    lines = [f"version={VERSION}", f"cpus={format_cpulist(job.cpus)}", f"mempolicy={MEMPOLICY[job.memory]}",
             f"mems={format_cpulist(job.numa_nodes)}"]
    if node is not None and resctrl_group is not None:
        l3 = {int(d): int(a.mask, 16) for d, a in job.l3.items()}
        mb = {int(d): v for d, v in (job.mem_bw_hw or job.mem_bw_percent).items()}
        text = schemata(node, l3, mb)
        lines.append(f"resctrl_group={resctrl_group}")
        for line in text.splitlines():
            if line.startswith("L3:"):
                lines.append(f"l3_schemata={line}")
            elif line.startswith("MB:"):
                lines.append(f"mb_schemata={line}")
    lines.append(f"pinrt={1 if pinrt else 0}")
    for k, v in sorted((pinrt_env or {}).items()):
        lines.append(f"{k}={v}")
    return lines


def decided_lines(alloc: object, node: NodeSpec | None, *, pinrt: bool, resctrl_group: str | None = None,
                  pinrt_env: dict[str, str] | None = None) -> list[str]:
    """The file's lines for a job a continuous decision starts (``service.decide.DecideAllocation``: cpus, memory,
    numa_nodes, l3, mem_bw_percent), through the same code as a planned job's."""
    from types import SimpleNamespace

    a = alloc
    job = SimpleNamespace(cpus=list(a.cpus), memory=a.memory, numa_nodes=list(a.numa_nodes or []),  # type: ignore[attr-defined]
                          l3=dict(a.l3 or {}), mem_bw_hw=None, mem_bw_percent=dict(a.mem_bw_percent or {}))  # type: ignore[attr-defined]
    return placement_lines(job, node, pinrt=pinrt, resctrl_group=resctrl_group, pinrt_env=pinrt_env)  # type: ignore[arg-type]


def whole_node_lines(cpus: list[int], *, pinrt: bool) -> list[str]:
    """A job that runs alone (no profile, or a plan that did not fit Slurm's node): every CPU, default memory."""
    return [f"version={VERSION}", f"cpus={format_cpulist(cpus)}", "mempolicy=default", "pinrt=" + ("1" if pinrt else "0")]


def path_for(directory: Path, slurm_job_id: int) -> Path:
    return directory / f"{slurm_job_id}.placement"


def write(directory: Path, slurm_job_id: int, lines: list[str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    final = path_for(directory, slurm_job_id)
    tmp = directory / f".{slurm_job_id}.placement.tmp"
    # No fsync: the rename makes the file whole for the plugin; after a crash of this host the journal (group
    # dispatched, not released) has the file written again before any release.
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, final)
    return final


def read(path: Path) -> dict[str, str]:
    """key -> value of a placement file (the tests and ``cosched slurm status`` read them back)."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def remove(directory: Path, slurm_job_id: int) -> None:
    path_for(directory, slurm_job_id).unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------------- the plugin's records

# The steps that start a job: an sbatch job's script, or the first step of a job srun started alone.
FIRST_STEPS = ("batch.0", "0.0")


@dataclass(frozen=True)
class Record:
    """One of the plugin's records: which step, on which node, when (Unix time), and for an end its status."""

    name: str  # JOB.STEP.NODEID
    node: str
    time: float
    fields: dict[str, str]

    @property
    def job_id(self) -> int:
        return int(self.name.split(".", 1)[0])

    def describe(self) -> str:
        when = _when(self.time)
        status = (f", exit {self.fields['exit']}" if "exit" in self.fields
                  else f", signal {self.fields['signal']}" if "signal" in self.fields else "")
        return f"on {self.node} at {when}{status}"


def _when(t: float) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(t).isoformat(timespec="seconds") if t > 0 else "an unknown time"


def _read_record(path: Path) -> Record | None:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError:
        text = ""
    fields = dict(w.split("=", 1) for w in text.split() if "=" in w)
    try:
        t = float(fields.get("time", "0"))
    except ValueError:
        t = 0.0
    return Record(name=path.name, node=fields.get("node", "?"), time=t, fields=fields)


def started(directory: Path, slurm_job_id: int) -> Record | None:
    """The record of the job's start (its script, or its first step), or None when it never started here."""
    for step in FIRST_STEPS:
        rec = _read_record(directory / "started" / f"{slurm_job_id}.{step}")
        if rec is not None:
            return rec
    return None


def ended(directory: Path, slurm_job_id: int) -> Record | None:
    for step in FIRST_STEPS:
        rec = _read_record(directory / "ended" / f"{slurm_job_id}.{step}")
        if rec is not None:
            return rec
    return None


def refusals(directory: Path) -> list[Record]:
    """Every second start the plugin refused (DIR/refused/), oldest name first."""
    try:
        names = sorted(os.listdir(directory / "refused"))
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        rec = _read_record(directory / "refused" / name)
        if rec is not None:
            out.append(rec)
    return out


def retire(directory: Path, slurm_job_id: int, tag: str) -> list[str]:
    """Moves the records of a job id that Slurm has given to a new job (it lost the first one in a restart) aside,
    as NAME~TAG, so that the new job's steps start for the first time; returns the names moved."""
    moved = []
    for kind in ("started", "ended"):
        d = directory / kind
        if not d.is_dir():
            continue
        for src in sorted(d.glob(f"{slurm_job_id}.*")):
            if "~" not in src.name:
                os.replace(src, d / f"{src.name}~{tag}")
                moved.append(f"{kind}/{src.name}")
        if moved:
            fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)  # durable before the new job is released
            finally:
                os.close(fd)
    return moved


def retired_starts(directory: Path, slurm_job_id: int | None = None) -> list[tuple[str, str, Record]]:
    """Start records moved aside by ``retire`` (all, or one job id's): (NAME, TAG, record) each. Each is an earlier
    job of that id, which ran on the record's node."""
    d = directory / "started"
    try:
        names = os.listdir(d)
    except FileNotFoundError:
        return []
    prefix = f"{slurm_job_id}." if slurm_job_id is not None else ""
    out = []
    for full in sorted(names):
        if "~" not in full or not full.startswith(prefix):
            continue
        name, tag = full.split("~", 1)
        rec = _read_record(d / full)
        if rec is not None:
            out.append((name, tag, replace(rec, name=name)))
    return out


def late_end(directory: Path, name: str, tag: str, start: Record) -> bool:
    """Whether the step of the moved-aside start record ``start`` (NAME~TAG) has an end record. An earlier job
    that ran on after its id went to a new job writes its end under the plain NAME (it knows no tag): an end made by
    the same process on the same node is that job's, and moves aside too, so that the new job's end is its own."""
    d = directory / "ended"
    if (d / f"{name}~{tag}").exists():
        return True
    rec = _read_record(d / name)
    if rec is None or rec.node != start.node or rec.fields.get("pid") != start.fields.get("pid"):
        return False
    os.replace(d / name, d / f"{name}~{tag}")
    return True
