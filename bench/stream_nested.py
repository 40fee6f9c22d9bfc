"""A stronger offline reference for saturated streams (simulated): rollout whose play-outs are decided by rollout.

`best-found` (rollout with W 32 and 32 candidates) is the saturated streams' reference; at Cmax 2 and 4 it is under the
targets (1.05, 1.10 x packing) in most held-out streams. Is that the search's budget or the node model? This bench
runs a search one level deeper: at each start, every candidate (rollout's own choice, ``Fill``'s start,
``Proposals``' best, and starting nothing more now) is played forward to the stream's end by the full ``rollout``
policy (its search at every event; guard off), not by ``Fill``, and the candidate with the earliest last end is
taken. Rollout's own choice continued by rollout is rollout's own trajectory, so on the node model this search is
never later than rollout. Minutes of one core per stream of 48 jobs; ``--procs`` runs streams side by side.

    .venv/bin/python bench/stream_nested.py [--seeds 101,...,108] [--cmaxes 2,4] [--window 8] [--candidates 8]
        [--procs N] [--json FILE]

The streams are ``bench/stream_baselines.py``'s (same seeds, same jobs). Per stream: throughput / packing's for
rollout and for the nested search; then per Cmax the median [min, max].
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.stream_baselines import saturated_stream  # noqa: E402
from env.episode.stream import WAIT, Decision, StreamJob, StreamView, run_stream  # noqa: E402
from env.planners.continuous import Rollout, advance, objective_value  # noqa: E402
from env.planners.streams import Packing  # noqa: E402
from env.sim.nodes import load_node  # noqa: E402
from env.sim.stream import StreamNode  # noqa: E402


class Nested(Rollout):
    """Rollout whose candidates are played forward by rollout itself (an offline reference, not a policy to serve)."""

    name = "nested-rollout"

    def __init__(self, window: int = 8, candidates: int = 8) -> None:
        super().__init__(window, candidates, objective="makespan", guard=False, margin=0.0)

    def reset(self, node, jobs, max_concurrency: int) -> None:  # noqa: ANN001 - NodeSpec
        super().reset(node, jobs, max_concurrency)
        self.inner = Rollout(self.window, self.candidates, objective="makespan", guard=False, margin=0.0)
        self.inner.reset(node, jobs, max_concurrency)

    def _played(self, sim: StreamNode, queue: list[StreamJob], start) -> float:  # noqa: ANN001
        """``start`` now (None: nothing more now), then rollout at every event to the last end: the makespan."""
        sim, queue, ends, held = sim.fork(), list(queue), [], 0.0
        if start is None:
            if not sim.running:
                return float("inf")
            held += advance(sim, ends)
        else:
            j, alloc = start
            sim.start(j.id, j.name, j.params, alloc)
            queue.remove(j)
        while queue or sim.running:
            d = self.inner.search(StreamView(sim, queue, self.cmax, 0)) if queue else WAIT
            for jid, alloc in d.starts:
                j = next(x for x in queue if x.id == jid)
                sim.start(jid, j.name, j.params, alloc)
                queue.remove(j)
            if not sim.running:
                break
            held += advance(sim, ends)
        return objective_value(ends, held, "makespan")

    def search(self, view: StreamView) -> Decision:
        sim, queue = view.sim.fork(), list(view.queue)
        places, starts = view.places(), []
        while places > 0 and queue:
            own = self.inner.search(StreamView(sim, queue, self.cmax, 0))
            options: list = [next(((next(j for j in queue if j.id == jid), a) for jid, a in own.starts[:1]), None)]
            base = self.base.next_start(sim, queue, places)
            if base is not None:
                options.append(base)
            for s in self.proposals.ranked(sim, queue, places):
                if len(options) > self.candidates + 1:
                    break
                options.append(s)
            if sim.running and None not in options:
                options.append(None)
            seen: list = []
            uniq = []
            for o in options:  # the same start twice is valued once
                key = None if o is None else (o[0].name, o[1])
                if key not in seen:
                    seen.append(key)
                    uniq.append(o)
            values = [self._played(sim, queue, o) for o in uniq]
            choice = uniq[min(range(len(uniq)), key=lambda k: (values[k], k))]
            if choice is None:
                break
            j, alloc = choice
            sim.start(j.id, j.name, j.params, alloc)
            queue.remove(j)
            starts.append((j.id, alloc))
            places -= 1
        return Decision(starts=tuple(starts)) if starts else WAIT

    def decide(self, view: StreamView) -> Decision:
        return self.search(view) if view.queue else WAIT


def one(task: tuple[str, int, int, int, int]) -> dict:
    node_name, seed, cmax, window, candidates = task
    node = load_node(node_name)
    jobs = saturated_stream(node, 48, seed)
    out = {"seed": seed, "cmax": cmax}
    packing = run_stream(node, jobs, cmax, Packing()).makespan_s
    for pol in (Rollout(window), Nested(window, candidates)):
        t0 = time.process_time()
        out[pol.name] = packing / run_stream(node, jobs, cmax, pol).makespan_s
        out[pol.name + "_cpu_s"] = round(time.process_time() - t0, 1)
    print(f"Cmax {cmax}, seed {seed}: throughput / packing: rollout {out['rollout']:.4f} ({out['rollout_cpu_s']} s), "
          f"nested {out['nested-rollout']:.4f} ({out['nested-rollout_cpu_s']} s)", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--node", default="sim:reference")
    ap.add_argument("--seeds", default="101,102,103,104,105,106,107,108")
    ap.add_argument("--cmaxes", default="2,4")
    ap.add_argument("--window", type=int, default=8)
    ap.add_argument("--candidates", type=int, default=8)
    ap.add_argument("--procs", type=int, default=1)
    ap.add_argument("--json", default=None, metavar="FILE")
    args = ap.parse_args()
    tasks = [(args.node, int(s), int(c), args.window, args.candidates)
             for c in args.cmaxes.split(",") for s in args.seeds.split(",")]
    print(f"{args.node} (simulated): saturated streams of 48 jobs, rollout and rollout played forward by rollout "
          f"(W {args.window}, {args.candidates} candidates)", flush=True)
    rows: list[dict] = []

    def keep(row: dict) -> None:  # the JSON is rewritten after each stream: a run cut short keeps what it did
        rows.append(row)
        if args.json:
            Path(args.json).write_text(json.dumps({"simulated": True, "node": args.node, "command": "python "
                                                   "bench/stream_nested.py " + " ".join(sys.argv[1:]), "rows": rows}, indent=1) + "\n")

    if args.procs > 1:
        with ProcessPoolExecutor(args.procs) as ex:
            for f in as_completed([ex.submit(one, t) for t in tasks]):
                keep(f.result())
    else:
        for t in tasks:
            keep(one(t))
    print("throughput / packing's, median [min, max] (simulated):")
    for c in sorted({r["cmax"] for r in rows}):
        for name in ("rollout", "nested-rollout"):
            v = [r[name] for r in rows if r["cmax"] == c]
            print(f"  Cmax {c} {name:15s} {statistics.median(v):.3f} [{min(v):.3f}, {max(v):.3f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
