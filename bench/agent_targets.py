"""The agent's targets, all simulated: on the standard evaluation file, the shipped (or given) model's
mean throughput vs time sharing against every baseline, its fraction of best-found, the training time recorded
in the model (wall and CPU), and the planning time of one W = 6 window with the agent (numpy, one thread).

    .venv/bin/python bench/agent_targets.py [--model training/models/sim-reference.npz] [--windows FILE] [--json OUT]

pairs and best-found come from training/results/eval_baselines_sim_reference.json when it holds the same windows
(they are searches of seconds per window), else they are evaluated now.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from env.planners.evaluate import read_windows  # noqa: E402
from env.episode.jobinfo import sim_provider  # noqa: E402
from env.sim.nodes import load_node  # noqa: E402
from training.evaluation import STANDARD_WINDOWS, evaluate_model, render_table  # noqa: E402
from agent.modelfile import load_set_model  # noqa: E402

POLICIES = ["agent", "fifo", "timeshare", "greedy", "random", "pairs", "best-found"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(ROOT / "training" / "models" / "sim-reference.npz"))
    ap.add_argument("--windows", default=str(STANDARD_WINDOWS))
    ap.add_argument("--json", default=None, help="write the evaluation document here")
    args = ap.parse_args()
    meta = load_set_model(args.model).meta
    node = load_node(meta.trained_for.name)
    windows = read_windows(args.windows)
    doc = evaluate_model(args.model, node, windows, POLICIES)
    render_table(doc)
    mean = doc["mean"]
    print()
    print("targets (simulated):")
    for p in ("timeshare", "random", "greedy", "fifo", "pairs"):
        print(f"  agent {mean['agent']:.3f} vs {p} {mean[p]:.3f}: {'beats' if mean['agent'] > mean[p] else 'DOES NOT beat'}")
    frac = mean["agent"] / mean["best-found"]
    print(f"  agent / best-found = {frac * 100:.1f} % (target >= 95 %): {'met' if frac >= 0.95 else 'MISSED'}")
    fig = meta.training.get("figures", {})
    print(f"  training (recorded in the model): {fig.get('wall_s')} s wall, {fig.get('cpu_s')} s CPU of the training "
          f"process, {fig.get('steps')} env steps, {fig.get('updates')} updates (target <= 1800 s)")

    # Planning time of one W = 6 window with the agent policy (episode + numpy actor), one thread.
    from env.planners.baselines import PlanContext
    from training.policies import AgentPolicy

    pol = AgentPolicy(args.model)
    ctx = PlanContext(node=node, provider=sim_provider(node))
    times = []
    for w in windows * 3:
        t = time.perf_counter()
        pol.plan(w, ctx)
        times.append(time.perf_counter() - t)
    print(f"  planning one W = 6 window with the agent (episode, masks, allocation, actor; numpy): median "
          f"{np.median(times) * 1e3:.2f} ms, p90 {np.percentile(times, 90) * 1e3:.2f} ms "
          "(numpy only)")
    if args.json:
        doc["planning_ms"] = {"median": float(np.median(times) * 1e3), "p90": float(np.percentile(times, 90) * 1e3)}
        Path(args.json).write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
