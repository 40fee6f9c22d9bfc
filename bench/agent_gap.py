"""Where the agent loses (simulated): its plans against the expert's (training.expert, the search completed from
any state) on seeded windows of training programs only, and on windows with at least one held-out program.

    .venv/bin/python bench/agent_gap.py [--model training/models/sim-reference.npz] [--windows 20] [--seed 123]

A gap on the first kind is the policy's; an extra gap on the second is generalisation to unseen programs.
Prints the mean and the worst agent / expert ratio of throughput vs time sharing for each kind.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from env.sim.backend import SimBackend  # noqa: E402
from env.planners.baselines import PlanContext  # noqa: E402
from env.episode.planning import plan_window  # noqa: E402
from env.episode.jobinfo import sim_provider  # noqa: E402
from env.plan.models import Window, WindowJob  # noqa: E402
from env.sim.nodes import load_node  # noqa: E402
from env.sim.catalogue import ALL_JOBS, HELD_OUT_JOBS, TRAIN_JOBS  # noqa: E402
from training.expert import Expert, expert_grid  # noqa: E402
from agent.modelfile import load_set_model  # noqa: E402
from training.policies import AgentPolicy  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(ROOT / "training" / "models" / "sim-reference.npz"),
                    help="a set-encoder model file (cosched-model/2)")
    ap.add_argument("--windows", type=int, default=20, help="windows of each kind (default 20)")
    ap.add_argument("--window-size", type=int, default=6, help="W (default 6)")
    ap.add_argument("--cmax", type=int, default=4, help="Cmax (default 4)")
    ap.add_argument("--seed", type=int, default=123)
    args = ap.parse_args()
    m = load_set_model(args.model)
    node = load_node(m.meta.trained_for.name)
    prov, backend = sim_provider(node), SimBackend(node)
    agent, expert = AgentPolicy(m), Expert(node, expert_grid("cores"))
    W = args.window_size

    def throughput(w: Window, plan) -> float:  # noqa: ANN001
        return sum(prov.get(j.profile_name).solo_s for j in w.jobs) / sum(backend.evaluate(plan, seed=0))

    rng = random.Random(args.seed)
    print(f"agent / expert, throughput vs time sharing (simulated), {args.windows} seeded windows of "
          f"{W} jobs each, Cmax {args.cmax}:")
    for label, pool, need_held in (("training programs only", TRAIN_JOBS, False), ("with held-out programs", ALL_JOBS, True)):
        ratios: list[float] = []
        while len(ratios) < args.windows:
            names = rng.sample(list(pool), W)
            if need_held and not any(n in HELD_OUT_JOBS for n in names):
                continue
            w = Window(jobs=[WindowJob(id=f"{i}-{n}", profile=n) for i, n in enumerate(names)], max_concurrency=args.cmax)
            mine = agent.plan(w, PlanContext(node=node, provider=prov))
            theirs = plan_window(w, node, prov, lambda o, mk, ep: expert.action(ep), policy="expert", window_size=W).plan
            ratios.append(throughput(w, mine) / throughput(w, theirs))
        print(f"  {label:24s} mean {np.mean(ratios) * 100:5.1f} %   worst {np.min(ratios) * 100:5.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
