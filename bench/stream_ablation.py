"""The stream learner's ablation on held-out streams (simulated): agent (the trained actor alone) vs the same network
untrained vs greedy-continuous vs packing, and agent-search vs rollout; with each policy's decision latency (median
ms per event, one core, measured). The policies and streams: ``training/stream/ablation.py``.

    .venv/bin/python bench/stream_ablation.py [--model MODEL.npz] [--untrained RUN/untrained.npz] \
        [--seeds 101,...,108] [--cmaxes 2,3,4] [--loads 0.7,0.9] [--no-search] [--json OUT]

The model defaults to the shipped ``training/models/stream-sim-reference.npz``.

Seeds 101-108 are held out: nothing was chosen on them. Ratios: above 1, the first policy is better (throughput for
saturated streams, mean turnaround for arrivals).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from env.sim.nodes import load_node  # noqa: E402
from training.stream.ablation import run, table  # noqa: E402


def _ints(s: str, flag: str) -> list[int]:
    try:
        return [int(x) for x in s.split(",") if x]
    except ValueError:
        sys.exit(f"error: {flag} {s!r}: give whole numbers separated by commas")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--node", default="sim:reference")
    ap.add_argument("--model", default=str(ROOT / "training/models/stream-sim-reference.npz"))
    ap.add_argument("--untrained", help="the same network before training (RUN/untrained.npz; default: rebuilt from "
                                        "the model's seed and shape)")
    ap.add_argument("--seeds", default="101,102,103,104,105,106,107,108")
    ap.add_argument("--cmaxes", default="2,3,4")
    ap.add_argument("--loads", default="0.7,0.9", help="arrival loads x packing's capacity ('' for saturated only)")
    ap.add_argument("--window", type=int, default=8, help="W of agent, untrained, greedy-continuous and rollout")
    ap.add_argument("--search-window", type=int, default=16, help="W of agent-search")
    ap.add_argument("--no-search", action="store_true", help="leave out rollout and agent-search (the slow arms)")
    ap.add_argument("--json", help="write the rows, latencies and table here")
    args = ap.parse_args()
    try:
        loads = [float(x) for x in args.loads.split(",") if x]
    except ValueError:
        sys.exit(f"error: --loads {args.loads!r}: give shares such as 0.7,0.9")
    from agent.errors import ModelFileError

    try:
        doc = run(load_node(args.node), args.model, args.untrained, _ints(args.seeds, "--seeds"),
                  _ints(args.cmaxes, "--cmaxes"), loads, args.window, args.search_window, not args.no_search,
                  say=lambda s: print(s, flush=True))
    except ModelFileError as e:
        sys.exit(f"error: {e}")
    print(f"\n{args.node} (simulated), seeds {args.seeds}: median [min, max] over the seeds")
    lines = table(doc)
    print("\n".join(lines))
    print("decision latency, median (p90) ms per event where a start is possible, one core, measured: " + ", ".join(
        f"{k} {v:.1f} ({doc['latency_p90_ms'][k]:.1f})" for k, v in doc["latency_ms"].items()))
    print(f"agent-search fell back to packing's decision at {doc['fallbacks']} events")
    if args.json:
        Path(args.json).write_text(json.dumps({**doc, "table": lines}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
