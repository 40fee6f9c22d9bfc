"""Planning time and quality of ``agent-search`` by budget (simulated, ``sim:reference``, one core).

    .venv/bin/python bench/search_bench.py [--model training/models/sim-reference.npz] [--w 8] [--budgets 8,16,24,32]
        [--windows 6]

Per budget: the median CPU time (``time.process_time``: this process's CPU, so a shared machine's other work does
not count; numpy/BLAS pinned to one thread) to plan a window of W jobs, over seeded windows of every Cmax 2-4
(``bench/agent_sweep.py``'s cells), after one warm-up plan; and the mean predicted throughput vs time sharing of the
agent alone and of agent-search (simulated). Each window starts with a cold evaluator memo (no window reuses another's
simulated groups or jobs); the node's allocation table (``env.planners.baselines.AllocationTable``: which CPUs, ways and caps
an action takes given what its group holds, the same for every window) fills over the windows, as in a running
service. The default budget (``env.planners.search.DEFAULT_BUDGET``) must fit 50 ms at W = 8 here.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from agent_sweep import cell_windows  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(ROOT / "training" / "models" / "sim-reference.npz"))
    ap.add_argument("--w", type=int, default=8)
    ap.add_argument("--budgets", default="4,8,16,24,32")
    ap.add_argument("--windows", type=int, default=6, help="windows per Cmax (default 6)")
    args = ap.parse_args()
    from env.planners.baselines import PlanContext
    from env.sim.nodes import load_node
    from env.episode.jobinfo import provider_for
    from training.policies import AgentPolicy
    from training.search_policy import AgentSearchPolicy

    node = load_node("sim:reference")
    agent = AgentPolicy(args.model)
    provider = provider_for(node, agent.pipeline(node))
    windows = [w for c in (2, 3, 4) for w in cell_windows(args.w, c, args.windows)]
    ctx = PlanContext(node=node, provider=provider)
    base = [agent.plan(w, ctx) for w in windows]
    from env.sim.backend import SimBackend

    sim = SimBackend(node)

    def thr(plan, w) -> float:  # noqa: ANN001
        solo = sum(provider.get(j.profile_name).solo_s for j in w.jobs)
        return solo / sum(sim.evaluate(plan))

    agent_mean = statistics.mean(thr(p, w) for p, w in zip(base, windows))
    print(f"W = {args.w}, {len(windows)} windows (Cmax 2-4), sim:reference (simulated); agent alone: mean {agent_mean:.3f}")
    print(f"{'budget':>7} {'median CPU ms':>14} {'p90 CPU ms':>11} {'mean throughput':>16}")
    for b in [int(x) for x in args.budgets.split(",")]:
        pol = AgentSearchPolicy(args.model, b)
        pol.plan(windows[0], ctx)  # warm-up: imports, the chooser
        times, thrs = [], []
        for w in windows:
            from env.planners.scoring import clear_evaluators

            clear_evaluators()  # a cold evaluator memo each window: no window benefits from another's groups
            t = time.process_time()
            p = pol.plan(w, ctx)
            times.append((time.process_time() - t) * 1000)
            thrs.append(thr(p, w))
        times.sort()
        print(f"{b:>7} {statistics.median(times):>14.1f} {times[int(0.9 * (len(times) - 1))]:>11.1f} "
              f"{statistics.mean(thrs):>16.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
