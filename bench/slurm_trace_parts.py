"""Trace parts side by side (simulated): each part's mean turnaround per policy over packing's, median of its draws,
from ``bench/slurm_trace.py --json`` files; one picture.

    .venv/bin/python bench/slurm_trace_parts.py OUT.png NAME=FILE.json[+LATER.json] [NAME=... ...]
        [--policies easy,cosched,cosched-adapting] [--table]

``FILE+LATER``: the runs of both (the same part and draws); a policy run in both is LATER's, and FILE's runs of it
are kept as ``POLICY@before``, so a rule's new runs stand beside the old. ``--table``: also a
markdown table, each policy's median mean turnaround and how far below EASY's and packing's it is, draw by draw.
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
    ap.add_argument("--table", action="store_true", help="also print a markdown table of the parts")
    args = ap.parse_args()
    policies = [p for p in args.policies.split(",") if p]
    rows, table = [], []
    for item in args.parts:
        name, _, paths = item.partition("=")
        runs: list[dict] = []
        for path in paths.split("+"):
            try:
                later = json.loads(Path(path).read_text())["runs"]
            except (OSError, ValueError, KeyError) as exc:
                print(f"slurm_trace_parts: {path}: not a bench/slurm_trace.py --json file ({exc})", file=sys.stderr)
                return 2
            again = {r["policy"] for r in later}
            runs = [{**r, "policy": f"{r['policy']}@before"} if r["policy"] in again else r for r in runs] + later
        by = {p: sorted((r for r in runs if r["policy"] == p), key=lambda r: (r["load"], r["seed"]))
              for p in {r["policy"] for r in runs}}
        if "packing" not in by or not set(policies) <= set(by):
            print(f"slurm_trace_parts: {paths} lacks {', '.join(sorted({'packing', *policies} - set(by)))}",
                  file=sys.stderr)
            return 2
        packing = statistics.median(r["mean_turnaround_s"] for r in by["packing"])
        rows.append((name, {p: statistics.median(r["mean_turnaround_s"] for r in by[p]) / packing for p in policies}))
        if args.table:
            table.append((name, by))
    if table:
        print("| part | " + " | ".join(f"{p}: mean turnaround (s), below EASY's / packing's" for p in policies) + " |")
        print("| --- |" + " --- |" * len(policies))
    from slurm_trace import _ratio  # the bench's own "below" figure, draw by draw

    for name, by in table:
        cells = []
        for p in policies:
            below = [f"{_ratio(by, p, base)} below {base}'s" for base in ("easy", "packing") if base in by and base != p]
            cells.append(f"{statistics.median(r['mean_turnaround_s'] for r in by[p]):,.0f}"
                         + (f" ({'; '.join(below)})" if below else ""))
        print(f"| {name} | " + " | ".join(cells) + " |")
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
