"""How far above greedy-continuous a policy without search can go on saturated streams (simulated): the offline
best-found's throughput / greedy-continuous's, stream by stream, beside rollout's (the stream learner's teacher) and
the shipped agent's. Read from two figure files, no new run:

* ``docs/figures/stream_best_found.json`` (``bench/stream_best_found.py``: rollout and best-found / packing), and
* ``docs/figures/stream_ablation.json`` (``bench/stream_ablation.py``: packing, greedy-continuous and agent).

Both hold the held-out streams 101-108 at Cmax 2-4 of ``bench/stream_baselines.py``.

    .venv/bin/python bench/stream_learner_limit.py [--best-found FILE] [--ablation FILE]

The learner's target is agent (no search) >= 1.03 x greedy-continuous: where best-found itself, the strongest
search this project has (minutes a stream), is under that, no policy without search is known to reach it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--best-found", default=str(ROOT / "docs/figures/stream_best_found.json"))
    ap.add_argument("--ablation", default=str(ROOT / "docs/figures/stream_ablation.json"))
    args = ap.parse_args()
    try:
        best = json.loads(Path(args.best_found).read_text())["rows"]
        abl = dict(json.loads(Path(args.ablation).read_text())["rows"])
    except (OSError, ValueError, KeyError) as e:
        print(f"error: cannot read the figure files ({e}); give --best-found and --ablation as written by "
              "bench/stream_best_found.py --json and bench/stream_ablation.py --json", file=sys.stderr)
        return 2
    print("saturated streams of 48 jobs, sim:reference (simulated): throughput / greedy-continuous's")
    print("Cmax | best-found, median [min, max] | streams >= 1.03 | rollout | agent (no search)")
    for cmax in sorted({r["cmax"] for r in best}):
        bf, ro, ag = [], [], []
        for r in (r for r in best if r["cmax"] == cmax):
            x = abl.get(f"sat C{cmax} s{r['seed']}")
            if x is None:
                continue
            greedy = x["greedy-continuous"] / x["packing"]  # greedy-continuous / packing on the same stream
            bf.append(r["best-found"] / greedy)
            ro.append(r["rollout"] / greedy)
            ag.append(x["agent"] / x["greedy-continuous"])
        if bf:
            print(f"{cmax} | {statistics.median(bf):.3f} [{min(bf):.3f}, {max(bf):.3f}] | "
                  f"{sum(v >= 1.03 for v in bf)} of {len(bf)} | {statistics.median(ro):.3f} | {statistics.median(ag):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
