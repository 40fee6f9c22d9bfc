"""What cache / bandwidth partitioning adds on the simulated node (every figure simulated).

1. The paper's Fig. 2 pairs: the best co-run of each pair without partitioning (all ways shared, no MBA cap)
   and with it (every way option x MBA cap of the action grid, exhaustively per core split), compact and
   distributed first-touch (``env.planners.partitioning``).
2. best-found over the standard evaluation windows (``training/eval_windows.json``) on the full action grid, on
   the same grid without way / bandwidth options (``NO_PARTITIONING``: all ways, 100 %, balanced) and on the
   training expert's core-only grid: the mean throughput vs time sharing of each, and what ways / bandwidth add.

    .venv/bin/python bench/partition_gain.py [--node sim:reference] [--windows training/eval_windows.json] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from env.planners.baselines import NO_PARTITIONING, GroupEvaluator, Grid, search  # noqa: E402
from env.sim.nodes import load_node  # noqa: E402
from env.sim.catalogue import catalogue  # noqa: E402
from env.planners.partitioning import pair_gain  # noqa: E402

PAIRS = (("ocean_cp", "water_spatial"), ("FT", "fmm"), ("MG", "EP"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--node", default="sim:reference")
    ap.add_argument("--windows", default=str(Path(__file__).resolve().parent.parent / "training" / "eval_windows.json"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    node = load_node(args.node)
    cat = catalogue(node)
    out: dict = {"node": node.name, "simulated": True, "pairs": [], "windows": {}}
    for a, b in PAIRS:
        g = pair_gain(node, a, b)
        out["pairs"].append({"pair": f"{a}:{b}", "shared": g.shared, "partitioned": g.partitioned, "gain_pct": g.gain_pct})
        if not args.json:
            print(g.describe())
    windows = json.loads(Path(args.windows).read_text())
    ev = GroupEvaluator(node)
    # the expert's "cores" grid (training/demos.py): core options only, compact and distributed first-touch
    cores_only = Grid(schedules=(0, 3), ways=(max(Grid().ways),), bw=(100,), splits=("balanced",))
    grids = (("full grid", Grid()), ("no partitioning", NO_PARTITIONING), ("cores only", cores_only))
    res: dict[str, list[float]] = {label: [] for label, _ in grids}
    t0 = time.perf_counter()
    for w in windows:
        names = [j["profile"] for j in w["jobs"]]
        solo = sum(cat[n].solo_s for n in names)
        for label, grid in grids:
            s = search(node, names, w["max_concurrency"], grid, evaluator=ev)
            res[label].append(solo / s.predicted_total_s)
    full, bare = statistics.mean(res["full grid"]), statistics.mean(res["no partitioning"])
    per = [f / b - 1 for f, b in zip(res["full grid"], res["no partitioning"])]
    cores = statistics.mean(res["cores only"])
    out["windows"] = {"file": args.windows, "n": len(windows), "best_found_full": full, "best_found_no_partitioning": bare,
                      "best_found_cores_only": cores, "cores_only_pct_of_full": cores / full * 100,
                      "ways_bw_add_pct": (full / bare - 1) * 100, "max_window_gain_pct": max(per) * 100,
                      "windows_gaining_over_1pct": sum(p > 0.01 for p in per), "seconds": time.perf_counter() - t0}
    if args.json:
        print(json.dumps(out, indent=1))
        return
    o = out["windows"]
    print(f"best-found over {o['n']} windows of {Path(args.windows).name}: full grid {full:.3f}, without way / bandwidth "
          f"options {bare:.3f} vs time sharing: ways / bandwidth add {o['ways_bw_add_pct']:.1f} % (largest on one window "
          f"{o['max_window_gain_pct']:.1f} %, {o['windows_gaining_over_1pct']} windows gain > 1 %) (simulated; "
          f"{o['seconds']:.0f} s)")
    print(f"the expert's core-only grid (compact / distributed first-touch, all ways, no cap) plans {cores:.3f}: "
          f"{o['cores_only_pct_of_full']:.1f} % of the full grid (simulated)")


if __name__ == "__main__":
    main()
