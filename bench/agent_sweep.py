"""The W ∈ {4, 6, 8} × Cmax ∈ {2, 3, 4} sweep (coscheduler.md §8), simulated: per cell, seeded windows of W jobs
drawn from the whole catalogue (at least one held-out job), planned by the agent and by best-found; the table
gives the agent's mean throughput vs time sharing, best-found's, and the agent's fraction of it; the picture
is a heat map of that fraction.

    .venv/bin/python bench/agent_sweep.py [--model training/models/sim-reference.npz] [--models W=PATH,...]
        [--windows-per-cell 6] [--png training/results/agent_sweep.png] [--json training/results/agent_sweep.json]

One model plans every cell unless ``--models`` gives one per W (e.g. ``4=m4.npz,8=m8.npz``): a W = 6 model plans
8-job windows as 6 + 2 (queue order) and 4-job windows as padded windows; its Cmax limit must be ≥ the cell's.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.modelfile import load_model  # noqa: E402
from env.models import Window, WindowJob  # noqa: E402
from env.nodes import load_node  # noqa: E402
from env.sim.catalogue import ALL_JOBS, HELD_OUT_JOBS  # noqa: E402
from training.evaluation import evaluate_model  # noqa: E402

WS, CMAXES = (4, 6, 8), (2, 3, 4)


def cell_windows(w: int, cmax: int, n: int, seed: int = 4242) -> list[Window]:
    rng = random.Random(seed * 100 + w * 10 + cmax)
    out: list[Window] = []
    while len(out) < n:
        names = rng.sample(list(ALL_JOBS), w)
        if any(x in HELD_OUT_JOBS for x in names):
            out.append(Window(jobs=[WindowJob(id=f"s{len(out)}-{k}-{x}", profile=x) for k, x in enumerate(names)],
                              max_concurrency=cmax))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(ROOT / "training" / "models" / "sim-reference.npz"))
    ap.add_argument("--models", default=None, help="one model per W: 4=PATH,6=PATH,8=PATH")
    ap.add_argument("--windows-per-cell", type=int, default=6)
    ap.add_argument("--png", default=str(ROOT / "training" / "results" / "agent_sweep.png"))
    ap.add_argument("--json", default=str(ROOT / "training" / "results" / "agent_sweep.json"))
    args = ap.parse_args()
    per_w = {w: args.model for w in WS}
    if args.models:
        for part in args.models.split(","):
            k, v = part.split("=", 1)
            per_w[int(k)] = v
    node = load_node(load_model(args.model).meta.trained_for.name)
    cells = []
    t0 = time.monotonic()
    for w in WS:
        for c in CMAXES:
            doc = evaluate_model(per_w[w], node, cell_windows(w, c, args.windows_per_cell),
                                 ["agent", "greedy", "pairs", "best-found"], search=True)
            m = doc["mean"]
            cells.append({"W": w, "Cmax": c, "model": Path(per_w[w]).name, "agent": m["agent"], "greedy": m["greedy"],
                          "pairs": m["pairs"], "best_found": m["best-found"], "fraction": m["agent"] / m["best-found"]})
            print(f"W={w} Cmax={c}: agent {m['agent']:.3f}  greedy {m['greedy']:.3f}  pairs {m['pairs']:.3f}  "
                  f"best-found {m['best-found']:.3f}  agent/best-found {m['agent'] / m['best-found'] * 100:.1f} %  "
                  f"({time.monotonic() - t0:.0f} s)", flush=True)
    print("\n(simulated) agent / best-found, mean throughput vs time sharing")
    print("W \\ Cmax " + "".join(f"{c:>10}" for c in CMAXES))
    for w in WS:
        row = [x for x in cells if x["W"] == w]
        print(f"{w:>8} " + "".join(f"{x['fraction'] * 100:>9.1f}%" for x in row))
    Path(args.json).write_text(json.dumps({"simulated": True, "node": node.name, "windows_per_cell": args.windows_per_cell,
                                           "cells": cells}, indent=1))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    grid = np.array([[next(x["fraction"] for x in cells if x["W"] == w and x["Cmax"] == c) for c in CMAXES] for w in WS])
    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    im = ax.imshow(grid * 100, cmap="viridis", vmin=min(80, grid.min() * 100), vmax=100, origin="lower")
    ax.set_xticks(range(len(CMAXES)), [str(c) for c in CMAXES])
    ax.set_yticks(range(len(WS)), [str(w) for w in WS])
    ax.set_xlabel("Cmax")
    ax.set_ylabel("W (jobs per window)")
    for i, w in enumerate(WS):
        for j, c in enumerate(CMAXES):
            x = next(x for x in cells if x["W"] == w and x["Cmax"] == c)
            ax.text(j, i, f"{grid[i, j] * 100:.0f} %\n{x['agent']:.2f}", ha="center", va="center", color="white", fontsize=8)
    fig.colorbar(im, label="agent / best-found (%)")
    ax.set_title(f"agent vs best-found on {node.name} (simulated)", fontsize=9)
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)
    print(f"picture: {args.png}; table: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
