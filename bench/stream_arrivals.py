"""Poisson arrivals at a share of packing's capacity (simulated): mean turnaround and mean bounded slowdown of the
continuous policies against packing (Slurm's node sharing), side by side on the same streams.

Each stream is N jobs drawn (seeded, with repeats) from the node's catalogue. Packing's capacity is measured on the
same jobs as a saturated stream (N / packing's makespan, jobs per second); the jobs then arrive as a Poisson process
at LOAD x that rate (seeded exponential gaps), in the drawn order. Every policy runs the same stream on the node
model (``env.episode.stream.run_stream``); the policies do not see jobs before they arrive.

    .venv/bin/python bench/stream_arrivals.py [--seeds 101,...] [--cmaxes 2,4] [--loads 0.7,0.9] [--jobs 48]
        [--best-found] [--give-back] [--procs N]

``--give-back``: rollout-giveback, every job taken to adapt to fewer CPUs while it runs (``StreamJob.adapts``): what
the policy would gain if every program did (threads that sleep while they wait); an OpenMP program whose threads spin
runs two orders of magnitude slower once its CPUs are taken (``bench/giveback_cost.py``, measured), which the node
model does not foresee. Without the flag on a job, rollout-giveback decides as rollout.

Seeds 1-3 chose rollout's design; the figures count on other seeds. The last lines: per Cmax and load, each policy's
mean turnaround and mean bounded slowdown / packing's, median [min, max] over the seeds.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.stream_baselines import saturated_stream  # noqa: E402
from env.episode.stream import StreamJob, run_stream  # noqa: E402
from env.planners.streams import BestFound  # noqa: E402
from env.planners.streams import DeepRollout, RolloutGiveBack  # noqa: E402
from env.planners.streams import GreedyContinuous, Packing  # noqa: E402
from env.sim.nodes import load_node  # noqa: E402
from training.stream.streams import with_arrivals  # noqa: E402


def arriving_stream(node, n: int, seed: int, cmax: int, load: float) -> list[StreamJob]:  # noqa: ANN001 - NodeSpec
    """Stream ``seed``'s ``n`` jobs arriving as a Poisson process at ``load`` x packing's capacity at ``cmax``."""
    return with_arrivals(node, saturated_stream(node, n, seed), cmax, load, seed)


def one_stream(task: tuple) -> tuple[int, float, int, list[tuple[str, float, float]], str, list[float]]:
    """One stream's (cmax, load, seed, [(policy, turnaround, slowdown)], its line, rollout's seconds per decision)."""
    node_name, n, seed, cmax, load, window, best, give = task
    node = load_node(node_name)
    arriving = arriving_stream(node, n, seed, cmax, load)
    cells, out, took = [], [], []
    rollout = DeepRollout(window)  # as it ships (with arrivals: Rollout's own search)
    decide = rollout.decide

    def timed(view):  # noqa: ANN001, ANN202 - rollout's decide, timed (wall clock, this process)
        t0 = time.perf_counter()
        d = decide(view)
        took.append(time.perf_counter() - t0)
        return d

    rollout.decide = timed  # type: ignore[method-assign]
    for pol in ((Packing(), GreedyContinuous(window), rollout) + ((BestFound(window),) if best else ())
                + ((RolloutGiveBack(window),) if give else ())):
        jobs = [replace(j, adapts=True) for j in arriving] if pol.name == "rollout-giveback" else arriving
        m = run_stream(node, jobs, cmax, pol).metrics()
        ta, bs = m["mean_turnaround_s"], m["mean_bounded_slowdown"]
        out.append((pol.name, ta, bs))
        cells.append(f"{pol.name} turnaround {ta:.0f} s ({ta / out[0][1]:.3f}) slowdown {bs:.2f} ({bs / out[0][2]:.3f})")
    return cmax, load, seed, out, f"Cmax {cmax}, load {load:.0%}, seed {seed}: " + "  ".join(cells), took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--node", default="sim:reference")
    ap.add_argument("--seeds", default="101,102,103,104,105")
    ap.add_argument("--cmaxes", default="2,4")
    ap.add_argument("--loads", default="0.7,0.9")
    ap.add_argument("--jobs", type=int, default=48)
    ap.add_argument("--window", type=int, default=8)
    ap.add_argument("--best-found", action="store_true", help="add best-found (offline: rollout one level deeper)")
    ap.add_argument("--give-back", action="store_true",
                    help="add rollout-giveback with every job taken to adapt (StreamJob.adapts): a what-if, for a "
                    "real program that spins while it waits runs far slower with CPUs taken (bench/giveback_cost.py)")
    ap.add_argument("--procs", type=int, default=1, help="streams run side by side in this many processes")
    args = ap.parse_args()
    print(f"{args.node} (simulated), {args.jobs} jobs arriving as a Poisson process at a share of packing's capacity")
    tasks = [(args.node, args.jobs, int(seed), int(cmax), float(load), args.window, args.best_found, args.give_back)
             for cmax in args.cmaxes.split(",") for load in args.loads.split(",") for seed in args.seeds.split(",")]
    if args.procs > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(args.procs) as ex:
            results = list(ex.map(one_stream, tasks))
    else:
        results = [one_stream(t) for t in tasks]
    ratios: dict[tuple[int, float, str], list[tuple[float, float]]] = {}
    took: dict[tuple[int, float], list[float]] = {}
    for cmax, load, _, out, line, t in results:
        print(line, flush=True)
        took.setdefault((cmax, load), []).extend(t)
        for name, ta, bs in out:
            ratios.setdefault((cmax, load, name), []).append((ta / out[0][1], bs / out[0][2]))
    print("mean turnaround / packing's and mean bounded slowdown / packing's, median [min, max] (simulated):")
    for (cmax, load, name), r in ratios.items():
        if name != "packing":
            ta, bs = [x for x, _ in r], [y for _, y in r]
            print(f"  Cmax {cmax} load {load:.0%} {name:18s} turnaround {statistics.median(ta):.3f} [{min(ta):.3f}, "
                  f"{max(ta):.3f}]  slowdown {statistics.median(bs):.3f} [{min(bs):.3f}, {max(bs):.3f}]")
    for name in dict.fromkeys(n for _, _, n in ratios):
        if name != "packing":
            logs = [math.log(x) for (_, _, n), r in ratios.items() if n == name for x, _ in r]
            print(f"  {name}: geometric mean turnaround / packing's over the {len(logs)} streams "
                  f"{math.exp(sum(logs) / len(logs)):.3f}")
    print("rollout's time per decision, ms, median / p90 / max (measured, one process each"
          + (f", {args.procs} side by side" if args.procs > 1 else "") + "):")
    for (cmax, load), t in took.items():
        t = sorted(x * 1000 for x in t)
        print(f"  Cmax {cmax} load {load:.0%}: {statistics.median(t):.1f} / {t[int(0.9 * (len(t) - 1))]:.1f} / {t[-1]:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
