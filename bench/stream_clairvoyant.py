"""How much knowing the future is worth with arrivals (simulated): a clairvoyant reference for the arrivals target.

`best-found` is the saturated streams' offline reference: rollout with a far larger budget. With arrivals the
policies do not see a job before it arrives, and guessing the arrivals (sampled futures) was tried and lost
(docs/continuous.md). This bench asks the other question: what would rollout reach if it knew every arrival, its
time and its program? ``Clairvoyant`` is rollout's search (the same base, ``Fill``, and the same candidates,
``Proposals``, plus waiting for the next event) whose play-outs run every job still to come from its arrival time,
and whose objective is the true one, the sum of all the jobs' ends (their turnaround: the arrivals are constants).
It is not a policy anyone could run; it says how far the online policies are from what the node model allows when
the future is known, i.e. how much of the target a better predictor of arrivals could buy.

    .venv/bin/python bench/stream_clairvoyant.py [--seeds 301,...] [--cmaxes 2,3,4] [--loads 0.7,0.9]
        [--window 8] [--candidates 8]

The streams are ``bench/stream_arrivals.py``'s (same seeds, same jobs, same arrival times). Last lines: per Cmax
and load, rollout's and the clairvoyant's mean turnaround and mean bounded slowdown / packing's, median [min, max].
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.stream_arrivals import arriving_stream  # noqa: E402
from env.episode.stream import Decision, StreamJob, StreamView, run_stream  # noqa: E402
from env.planners.continuous import Rollout  # noqa: E402
from env.planners.streams import Packing  # noqa: E402
from env.sim.nodes import load_node  # noqa: E402
from env.sim.stream import StreamNode  # noqa: E402

_EPS = 1e-9


class Clairvoyant(Rollout):
    """Rollout that knows every arrival (time and program): an offline reference, never a policy to serve. Rollout's
    search (``Rollout.search``: its candidates, and waiting also when only arrivals are to come), each candidate valued
    by the better of ``Fill``'s and packing's play of every job still to come."""

    name = "clairvoyant"

    def __init__(self, window: int = 8, candidates: int = 8, two_bases: bool = True) -> None:
        super().__init__(window, candidates, guard=False, margin=0.0, deep=False)
        self.two_bases = two_bases

    def reset(self, node, jobs: Sequence[StreamJob], max_concurrency: int) -> None:  # noqa: ANN001 - NodeSpec
        super().reset(node, jobs, max_concurrency)
        self.jobs = sorted(jobs, key=lambda j: j.submit_s)
        self.bases = [self.base] + ([self.packing] if self.two_bases else [])

    def decide(self, view: StreamView) -> Decision:
        self.future = [j for j in self.jobs if j.submit_s > view.now + _EPS]
        return self.search(view)

    def _options(self, sim: StreamNode, queue: list[StreamJob], places: int, base) -> list:  # noqa: ANN001 - Start
        options = super()._options(sim, queue, places, base)
        if not sim.running and self.future:
            options.append(None)  # nothing more now: the next arrival comes first
        return options

    def _value(self, sim: StreamNode, queue: list[StreamJob], start) -> float:  # noqa: ANN001 - Start | None
        return min(self._play(sim, queue, self.future, start, b) for b in self.bases)

    def _play(self, sim: StreamNode, queue: list[StreamJob], future: list[StreamJob], start, base) -> float:  # noqa: ANN001
        """The sum of the ends of every job not yet ended, ``start`` taken now (None: the next event first), the
        rest decided by ``base`` with each job to come joining the queue at its arrival."""
        sim, queue, future = sim.fork(), list(queue), list(future)
        done_before = set(sim.ended)
        if start is None:
            sim.advance(future[0].submit_s if future else math.inf)
        else:
            j, alloc = start
            sim.start(j.id, j.name, j.params, alloc)
            queue.remove(j)
        while True:
            while future and future[0].submit_s <= sim.now + _EPS:
                queue.append(future.pop(0))
            places = self.cmax - len(sim.running)
            while (s := base.next_start(sim, queue, places)) is not None:
                j, alloc = s
                sim.start(j.id, j.name, j.params, alloc)
                queue.remove(j)
                places -= 1
            if not sim.running and not future:
                break
            sim.advance(future[0].submit_s if future else math.inf)
        return sum(t for k, t in sim.ended.items() if k not in done_before)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--node", default="sim:reference")
    ap.add_argument("--seeds", default="301,302,303,304,305,306,307,308,309,310")
    ap.add_argument("--cmaxes", default="2,3,4")
    ap.add_argument("--loads", default="0.7,0.9")
    ap.add_argument("--jobs", type=int, default=48)
    ap.add_argument("--window", type=int, default=8)
    ap.add_argument("--candidates", type=int, default=8)
    ap.add_argument("--json", default=None, metavar="FILE", help="every stream's ratios and the medians, as JSON")
    args = ap.parse_args()
    node = load_node(args.node)
    print(f"{args.node} (simulated), {args.jobs} jobs arriving as a Poisson process at a share of packing's capacity; "
          f"clairvoyant: W {args.window}, {args.candidates} candidates, every arrival known")
    ratios: dict[tuple[int, float, str], list[tuple[float, float]]] = {}
    for cmax in (int(c) for c in args.cmaxes.split(",")):
        for load in (float(x) for x in args.loads.split(",")):
            for seed in (int(s) for s in args.seeds.split(",")):
                arriving = arriving_stream(node, args.jobs, seed, cmax, load)
                cells, base = [], None
                for pol in (Packing(), Rollout(args.window), Clairvoyant(args.window, args.candidates)):
                    t0 = time.process_time()
                    m = run_stream(node, arriving, cmax, pol).metrics()
                    ta, bs = m["mean_turnaround_s"], m["mean_bounded_slowdown"]
                    base = base or (ta, bs)
                    ratios.setdefault((cmax, load, pol.name), []).append((ta / base[0], bs / base[1]))
                    cells.append(f"{pol.name} {ta / base[0]:.3f}/{bs / base[1]:.3f} ({time.process_time() - t0:.1f} s)")
                print(f"Cmax {cmax}, load {load:.0%}, seed {seed}: turnaround/slowdown vs packing " + "  ".join(cells),
                      flush=True)
    print("mean turnaround / packing's and mean bounded slowdown / packing's, median [min, max] (simulated):")
    cells = []
    for (cmax, load, name), r in ratios.items():
        if name != "packing":
            ta, bs = [x for x, _ in r], [y for _, y in r]
            cells.append({"cmax": cmax, "load": load, "policy": name, "turnaround_vs_packing": ta,
                          "slowdown_vs_packing": bs, "median_turnaround": statistics.median(ta),
                          "median_slowdown": statistics.median(bs)})
            print(f"  Cmax {cmax} load {load:.0%} {name:12s} turnaround {statistics.median(ta):.3f} [{min(ta):.3f}, "
                  f"{max(ta):.3f}]  slowdown {statistics.median(bs):.3f} [{min(bs):.3f}, {max(bs):.3f}]")
    if args.json:
        import json

        Path(args.json).write_text(json.dumps({"simulated": True, "node": args.node, "command": "python bench/stream_clairvoyant.py "
                                               + " ".join(sys.argv[1:]), "seeds": args.seeds, "cells": cells}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
