"""``cosched node``: this node's (or a simulated node's) topology and capabilities."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from env.cpulist import format_cpulist
from env.discover import node_id
from env.nodes import load_node
from env.nodespec import NodeSpec
from service.output import emit


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("node", help="topology and capabilities of this node or a simulated one",
                       description="Print the topology and capabilities of this node (or of a simulated node). "
                       "Set COSCHED_SYSROOT=DIR to read sysfs/procfs from a fake tree instead of /.")
    p.add_argument("--node", default="local", help="'local' (default) or 'sim:NAME'")
    p.add_argument("--json", action="store_true", help="print the node spec as one JSON document")
    p.set_defaults(handler=run)


def render(spec: NodeSpec) -> None:
    console = Console()
    console.print(f"[bold]node[/] {spec.name}  ({spec.vendor}, {spec.model_name or 'unknown model'})  id {node_id(spec)}")
    console.print(f"{len(spec.cpus)} CPUs ({format_cpulist(spec.cpus)}), {len(spec.numa)} NUMA domain(s), {len(spec.l3)} L3 domain(s)")
    topo = Table("NUMA", "CPUs", "memory", "bandwidth")
    for d in spec.numa:
        mem = f"{d.memory_bytes / 2**30:.1f} GiB" if d.memory_bytes else "?"
        topo.add_row(str(d.id), format_cpulist(d.cpus), mem, f"{d.memory_bandwidth_gbs} GB/s" if d.memory_bandwidth_gbs else "?")
    console.print(topo)
    l3 = Table("L3", "CPUs", "size", "ways")
    for c in spec.l3:
        l3.add_row(str(c.id), format_cpulist(c.cpus), f"{c.size_bytes / 2**20:.1f} MiB" if c.size_bytes else "?", str(c.ways))
    console.print(l3)
    caps = Table("capability", "available", "why / details")
    for name, cap in spec.capabilities:
        caps.add_row(name, "[green]yes[/]" if cap.available else "[red]no[/]", cap.reason or "")
    console.print(caps)
    if spec.cat:
        console.print(f"CAT: cbm_mask {spec.cat.cbm_mask}, min_cbm_bits {spec.cat.min_cbm_bits}, {spec.cat.num_closids} classes")
    if spec.mba:
        console.print(f"MBA: units {spec.mba.units}, step {spec.mba.bandwidth_gran}, min {spec.mba.min_bandwidth}, max {spec.mba.max_bandwidth}")


def run(args: argparse.Namespace) -> int:
    spec = load_node(args.node)
    emit(spec, args.json, lambda: render(spec))
    return 0
