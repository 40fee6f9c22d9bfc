"""Enforcement and the launch argv: the one place that decides what command a job is started with.

    numactl --physcpubind=CPUS [memory option] --      (when numactl is here)
    cosched-resctrl-exec GROUP -- | rdtset -I -t ... -c CPUS   (only when cache/bandwidth are enforced)
    env LD_PRELOAD=.../libpinrt.so                      (only with the pinning runtime)
    the job's own argv

What the node cannot enforce is left out of the argv and reported, with its reason, in ``Enforcement``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from env.plan.allocate import Allocation, numactl_memory_options
from env.node.cpulist import format_cpulist
from env.plan.models import Enforcement
from env.node.spec import NodeSpec
from env.node.resctrl import exec_helper

RdtTool = Literal["resctrl", "rdtset"]

PINRT_LIB = Path(__file__).resolve().parents[2] / "native" / "build" / "libpinrt.so"


def enforcement(node: NodeSpec, tool: RdtTool = "resctrl") -> Enforcement:
    caps = node.capabilities
    reasons: dict[str, str] = {}
    numactl = caps.numa_binding.available
    if not numactl:
        reasons["cpus"] = reasons["memory"] = caps.numa_binding.reason or "numactl is not available"
    l3 = caps.l3_cat.available
    if not l3:
        reasons["l3"] = caps.l3_cat.reason or "no L3 CAT"
    mem_bw = caps.mba.available
    if not mem_bw:
        reasons["mem_bw"] = caps.mba.reason or "no MBA"
    elif node.mba is not None and node.mba.units == "amd_eighth_gbs" and any(d.memory_bandwidth_gbs is None for d in node.numa):
        mem_bw = False
        reasons["mem_bw"] = "AMD MBA takes absolute 1/8 GB/s units: the node spec must give memory_bandwidth_gbs per NUMA domain"
    method: RdtTool | None = None
    if l3 or mem_bw:
        if node.simulated:
            method = None  # the simulator models partitioning; nothing is launched
        elif tool == "rdtset" and not caps.rdtset.available:
            l3 = mem_bw = False
            reasons["l3"] = reasons["mem_bw"] = f"rdtset was asked for but is not usable: {caps.rdtset.reason}"
        else:
            method = tool
    return Enforcement(cpus=numactl, memory=numactl, l3=l3, mem_bw=mem_bw, method=method, reasons=reasons)


def launch_argv(
    node: NodeSpec,
    command: list[str],
    alloc: Allocation,
    enf: Enforcement,
    *,
    resctrl_group: str | None = None,
    mb_hw: dict[int, int] | None = None,
    pin_runtime: Path | None = None,
) -> list[str]:
    argv: list[str] = []
    cpus = format_cpulist(alloc.cpus)
    if enf.cpus:
        argv += ["numactl", f"--physcpubind={cpus}", *numactl_memory_options(alloc.memory, alloc.numa_nodes), "--"]
    if enf.method == "resctrl" and (enf.l3 or enf.mem_bw):
        if resctrl_group is None:
            raise ValueError("a resctrl group path is needed when resctrl enforces the allocation")
        argv += [exec_helper(), resctrl_group, "--"]
    elif enf.method == "rdtset" and (enf.l3 or enf.mem_bw):
        argv += ["rdtset", "-I"]
        for l3_id, (_, mask) in sorted(alloc.l3.items()):
            # One class per L3 domain, bound to the job's CPUs in that domain (rdtset associates by CPU).
            dom_cpus = [c for c in alloc.cpus if node.l3_of(c) == l3_id]
            parts = []
            if enf.l3:
                parts.append(f"l3={mask:#x}")
            if enf.mem_bw and mb_hw:
                value = mb_hw.get(node.numa_of(dom_cpus[0]))
                if value is not None:
                    parts.append(f"mba={value}")
            argv += ["-t", ";".join(parts + [f"cpu={format_cpulist(dom_cpus)}"])]
        argv += ["-c", cpus]
    if pin_runtime is not None:
        argv += ["env", f"LD_PRELOAD={pin_runtime}"]
    return argv + list(command)


def solo_prefix(node: NodeSpec, cpus: list[int] | tuple[int, ...] | None = None) -> list[str]:
    """The launch prefix of a program run alone outside a plan (a profile's solo and one-core runs): bound to
    ``cpus`` (default: every CPU of the node), the kernel's memory policy, no cache/bandwidth partitioning.
    Empty where numactl is not here (the run is then unbound, as ``enforcement`` reports)."""
    cpus = tuple(sorted(cpus if cpus is not None else node.cpus))
    alloc = Allocation(cpus=cpus, numa_nodes=tuple(sorted({node.numa_of(c) for c in cpus})), memory="first-touch", l3={}, mem_bw_percent={})
    enf = enforcement(node).model_copy(update={"l3": False, "mem_bw": False, "method": None})
    return launch_argv(node, [], alloc, enf)
