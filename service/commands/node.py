"""``cosched node``: this node's (or a simulated node's) topology and capabilities; ``--bench`` measures its
memory bandwidth and latency (and, where resctrl exists, what one CAT way / MBA step does to the probe)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.table import Table

from env.node.cpulist import format_cpulist
from env.node.discover import node_id
from env.errors import InputError
from env.measure.nodebench import Figure, NodeBenchReport
from env.sim.nodes import load_node
from env.node.spec import NodeSpec
from service.output import emit


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("node", help="topology and capabilities of this node or a simulated one",
                       description="Print the topology and capabilities of this node (or of a simulated node). "
                       "Set COSCHED_SYSROOT=DIR to read sysfs/procfs from a fake tree instead of /.")
    p.add_argument("--node", default="local", help="'local' (default) or 'sim:NAME'")
    p.add_argument("--json", action="store_true", help="print the node spec (with --bench: the benchmarks) as one JSON document")
    p.add_argument("--bench", action="store_true",
                   help="measure this node's microbenchmarks (per NUMA domain: STREAM triad GB/s and pointer-chase latency, "
                   "local and remote; the probe under one CAT way / MBA step less where resctrl exists) and store them in "
                   "$COSCHED_HOME/node-bench/NODE_ID.json for 'cosched calibrate'")
    p.add_argument("--repeats", type=int, default=3, metavar="N", help="--bench: runs of each benchmark (median and spread; default 3)")
    p.add_argument("--quick", action="store_true", help="--bench: small arrays and few loads (seconds, not minutes; rougher figures)")
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


def _fig(f: Figure) -> str:
    return f"{f.median:.3g} \\[{f.min:.3g}-{f.max:.3g}]"


def render_bench(bench: NodeBenchReport, path: Path) -> None:
    console = Console()
    label = "simulated" if bench.simulated else "measured"
    console.print(f"[bold]node benchmarks[/] {bench.node} id {bench.node_id} ({label}, median \\[min-max] of {bench.repeats} runs)")
    table = Table("CPUs of", "memory of", "kind", "STREAM triad GB/s", "latency ns/load")
    for d in bench.domains:
        table.add_row(str(d.cpu_domain), str(d.memory_domain), d.kind, _fig(d.stream_gbs), _fig(d.latency_ns))
    console.print(table)
    console.print(f"remote memory: {bench.remote}")
    console.print(f"reference probe alone: {_fig(bench.probe_alone_s)} s")
    for c in bench.l3:
        size = f"{c.size_bytes / 2**20:.1f} MiB" if c.size_bytes else "size unknown"
        console.print(f"L3 {c.id}: {size}, {c.ways} way(s), CPUs {format_cpulist(c.cpus)} (discovery)")
    for name, eff in (("L3 CAT", bench.cat), ("MBA", bench.mba)):
        if eff.available and eff.probe_full_s and eff.probe_step_s:
            console.print(f"{name}: probe {_fig(eff.probe_full_s)} s -> {_fig(eff.probe_step_s)} s at {eff.step} ({eff.slowdown_pct:+.1f} %, {label})")
        else:
            console.print(f"{name}: not measured: {eff.reason}")
    console.print(f"node time {bench.node_seconds:.1f} s; stored in {path}")


def run_bench(args: argparse.Namespace) -> int:
    from env.real.probes import bench_node

    if args.node != "local":
        raise InputError(f"--bench measures this node: drop --node {args.node} (a simulated node is benchmarked by 'cosched calibrate --backend sim')")
    if args.repeats < 1:
        raise InputError(f"--repeats must be at least 1, not {args.repeats}")
    err = Console(stderr=True)
    result, path = bench_node(repeats=args.repeats, quick=args.quick, progress=lambda msg: err.print(f"bench: {msg}", highlight=False))
    emit(result, args.json, lambda: render_bench(result, path))
    return 0


def run(args: argparse.Namespace) -> int:
    if args.bench:
        return run_bench(args)
    spec = load_node(args.node)
    emit(spec, args.json, lambda: render(spec))
    return 0
