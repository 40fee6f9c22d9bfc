"""rollout against best-found, the offline reference, on saturated streams (simulated), streams side by side.

``best-found`` (``env.planners.continuous.BestFound``) plays every candidate start forward by the whole ``rollout``
search instead of by ``Fill``: minutes of one core per stream of 48 jobs, so ``--procs`` runs streams in parallel
processes (each stream's figures are the same however many run at once: the node model is deterministic).

    .venv/bin/python bench/stream_best_found.py [--seeds 101,...,108] [--cmaxes 2,3,4] [--window 8] [--candidates 8]
        [--procs N] [--json FILE]

The streams are ``bench/stream_baselines.py``'s (same seeds, same jobs). Per stream: throughput / packing's for
rollout and best-found; then per Cmax the median [min, max]. The JSON is rewritten after each stream.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.stream_baselines import saturated_stream  # noqa: E402
from env.episode.stream import run_stream  # noqa: E402
from env.planners.continuous import Rollout  # noqa: E402
from env.planners.streams import BestFound  # noqa: E402
from env.planners.streams import Packing  # noqa: E402
from env.sim.nodes import load_node  # noqa: E402


def one(task: tuple[str, int, int, int, int]) -> dict:
    node_name, seed, cmax, window, candidates = task
    node = load_node(node_name)
    jobs = saturated_stream(node, 48, seed)
    out = {"seed": seed, "cmax": cmax}
    packing = run_stream(node, jobs, cmax, Packing()).makespan_s
    for pol in (Rollout(window), BestFound(window, candidates)):
        t0 = time.process_time()
        out[pol.name] = packing / run_stream(node, jobs, cmax, pol).makespan_s
        out[pol.name + "_cpu_s"] = round(time.process_time() - t0, 1)
    print(f"Cmax {cmax}, seed {seed}: throughput / packing: rollout {out['rollout']:.4f} ({out['rollout_cpu_s']} s), "
          f"best-found {out['best-found']:.4f} ({out['best-found_cpu_s']} s)", flush=True)
    return out


def run_streams(one: Callable[[tuple], dict], tasks: list[tuple], procs: int, json_path: str | None, node: str,
                script: str) -> list[dict]:
    """``one`` over ``tasks`` (in ``procs`` processes when above 1): its rows, the JSON at ``json_path`` rewritten
    after each stream, so that a run cut short keeps what it did. Shared with ``bench/stream_deep_first.py``."""
    rows: list[dict] = []

    def keep(row: dict) -> None:
        rows.append(row)
        if json_path:
            Path(json_path).write_text(json.dumps({"simulated": True, "node": node, "command": f"python {script} "
                                                   + " ".join(sys.argv[1:]), "rows": rows}, indent=1) + "\n")

    if procs > 1:
        with ProcessPoolExecutor(procs) as ex:
            for f in as_completed([ex.submit(one, t) for t in tasks]):
                keep(f.result())
    else:
        for t in tasks:
            keep(one(t))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--node", default="sim:reference")
    ap.add_argument("--seeds", default="101,102,103,104,105,106,107,108")
    ap.add_argument("--cmaxes", default="2,3,4")
    ap.add_argument("--window", type=int, default=8)
    ap.add_argument("--candidates", type=int, default=8)
    ap.add_argument("--procs", type=int, default=1)
    ap.add_argument("--json", default=None, metavar="FILE")
    args = ap.parse_args()
    tasks = [(args.node, int(s), int(c), args.window, args.candidates)
             for c in args.cmaxes.split(",") for s in args.seeds.split(",")]
    print(f"{args.node} (simulated): saturated streams of 48 jobs, rollout and best-found (W {args.window}, "
          f"{args.candidates} candidates)", flush=True)
    rows = run_streams(one, tasks, args.procs, args.json, args.node, "bench/stream_best_found.py")
    print("throughput / packing's, median [min, max] (simulated):")
    for c in sorted({r["cmax"] for r in rows}):
        for name in ("rollout", "best-found"):
            v = [r[name] for r in rows if r["cmax"] == c]
            print(f"  Cmax {c} {name:15s} {statistics.median(v):.3f} [{min(v):.3f}, {max(v):.3f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
