"""A public job trace (Standard Workload Format) on a simulated cluster: EASY backfilling with exclusive nodes, Slurm's
node-sharing packing and cosched, side by side (simulated; the decisions' time measured on one core).

The cluster is ``--nodes`` nodes of the node model (``sim:reference``), each a ``StreamNode``; the trace's jobs are
mapped onto it by ``service.slurm.swf.map_jobs`` (nodes scaled to the cluster, a seeded program per executable
or user, the program's work scaled to the trace's runtime), and every policy runs the same jobs
(``service.slurm.tracesim.simulate``, FCFS with EASY backfilling; ``service.slurm.tracesim_policies``). Each seed
assigns programs afresh; the table gives the median over seeds [min, max]. No trace is downloaded: give its path
(docs/slurm-scale.md says where the one used there comes from).

    .venv/bin/python bench/slurm_trace.py TRACE.swf.gz [--nodes 1000] [--skip 0] [--jobs N] [--seeds 1,2,3]
        [--policies easy,packing,cosched] [--cmax 2] [--loads 1] [--json OUT.json] [--plot OUT.png] [--merge A.json ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from env.errors import InputError  # noqa: E402
from env.sim.nodes import load_node  # noqa: E402
from env.sim.world import world_for  # noqa: E402
from service.slurm.swf import map_jobs, read_swf  # noqa: E402
from service.slurm.tracesim import simulate  # noqa: E402
from service.slurm.tracesim_policies import trace_policy  # noqa: E402

FIELDS = ("makespan_s", "mean_turnaround_s", "mean_wait_s", "mean_bounded_slowdown", "node_utilisation",
          "work_utilisation", "decisions_per_s")


def _numbers(text: str, kind: type, flag: str, example: str) -> list:
    try:
        out = [kind(x) for x in text.split(",") if x.strip()]
    except ValueError:
        out = []
    if not out or any(x <= 0 and flag == "--loads" for x in out):
        raise InputError(f"{flag} {text!r}: give numbers separated by commas, e.g. {example}")
    return out


def _ratio(by: dict, p: str, base: str) -> str:
    """How far below ``base``'s mean turnaround ``p``'s is, draw by draw (median [min, max])."""
    if base not in by or p == base:
        return "—"
    vals = [1 - a["mean_turnaround_s"] / b["mean_turnaround_s"] for a, b in zip(by[p], by[base])]
    return _cell([100 * v for v in vals], "+.1f") + " %"


def _cell(vals: list[float], fmt: str) -> str:
    med = statistics.median(vals)
    return f"{med:{fmt}} [{min(vals):{fmt}}, {max(vals):{fmt}}]" if len(vals) > 1 else f"{med:{fmt}}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", help="an SWF trace (plain or .gz)")
    ap.add_argument("--node", default="sim:reference")
    ap.add_argument("--nodes", type=int, default=1000, help="simulated nodes (the trace's node counts are scaled to them)")
    ap.add_argument("--skip", type=int, default=0, help="usable jobs of the trace skipped first")
    ap.add_argument("--jobs", type=int, default=None, help="jobs simulated (default: the rest of the trace)")
    ap.add_argument("--machine", metavar="NODES:PROCS",
                    help="the trace machine's nodes and processors where its header lacks MaxNodes / MaxProcs")
    ap.add_argument("--seeds", default="1,2,3", help="program-assignment seeds")
    ap.add_argument("--policies", default="easy,packing,cosched")
    ap.add_argument("--cmax", type=int, default=2, help="jobs a node holds at once in the sharing policies")
    ap.add_argument("--loads", default="1", help="arrival compression factors (1: the trace's own times)")
    ap.add_argument("--json", help="write every run's figures here")
    ap.add_argument("--plot", help="draw mean turnaround and bounded slowdown per policy and load here (PNG)")
    ap.add_argument("--merge", nargs="*", default=[], metavar="JSON",
                    help="also count the runs of earlier --json files (the same trace, jobs and Cmax) in the table and picture; "
                         "only the (load, seed, policy) runs they lack are run")
    args = ap.parse_args()
    try:
        node = load_node(args.node)
        trace = read_swf(args.trace, skip=args.skip, limit=args.jobs)
        if args.machine:
            nodes, _, procs = args.machine.partition(":")
            if not (nodes.isdigit() and procs.isdigit() and int(nodes) > 0 and int(procs) >= int(nodes)):
                raise InputError(f"--machine {args.machine!r}: give NODES:PROCS, e.g. 1024:8192")
            trace = dataclasses.replace(trace, max_nodes=int(nodes), max_procs=int(procs))
        seeds = _numbers(args.seeds, int, "--seeds", "1,2,3")
        loads = _numbers(args.loads, float, "--loads", "1,1.3")
        policies = [p.strip() for p in args.policies.split(",") if p.strip()]
        for p in policies:
            trace_policy(p, args.cmax)
    except (InputError, ValueError) as e:
        print(f"slurm_trace: {e}", file=sys.stderr)
        return 2
    programs = world_for(node).all_jobs
    print(f"{Path(args.trace).name}: {len(trace.jobs)} jobs (skipped {args.skip}; {trace.dropped} without runtime or "
          f"processors dropped), {trace.max_nodes} nodes x {trace.max_procs // max(1, trace.max_nodes)} processors "
          f"-> {args.nodes} simulated {args.node} nodes; Cmax {args.cmax} in the sharing policies; seeds {args.seeds}",
          flush=True)
    runs: list[dict] = []
    for f in args.merge:
        doc = json.loads(Path(f).read_text())
        if (doc["jobs"], doc["nodes"], doc["cmax"]) != (len(trace.jobs), args.nodes, args.cmax):
            print(f"slurm_trace: {f} holds another experiment (jobs, nodes or Cmax differ)", file=sys.stderr)
            return 2
        runs += [r for r in doc["runs"] if r["policy"] in policies and r["seed"] in seeds]
    loads = sorted(set(loads) | {r["load"] for r in runs})

    def save() -> None:  # after every run too: a long run stopped part way keeps the runs it finished
        if args.json:  # written aside, then renamed: a run killed while it writes leaves the last whole file
            tmp = Path(f"{args.json}.part")
            tmp.write_text(json.dumps({"trace": args.trace, "skip": args.skip, "jobs": len(trace.jobs),
                                       "nodes": args.nodes, "cmax": args.cmax, "simulated": True, "runs": runs}, indent=1))
            tmp.replace(args.json)

    done = {(r["load"], r["seed"], r["policy"]) for r in runs}
    for load in loads:
        for seed in seeds:
            todo = [p for p in policies if (load, seed, p) not in done]  # merged runs are not run again
            jobs = map_jobs(trace, programs, args.nodes, seed, load=load) if todo else []
            for p in todo:
                t0 = time.perf_counter()
                m = simulate(jobs, trace_policy(p, args.cmax), node, args.nodes).metrics()
                runs.append({"load": load, "seed": seed, "policy": p, **m, "wall_s": time.perf_counter() - t0})
                print(f"  load {load:g} seed {seed} {p:<15} turnaround {m['mean_turnaround_s']:9.0f} s  "
                      f"bsld {m['mean_bounded_slowdown']:7.2f}  util {m['node_utilisation']:.3f}  "
                      f"{m['decisions_per_s']:7.0f} decisions/s" + (f"  {m['give_backs']} given back" if m["give_backs"] else "")
                      + f"  ({runs[-1]['wall_s']:.0f} s)", flush=True)
                save()
    print("\nsimulated; median over seeds [min, max]; decisions/s measured (CPU time of the scheduling passes, one core)")
    for load in loads:
        print(f"\nload x{load:g}")
        print("| policy | makespan (h) | mean turnaround (s) | turnaround below easy's | below packing's | "
              "mean bounded slowdown | node utilisation | work utilisation | decisions/s |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        by = {p: [r for r in runs if r["load"] == load and r["policy"] == p] for p in policies}

        for p, rs in by.items():
            print(f"| {p} | {_cell([r['makespan_s'] / 3600 for r in rs], '.1f')} | "
                  f"{_cell([r['mean_turnaround_s'] for r in rs], '.0f')} | {_ratio(by, p, 'easy')} | "
                  f"{_ratio(by, p, 'packing')} | "
                  f"{_cell([r['mean_bounded_slowdown'] for r in rs], '.2f')} | "
                  f"{_cell([r['node_utilisation'] for r in rs], '.3f')} | {_cell([r['work_utilisation'] for r in rs], '.3f')} | "
                  f"{_cell([r['decisions_per_s'] for r in rs], '.0f')} |")
    save()
    if args.plot:
        _plot(runs, policies, loads, args)
    return 0


def _plot(runs: list[dict], policies: list[str], loads: list[float], args: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    width = 0.8 / len(policies)
    for ax, key, label in ((axes[0], "mean_turnaround_s", "mean turnaround (s)"),
                           (axes[1], "mean_bounded_slowdown", "mean bounded slowdown")):
        for i, p in enumerate(policies):
            meds, lo, hi = [], [], []
            for load in loads:
                vals = [r[key] for r in runs if r["policy"] == p and r["load"] == load]
                med = statistics.median(vals)
                meds.append(med)
                lo.append(med - min(vals))
                hi.append(max(vals) - med)
            xs = [k + (i - (len(policies) - 1) / 2) * width for k in range(len(loads))]
            ax.bar(xs, meds, width, yerr=[lo, hi], capsize=3, label=p)
        ax.set_xticks(range(len(loads)), [f"load x{x:g}" for x in loads])
        ax.set_ylabel(label)
        ax.set_yscale("log" if key == "mean_bounded_slowdown" else "linear")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{Path(args.trace).name} on {args.nodes} simulated {args.node} nodes (Cmax {args.cmax}): "
                 "simulated, median of seeds [min, max]", fontsize=9)
    window = (f" --skip {args.skip}" if args.skip else "") + (f" --jobs {args.jobs}" if args.jobs else "")
    fig.text(0.01, 0.01, f"bench/slurm_trace.py {Path(args.trace).name}{window} --seeds {args.seeds}\n"
                         f"    --policies {args.policies} --cmax {args.cmax} --loads {','.join(f'{x:g}' for x in loads)}",
             fontsize=7, family="monospace")
    fig.tight_layout(rect=(0, 0.07, 1, 0.95))
    fig.savefig(args.plot, dpi=110)
    print(f"picture: {args.plot}")


if __name__ == "__main__":
    sys.exit(main())
