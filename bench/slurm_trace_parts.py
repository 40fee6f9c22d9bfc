"""Trace parts side by side (simulated): each part's mean turnaround per policy over packing's, median of its draws,
from ``bench/slurm_trace.py --json`` files; one picture.

    .venv/bin/python bench/slurm_trace_parts.py OUT.png NAME=FILE.json [NAME=FILE.json ...]
        [--policies easy,cosched,cosched-adapting]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="the picture (PNG)")
    ap.add_argument("parts", nargs="+", metavar="NAME=FILE.json")
    ap.add_argument("--policies", default="easy,cosched,cosched-adapting")
    args = ap.parse_args()
    policies = [p for p in args.policies.split(",") if p]
    rows = []
    for item in args.parts:
        name, _, path = item.partition("=")
        try:
            runs = json.loads(Path(path).read_text())["runs"]
        except (OSError, ValueError, KeyError) as exc:
            print(f"slurm_trace_parts: {path}: not a bench/slurm_trace.py --json file ({exc})", file=sys.stderr)
            return 2
        packing = statistics.median(r["mean_turnaround_s"] for r in runs if r["policy"] == "packing")
        got = {p: statistics.median(r["mean_turnaround_s"] for r in runs if r["policy"] == p) / packing
               for p in policies if any(r["policy"] == p for r in runs)}
        if len(got) != len(policies):
            print(f"slurm_trace_parts: {path} lacks {', '.join(sorted(set(policies) - set(got)))}", file=sys.stderr)
            return 2
        rows.append((name, got))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(rows) + 2), 4.2))
    width = 0.8 / len(policies)
    for i, p in enumerate(policies):
        xs = [k + (i - (len(policies) - 1) / 2) * width for k in range(len(rows))]
        ax.bar(xs, [min(g[p], 2.0) for _, g in rows], width, label=p)
    ax.axhline(1.0, color="black", lw=0.8)
    ax.axhline(0.95, color="grey", lw=0.8, ls="--", label="5 % below packing (the target)")
    ax.set_xticks(range(len(rows)), [n for n, _ in rows], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("mean turnaround / packing's (median of draws; cut at 2)")
    ax.legend(fontsize=8)
    fig.suptitle("trace parts on 1,000 simulated nodes, Cmax 2: simulated, bench/slurm_trace.py", fontsize=9)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"picture: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
