"""The placement file the SPANK plugin applies on the node: DIR/<SLURM_JOB_ID>.placement, ``key=value`` lines.

It is written from the plan's job (``env.plan.models.PlanJob``), whose CPUs, memory policy, cache masks and
bandwidth are the allocation the plan's launch argv was made from (env/plan/builder.py): nothing is computed twice.
Written atomically (temp file + rename in the same directory), so the plugin never reads half a file.
"""

from __future__ import annotations

import os
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
