"""rollout one level deeper for a saturated stream's first K starts only (simulated), against rollout and packing.

best-found (every start valued by rollout's own play) gains 1.5-3 % over rollout on saturated streams at minutes of
one core a stream; the deeper valuation at the tail alone gained nothing (docs/continuous.md, lab notes). This bench
asks how much of best-found's gain the first K starts carry: ``DeepFirst(K)`` decides its first K starts as
best-found does and the rest as rollout does.

    .venv/bin/python bench/stream_deep_first.py [--seeds 1,2,3] [--cmaxes 2,3,4] [--first 8] [--best-found]
        [--procs N] [--json FILE]

Per stream: throughput / packing's for rollout, each DeepFirst(K) (and best-found), and the CPU seconds each took.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.stream_baselines import saturated_stream  # noqa: E402
from bench.stream_best_found import run_streams  # noqa: E402
from env.episode.stream import run_stream  # noqa: E402
from env.planners.continuous import Rollout, Start  # noqa: E402
from env.planners.streams import BestFound  # noqa: E402
from env.planners.streams import Packing  # noqa: E402
from env.sim.nodes import load_node  # noqa: E402


class DeepFirst(Rollout):
    """rollout whose first ``first`` starts of a saturated stream are chosen as best-found chooses them (each
    candidate, rollout's own choice among them, played forward by rollout itself), the rest as rollout does. Its guard
    is rollout's: the check plays this policy forward, deep starts included."""

    def __init__(self, first: int = 8) -> None:
        super().__init__(deep=True)
        self.first = first
        self.name = f"deep-first-{first}"

    def reset(self, node, jobs, max_concurrency: int) -> None:  # noqa: ANN001
        super().reset(node, jobs, max_concurrency)
        self.total = len(jobs)

    def _early(self, queue) -> bool:  # noqa: ANN001
        return self.goal == "makespan" and self.total - len(queue) < self.first

    def _options(self, sim, queue, places: int, base: Start):  # noqa: ANN001, ANN202
        if self._early(queue):
            return BestFound._options(self, sim, queue, places, base)  # type: ignore[arg-type]
        return super()._options(sim, queue, places, base)

    def _value(self, sim, queue, start) -> float:  # noqa: ANN001
        return self._deep_value(sim, queue, start) if self._early(queue) else super()._value(sim, queue, start)


def one(task: tuple[str, int, int, tuple[int, ...], bool]) -> dict:
    node_name, seed, cmax, firsts, best = task
    node = load_node(node_name)
    jobs = saturated_stream(node, 48, seed)
    out: dict = {"seed": seed, "cmax": cmax}
    packing = run_stream(node, jobs, cmax, Packing()).makespan_s
    pols: list = [Rollout()] + [DeepFirst(first=k) for k in firsts] + ([BestFound()] if best else [])
    for pol in pols:
        t0 = time.process_time()
        out[pol.name] = packing / run_stream(node, jobs, cmax, pol).makespan_s
        out[pol.name + "_cpu_s"] = round(time.process_time() - t0, 1)
    cells = "  ".join(f"{k} {v:.4f} ({out[k + '_cpu_s']} s)" for k, v in out.items()
                      if k not in ("seed", "cmax") and not k.endswith("_cpu_s"))
    print(f"Cmax {cmax}, seed {seed}: throughput / packing: {cells}", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--node", default="sim:reference")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--cmaxes", default="2,3,4")
    ap.add_argument("--first", default="8", help="K values, comma-separated: the starts valued one level deeper (default 8, chosen on seeds 1-3)")
    ap.add_argument("--best-found", action="store_true", help="add best-found (every start one level deeper)")
    ap.add_argument("--procs", type=int, default=1)
    ap.add_argument("--json", default=None, metavar="FILE")
    args = ap.parse_args()
    try:
        firsts = tuple(int(k) for k in args.first.split(",") if k)
        tasks = [(args.node, int(s), int(c), firsts, args.best_found)
                 for c in args.cmaxes.split(",") for s in args.seeds.split(",")]
    except ValueError:
        print(f"--seeds {args.seeds!r} / --cmaxes {args.cmaxes!r} / --first {args.first!r}: give comma-separated whole "
              "numbers, e.g. --first 4,8", file=sys.stderr)
        return 2
    print(f"{args.node} (simulated): saturated streams of 48 jobs, rollout deeper for the first K starts", flush=True)
    rows = run_streams(one, tasks, args.procs, args.json, args.node, "bench/stream_deep_first.py")
    print("throughput / packing's, median [min, max] (simulated):")
    names = [k for k in rows[0] if k not in ("seed", "cmax") and not k.endswith("_cpu_s")] if rows else []
    for c in sorted({r["cmax"] for r in rows}):
        for name in names:
            v = [r[name] for r in rows if r["cmax"] == c]
            cpu = statistics.median(r[name + "_cpu_s"] for r in rows if r["cmax"] == c)
            print(f"  Cmax {c} {name:15s} {statistics.median(v):.3f} [{min(v):.3f}, {max(v):.3f}]  "
                  f"(median {cpu:.0f} s of one core a stream)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
