"""How far above packing any continuous policy could go on a saturated stream (simulated): an upper bound on throughput.

A saturated stream at Cmax c on a node of N CPUs: whatever the decisions, each job j runs on some n_j CPUs for at
least T_j(n_j), its time alone on the best placement of n_j CPUs (compact or spread, first-touch or interleaved: the
node model never lets a co-runner speed a job up), at most c jobs run at once and at most N CPUs are busy. So

    makespan >= max( sum_j T_j(n_j) / c , sum_j n_j T_j(n_j) / N )    for the best choice of the n_j,

and by weak duality makespan >= max over l in [0, 1] of sum_j min_n ( l T_j(n) / c + (1 - l) n T_j(n) / N ). The bound
leaves out interference, the integrality of CPU counts over time and the window (only the first W queued jobs may
start), so it is loose: the real limit is below it. Where even this bound is under a target, no policy reaches it.
Every figure is simulated (the node model), side by side with packing on the same stream.

    .venv/bin/python bench/stream_bound.py [--seeds 101,...,108] [--cmaxes 2,3,4] [--jobs 48]

Prints, per stream, packing's makespan, the bound, and the most any policy could gain over packing (the ratio).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from env.episode.stream import StreamJob, run_stream  # noqa: E402
from env.node.spec import NodeSpec  # noqa: E402
from env.plan.allocate import assign_cpus, plain_allocation  # noqa: E402
from env.planners.streams import Packing  # noqa: E402
from env.sim.nodes import load_node  # noqa: E402
from env.sim.stream import StreamNode  # noqa: E402
from env.sim.world import world_for  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from stream_baselines import saturated_stream  # noqa: E402


def alone_times(node: NodeSpec, job: StreamJob) -> dict[int, float]:
    """T_j(n): the job alone on n CPUs, its best placement and memory policy (node model)."""
    sim = StreamNode(node, world_for(node).params)
    out = {}
    for n in range(1, len(node.cpus) + 1):
        best = float("inf")
        for affinity in ("compact", "distributed"):
            cpus = assign_cpus(node, n, affinity, set())
            for memory in ("first-touch", "interleave"):
                alloc = plain_allocation(node, cpus, memory)
                best = min(best, sim.memo.solve(sim.g, [sim.sim_job(job.params, alloc)])[0])
        out[n] = best
    return out


def makespan_bound(node: NodeSpec, jobs: list[StreamJob], cmax: int, steps: int = 400) -> float:
    """The dual bound above (seconds): no saturated stream of ``jobs`` at Cmax ``cmax`` ends sooner."""
    n_cpus = len(node.cpus)
    times = {j.name: alone_times(node, j) for j in {j.name: j for j in jobs}.values()}
    best = 0.0
    for k in range(steps + 1):
        lam = k / steps
        per = {name: min(lam * t / cmax + (1 - lam) * n * t / n_cpus for n, t in tn.items())
               for name, tn in times.items()}
        best = max(best, sum(per[j.name] for j in jobs))
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--node", default="sim:reference")
    ap.add_argument("--seeds", default="101,102,103,104,105,106,107,108")
    ap.add_argument("--cmaxes", default="2,3,4")
    ap.add_argument("--jobs", type=int, default=48)
    args = ap.parse_args()
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
        cmaxes = [int(c) for c in args.cmaxes.split(",")]
    except ValueError:
        print(f"--seeds {args.seeds!r} / --cmaxes {args.cmaxes!r}: give comma-separated whole numbers, e.g. 1,2,3",
              file=sys.stderr)
        return 2
    node = load_node(args.node)
    print(f"{args.node} (simulated), saturated streams of {args.jobs} jobs: the most any policy gains over packing")
    for cmax in cmaxes:
        ratios = []
        for seed in seeds:
            jobs = saturated_stream(node, args.jobs, seed)
            packed = run_stream(node, jobs, cmax, Packing()).makespan_s
            bound = makespan_bound(node, jobs, cmax)
            ratios.append(packed / bound)
            print(f"  Cmax {cmax}, seed {seed}: packing {packed:.0f} s, bound {bound:.0f} s, "
                  f"at most {packed / bound:.3f} x packing's throughput", flush=True)
        print(f"Cmax {cmax}: at most {statistics.median(ratios):.3f} x packing by median "
              f"[{min(ratios):.3f}, {max(ratios):.3f}] (simulated bound, interference left out)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
