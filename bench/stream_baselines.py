"""The stream policies side by side on saturated streams (simulated): packing (Slurm's node sharing) against time
sharing, greedy-continuous, groups (the window planner's plans with barriers, windows of W from the queue head) and
rollout (continuous decisions searched by rollouts on the node model; as it ships, ``DeepRollout``: on these saturated
streams each start valued by rollout's own play; ``--shallow`` adds the shallower search, each start valued by
``Fill``'s play-out, as ``rollout-shallow``).

Each stream is N jobs drawn (seeded, with repeats) from the node's catalogue, all submitted at 0; every policy runs
the same stream on the node model (``env.episode.stream.run_stream``), and the table gives each one's throughput vs
time sharing and its ratio to packing's, per stream and Cmax. ``groups`` plans its windows as ``cosched schedule``
does (the node's default policy: agent-search with the shipped model on sim:reference).

    .venv/bin/python bench/stream_baselines.py [--seeds 1,2,3] [--cmaxes 2,3,4] [--jobs 48] [--window 8]

Seeds 1-3 chose rollout's design (candidates, rankers, objective); its figures count on other seeds (101-110).
The last lines: per Cmax, each policy's throughput / packing's as median [min, max] over the seeds.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from env.episode.stream import StreamJob, run_stream  # noqa: E402
import statistics  # noqa: E402

from env.planners.continuous import Rollout  # noqa: E402
from env.planners.streams import DeepRollout  # noqa: E402
from env.planners.streams import BestFound  # noqa: E402
from env.planners.streams import GreedyContinuous, Groups, Packing, TimeShare  # noqa: E402
from env.sim.nodes import load_node  # noqa: E402
from training.stream.streams import saturated  # noqa: E402


def saturated_stream(node, n: int, seed: int) -> list[StreamJob]:  # noqa: ANN001 - NodeSpec
    """Stream ``seed``: ``n`` jobs drawn from the node's catalogue, all submitted at 0 (the training streams' own
    draw, ``training.stream.streams.saturated``)."""
    return saturated(node, n, seed)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--node", default="sim:reference")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--cmaxes", default="2,3,4")
    ap.add_argument("--jobs", type=int, default=48)
    ap.add_argument("--window", type=int, default=8, help="W: the jobs groups' windows and greedy-continuous choose among")
    ap.add_argument("--shallow", action="store_true", help="add rollout's shallower search (Fill's play-outs) as rollout-shallow")
    ap.add_argument("--no-groups", action="store_true", help="leave out groups (its window plans are the slowest part)")
    ap.add_argument("--best-found", action="store_true", help="add best-found (rollout one level deeper at every start, with no guard; 10-21 s a 48-job stream: bench/stream_best_found.py runs streams in parallel)")
    args = ap.parse_args()
    from service.planning import plan_window

    node = load_node(args.node)
    print(f"{args.node} (simulated), saturated streams of {args.jobs} jobs: throughput vs time sharing (x packing)")
    ratios: dict[tuple[int, str], list[float]] = {}
    for cmax in (int(c) for c in args.cmaxes.split(",")):
        for seed in (int(s) for s in args.seeds.split(",")):
            jobs = saturated_stream(node, args.jobs, seed)
            cells = []
            packing = None
            pols = [Packing(), TimeShare(), GreedyContinuous(args.window), DeepRollout(args.window)]
            if args.shallow:
                pols.append(Rollout(args.window))
                pols[-1].name = "rollout-shallow"
            if not args.no_groups:
                pols.append(Groups(lambda w: plan_window(w, node), args.window))
            if args.best_found:
                pols.append(BestFound())
            for pol in pols:
                t0 = time.perf_counter()
                thr = run_stream(node, jobs, cmax, pol).metrics()["throughput_vs_timeshare"]
                ms = (time.perf_counter() - t0) * 1000
                packing = packing or thr
                ratios.setdefault((cmax, pol.name), []).append(thr / packing)
                cells.append(f"{pol.name} {thr:.3f} ({thr / packing:.3f}, {ms:.0f} ms)")
            print(f"Cmax {cmax}, seed {seed}: " + "  ".join(cells), flush=True)
    print("throughput / packing's, median [min, max] over the seeds (simulated):")
    for (cmax, name), r in ratios.items():
        if name != "packing":
            print(f"  Cmax {cmax} {name:18s} {statistics.median(r):.3f} [{min(r):.3f}, {max(r):.3f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
