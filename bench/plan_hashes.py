"""The development sweep's plans, hashed: a refactoring that changes no behaviour leaves every hash the same.

For each cell of the development sweep (W ∈ {4, 6, 8, 12} × Cmax ∈ {2, 3, 4}, seed 3131, ``bench/agent_sweep.py``'s
windows) every policy plans every window through the service's planning path (the guard on, as ``cosched schedule``
plans), on the simulated reference node with the shipped model; each plan's JSON is hashed (greedy's and agent-search's with the report of their simulated run). The output is one line a
(policy, cell) with its hash and a total hash; ``--check FILE`` compares with a file this script wrote.

    .venv/bin/python bench/plan_hashes.py [--windows-per-cell 6] [--out FILE] [--check FILE]
        [--policies timeshare,greedy,random,pairs,fifo,agent,agent-search,best-found]

best-found is planned for windows of W <= 8 only (it takes seconds a window above).
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from agent_sweep import CMAXES, WS, cell_windows  # noqa: E402

POLICIES = ("timeshare", "greedy", "random", "pairs", "fifo", "agent", "agent-search", "best-found")
MODEL = ROOT / "training" / "models" / "sim-reference.npz"


def plan_json(window, policy: str) -> str:
    from env.sim.nodes import load_node
    from service.planning import plan_window

    model = str(MODEL) if policy in ("agent", "fifo", "agent-search") else None
    plan = plan_window(window, load_node("sim:reference"), policy=policy, model=model, seed=0)
    if policy in ("greedy", "agent-search"):  # and its simulated run: the plan runner's path too
        from service.planning import simulate

        return plan.model_dump_json() + simulate(plan, seed=0).model_dump_json()
    return plan.model_dump_json()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--windows-per-cell", type=int, default=6)
    ap.add_argument("--seed", type=int, default=3131)
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--out", help="write the hashes here (JSON)")
    ap.add_argument("--check", help="compare with the hashes in this file; exit 1 on any difference")
    args = ap.parse_args()
    rows: dict[str, str] = {}
    t0 = time.monotonic()
    total = hashlib.sha256()
    for w in WS:
        for c in CMAXES:
            windows = cell_windows(w, c, args.windows_per_cell, args.seed)
            for p in args.policies.split(","):
                if p == "best-found" and w > 8:
                    continue
                h = hashlib.sha256()
                for win in windows:
                    h.update(plan_json(win, p).encode())
                rows[f"W{w}/C{c}/{p}"] = h.hexdigest()[:16]
                total.update(h.digest())
            print(f"W={w} Cmax={c} done ({time.monotonic() - t0:.0f} s)", file=sys.stderr, flush=True)
    doc = {"seed": args.seed, "windows_per_cell": args.windows_per_cell, "total": total.hexdigest()[:16], "plans": rows}
    print(json.dumps(doc, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    if args.check:
        want = json.loads(Path(args.check).read_text())
        bad = [k for k in want["plans"] if want["plans"][k] != rows.get(k)]
        if bad:
            print(f"{len(bad)} of {len(want['plans'])} (policy, cell) hashes differ: {', '.join(bad[:12])}", file=sys.stderr)
            return 1
        print(f"all {len(want['plans'])} (policy, cell) hashes equal {args.check}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
