"""The kernel's resctrl file system, used directly: one control group per co-running job.

The batch runner creates a job's group before its group starts and removes it after (also on
failure); the job's launch argv joins it through ``cosched-resctrl-exec`` (``env.real.resctrl_exec``), which
writes its own pid into ``tasks`` and then execs the rest, so every thread the job creates inherits it.
Tests point ``resctrl_path`` at a fake directory: this machine has no resctrl.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from env.errors import RunError
from env.node.spec import NodeSpec

GROUP_PREFIX = "cosched-"


def exec_helper() -> str:
    """The absolute path of the join-and-exec helper installed beside this Python."""
    return str(Path(sys.executable).parent / "cosched-resctrl-exec")


def group_name(group_index: int, job_id: str) -> str:
    # Job ids are [A-Za-z0-9._:-]; ':' is legal in a directory name, so the id is used as it is.
    return f"{GROUP_PREFIX}g{group_index}-{job_id}"


def group_path(node: NodeSpec, group_index: int, job_id: str) -> str:
    return os.path.join(node.resctrl_path or "/sys/fs/resctrl", group_name(group_index, job_id))


def schemata(node: NodeSpec, l3: dict[int, int] | None, mb_hw: dict[int, int] | None) -> str:
    """Schemata text for a group. ``l3``: L3 id -> mask; ``mb_hw``: NUMA id -> hardware MBA value.
    MB domains are numbered like the L3 domains (resctrl's MB ids are cache ids), so a memory domain's
    cap is written for every L3 domain whose CPUs lie in it."""
    lines = []
    if l3:
        lines.append("L3:" + ";".join(f"{d}={m:x}" for d, m in sorted(l3.items())))
    if mb_hw:
        by_cache: dict[int, int] = {}
        for numa_id, value in mb_hw.items():
            numa_cpus = set(next(d.cpus for d in node.numa if d.id == numa_id))
            for cache in node.l3:
                if numa_cpus & set(cache.cpus):
                    by_cache[cache.id] = value
        lines.append("MB:" + ";".join(f"{d}={v}" for d, v in sorted(by_cache.items())))
    return "\n".join(lines) + "\n"


def create_group(path: str, text: str) -> None:
    """mkdir the group and write its schemata; on a refused schemata the group is removed again."""
    p = Path(path)
    try:
        p.mkdir()
    except FileExistsError:
        raise RunError(f"resctrl group {path} already exists (another run, or a crashed one: rmdir it)") from None
    except OSError as exc:
        raise RunError(f"cannot create resctrl group {path}: {exc.strerror}") from exc
    try:
        for line in text.splitlines():
            # One line a write: the kernel applies and validates schemata line by line.
            with open(p / "schemata", "w") as f:
                f.write(line + "\n")
    except OSError as exc:
        remove_group(path)
        status = (p.parent / "info" / "last_cmd_status")
        detail = status.read_text().strip() if status.exists() else exc.strerror
        raise RunError(f"resctrl refused schemata for {path}: {detail}") from exc


def remove_group(path: str) -> None:
    """Remove a group; its tasks fall back to the default group. Idempotent."""
    p = Path(path)
    if not p.exists():
        return
    try:
        p.rmdir()
    except OSError:
        # A real resctrl group is removed by rmdir alone; a fake one (tests) is a plain directory.
        shutil.rmtree(p, ignore_errors=True)
