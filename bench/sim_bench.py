"""Benchmarks of the simulated node (all figures simulated; timings are this machine's, one core).

1. Simulated windows per second: ``simulate_plan`` on ready plans of W = 6 windows (target >= 2,000), and the
   same through the gym env (full episodes with random valid actions, plan building included).
2. best-found against exhaustive search on small windows (W = 4), both on the same grid: (a) Cmax = 4, cores
   {1/4, 1/2, 3/4} x ways {8, 22}/22 x bandwidth {40, 100} % x balanced, all six schedule actions; (b) Cmax = 2,
   all five core options x ways {4, 12, 22}/22 x bandwidth {20, 60, 100} % x both splits, four schedule actions
   (local-alloc places pages like first-touch in the model).
3. best-found's time per W = 6 window on the full grid (its default budget).

    .venv/bin/python bench/sim_bench.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from env.planners.baselines import GroupEvaluator, Grid, PlanContext, search  # noqa: E402
from env.planners.registry import get_policy  # noqa: E402
from env.episode.jobinfo import sim_provider  # noqa: E402
from env.plan.models import Window, WindowJob  # noqa: E402
from env.sim.nodes import load_node  # noqa: E402
from env.sim.catalogue import ALL_JOBS  # noqa: E402
from env.sim.simulate import clear_caches, simulate_plan  # noqa: E402

REDUCED = Grid(cores=(Fraction(1, 4), Fraction(1, 2), Fraction(3, 4)), ways=(Fraction(8, 22), Fraction(22, 22)),
               bw=(40, 100), splits=("balanced",))
# richer per-job options (5 cores x 3 ways x 3 bandwidths x 2 splits = 90), pairs only, 4 schedules
RICHER = Grid(schedules=(0, 1, 3, 4), ways=(Fraction(4, 22), Fraction(12, 22), Fraction(22, 22)), bw=(20, 60, 100))


def windows_per_second(node, n_plans: int, repeat: int) -> tuple[float, float]:
    rng = random.Random(1)
    prov = sim_provider(node)
    plans = []
    pols = [get_policy(p) for p in ("random", "greedy", "timeshare", "random")]
    for i in range(n_plans):
        w = Window(jobs=[WindowJob(id=f"j{k}", profile=rng.choice(ALL_JOBS)) for k in range(6)], max_concurrency=4)
        plans.append(pols[i % len(pols)].plan(w, PlanContext(node=node, provider=prov, seed=i)))
    best_wall = best_cpu = 0.0
    for _ in range(repeat):
        clear_caches()  # cold: no memoised jobs from the previous repeat
        t, c = time.perf_counter(), time.process_time()
        for p in plans:
            simulate_plan(p, node)
        best_wall = max(best_wall, len(plans) / (time.perf_counter() - t))
        best_cpu = max(best_cpu, len(plans) / (time.process_time() - c))
    return best_wall, best_cpu


def env_episodes_per_second(n: int) -> float:
    import numpy as np

    from env.episode.gym_env import CoScheduleEnv

    env = CoScheduleEnv()
    rng = np.random.default_rng(0)
    t = time.perf_counter()
    for ep in range(n):
        _, info = env.reset(seed=ep)
        done = False
        while not done:
            _, _, term, trunc, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
            done = term or trunc
    return n / (time.perf_counter() - t)


def gap_to_exhaustive(node, n_windows: int, grid: Grid = REDUCED, cmax: int = 4, seed: int = 4):
    rng = random.Random(seed)
    out = []
    for _ in range(n_windows):
        names = rng.sample(ALL_JOBS, 4)
        ev = GroupEvaluator(node)
        solo = sum(sim_provider(node).get(n).solo_s for n in names)  # type: ignore[union-attr]
        t = time.perf_counter()
        exact = search(node, names, cmax, grid, exhaustive=True, evaluator=ev)
        t_exact = time.perf_counter() - t
        ev2 = GroupEvaluator(node)
        t = time.perf_counter()
        found = search(node, names, cmax, grid, evaluator=ev2)
        t_found = time.perf_counter() - t
        out.append((names, solo / exact.predicted_total_s, solo / found.predicted_total_s, t_exact, t_found))  # type: ignore[operator]
    return out


def best_found_time(node, n_windows: int) -> tuple[float, float]:
    rng = random.Random(9)
    prov = sim_provider(node)
    times, thr = [], []
    for _ in range(n_windows):
        w = Window(jobs=[WindowJob(id=f"j{k}", profile=n) for k, n in enumerate(rng.sample(ALL_JOBS, 6))], max_concurrency=4)
        t = time.perf_counter()
        plan = get_policy("best-found").plan(w, PlanContext(node=node, provider=prov))
        times.append(time.perf_counter() - t)
        thr.append(plan.predicted_throughput_vs_timeshare)
    return statistics.mean(times), statistics.mean(thr)  # type: ignore[arg-type]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer windows (a smoke run)")
    args = ap.parse_args()
    node = load_node("sim:reference")
    q = args.quick
    print("simulated node sim:reference -- every throughput below is simulated; timings are wall-clock on this machine")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    wall, cpu = windows_per_second(node, 200 if q else 1000, 2 if q else 3)
    print(f"simulate_plan: {cpu:,.0f} simulated W=6 windows per CPU-second of one core (target >= 2,000) -> "
          f"{'OK' if cpu >= 2000 else 'BELOW TARGET'}; {wall:,.0f} per wall-clock second (load average {load:.1f} "
          f"on {os.cpu_count()} CPUs)")
    eps = env_episodes_per_second(50 if q else 300)
    print(f"gym env: {eps:,.0f} simulated episodes per second (W=6, random valid actions, plan building included)")
    for label, grid, cmax, n in (
        ("W=4, Cmax=4, reduced grid (3 cores x 2 ways x 2 bandwidths, 6 schedules)", REDUCED, 4, 2 if q else 6),
        ("W=4, Cmax=2, richer grid (5 cores x 3 ways x 3 bandwidths x 2 splits, 4 schedules)", RICHER, 2, 1 if q else 3),
    ):
        rows = gap_to_exhaustive(node, n, grid, cmax)
        print(f"best-found vs exhaustive search, {label}:")
        gaps = []
        for names, exact, found, te, tf in rows:
            gap = (exact - found) / exact * 100
            gaps.append(gap)
            print(f"  {' '.join(names):40s} exhaustive {exact:.3f} ({te:5.1f} s)  best-found {found:.3f} ({tf:4.1f} s)  "
                  f"gap {gap:.2f} %  (simulated)")
        print(f"  mean gap {statistics.mean(gaps):.2f} %, worst {max(gaps):.2f} % (simulated)")
    t, thr = best_found_time(node, 2 if q else 5)
    print(f"best-found, full grid, W=6, Cmax=4: {t:.1f} s per window, mean throughput {thr:.3f} vs time sharing (simulated)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
