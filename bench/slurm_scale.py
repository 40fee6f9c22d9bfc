#!/usr/bin/env python3
"""The window controller against 1,000 simulated nodes (service/slurm/simcluster.py: no daemons).

Two figures, each the median of --repeats runs with its spread:

* planning throughput: a burst of jobs (8 a node) held at once; windows planned per second of the
  controller's own wall time (planning in process with the policy given, the journal on disk). Measured on
  this machine, against a simulated cluster.
* eligibility-to-release delay: jobs arrive at a steady rate (Poisson, seeded) with runtimes drawn from the
  simulated catalogue's solo times; the simulated clock advances by each controller step's measured wall time
  plus the poll interval, so the delay (a job held -> its group released) includes the controller's own work.
  The cluster is simulated, the controller's time measured.

    .venv/bin/python bench/slurm_scale.py [--nodes 1000] [--repeats 3] [--policy agent] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from env.plan.models import Window, WindowJob  # noqa: E402
from env.sim.nodes import load_node  # noqa: E402
from env.sim.catalogue import TRAIN_JOBS  # noqa: E402
from service.slurm.controller import Controller, ControllerConfig  # noqa: E402
from service.slurm.journal import Journal  # noqa: E402
from service.slurm.planner import in_process  # noqa: E402
from service.slurm.simcluster import SimCluster  # noqa: E402

NODE = "sim:reference"


class TimedPlanner:
    """The in-process planner, timed: how much of the controller's time is planning."""

    def __init__(self, policy: str | None) -> None:
        self.plan = in_process(NODE, policy, None)
        self.seconds = 0.0
        self.calls = 0

    def __call__(self, window):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        try:
            return self.plan(window)
        finally:
            self.seconds += time.perf_counter() - t0
            self.calls += 1


def controller(tmp: Path, sim: SimCluster, planner: TimedPlanner, window: int) -> Controller:
    return Controller(ControllerConfig(partition="cosched", placement_dir=tmp / "placements", window=window, cmax=4,
                                       gather_s=0.0),
                      sim, planner, Journal(tmp / "journal.sqlite"),
                      plan_node=lambda: load_node(NODE), log=lambda s: None, clock=sim.clock)


def burst(nodes: int, per_node: int, policy: str | None, window: int, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as d:
        sim = SimCluster(n_nodes=nodes, cpus=24)
        for _ in range(nodes * per_node):
            sim.submit(rng.choice(TRAIN_JOBS), runtime_s=60.0)
        planner = TimedPlanner(policy)
        planner.plan(Window(jobs=[WindowJob(id="warm", profile="MG")]))  # the model's loading is not planning
        ctl = controller(Path(d), sim, planner, window)
        t0 = time.perf_counter()
        res = ctl.step(flush=True)
        wall = time.perf_counter() - t0
        return {"jobs": res.planned, "windows": res.windows, "released_jobs": len(res.released), "wall_s": wall,
                "windows_per_s": res.windows / wall, "planning_windows_per_s": planner.calls / planner.seconds}


def steady(nodes: int, rate: float, duration_s: float, poll_s: float, policy: str | None, window: int,
           gather_s: float, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    solo = {name: 0.0 for name in TRAIN_JOBS}
    from env.episode.jobinfo import sim_provider

    prov = sim_provider(load_node(NODE))
    for name in solo:
        info = prov.get(name)
        solo[name] = info.solo_s if info is not None else 60.0
    with tempfile.TemporaryDirectory() as d:
        sim = SimCluster(n_nodes=nodes, cpus=24)
        ctl = controller(Path(d), sim, TimedPlanner(policy), window)
        ctl.cfg.gather_s = gather_s
        next_arrival = 0.0
        steps, step_walls = 0, []
        while sim.now < duration_s:
            while next_arrival <= sim.now:
                name = rng.choice(TRAIN_JOBS)
                sim.submit(name, runtime_s=solo[name] * rng.uniform(0.8, 1.2))
                next_arrival += rng.expovariate(rate)
            t0 = time.perf_counter()
            ctl.step()
            wall = time.perf_counter() - t0
            step_walls.append(wall)
            steps += 1
            sim.advance(wall + poll_s)
        delays = sorted(ctl.release_delays)
        return {"jobs_released": len(delays), "delay_median_s": statistics.median(delays) if delays else float("nan"),
                "delay_p95_s": delays[int(0.95 * (len(delays) - 1))] if delays else float("nan"),
                "step_median_s": statistics.median(step_walls), "step_max_s": max(step_walls), "steps": steps}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--per-node", type=int, default=8, help="jobs a node in the burst (default 8)")
    ap.add_argument("--window", type=int, default=8)
    ap.add_argument("--policy", default=None, help="planning policy (default: as cosched schedule for sim:reference)")
    ap.add_argument("--rate", type=float, default=20.0, help="arrivals a second in the steady run (default 20)")
    ap.add_argument("--duration", type=float, default=300.0, help="simulated seconds of the steady run (default 300)")
    ap.add_argument("--poll", type=float, default=1.0, help="the controller's poll interval (default 1 s)")
    ap.add_argument("--gather", type=float, default=2.0, help="--gather of the controller (default 2 s)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    bursts = [burst(args.nodes, args.per_node, args.policy, args.window, seed=k) for k in range(args.repeats)]
    steadies = [steady(args.nodes, args.rate, args.duration, args.poll, args.policy, args.window, args.gather, seed=k)
                for k in range(args.repeats)]

    def summary(rows: list[dict[str, float]], key: str) -> dict[str, float]:
        vals = [r[key] for r in rows]
        return {"median": statistics.median(vals), "min": min(vals), "max": max(vals)}

    doc = {
        "nodes": args.nodes, "window": args.window, "policy": args.policy or "default", "plan_node": NODE,
        "label": "controller time measured on this machine; the Slurm cluster simulated (service/slurm/simcluster.py)",
        "burst": {"jobs": bursts[0]["jobs"], "windows": bursts[0]["windows"],
                  "windows_per_s": summary(bursts, "windows_per_s"),
                  "planning_windows_per_s": summary(bursts, "planning_windows_per_s"), "wall_s": summary(bursts, "wall_s")},
        "steady": {"rate_per_s": args.rate, "duration_s": args.duration, "poll_s": args.poll, "gather_s": args.gather,
                   "delay_median_s": summary(steadies, "delay_median_s"), "delay_p95_s": summary(steadies, "delay_p95_s"),
                   "step_median_s": summary(steadies, "step_median_s"), "step_max_s": summary(steadies, "step_max_s"),
                   "jobs_released": summary(steadies, "jobs_released")},
        "repeats": args.repeats,
    }
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    b, s = doc["burst"], doc["steady"]
    print(f"controller vs {args.nodes} simulated nodes (plans for {NODE}, W={args.window}; medians of {args.repeats}, [min, max])")
    print(f"  burst of {b['jobs']} jobs -> {b['windows']} windows: planning {b['planning_windows_per_s']['median']:.1f} windows/s "
          f"[{b['planning_windows_per_s']['min']:.1f}, {b['planning_windows_per_s']['max']:.1f}]; planned, journaled and "
          f"released {b['windows_per_s']['median']:.1f} windows/s [{b['windows_per_s']['min']:.1f}, "
          f"{b['windows_per_s']['max']:.1f}] (measured controller time)")
    print(f"  steady {args.rate:g} jobs/s for {args.duration:g} s: eligible -> released median "
          f"{s['delay_median_s']['median']:.2f} s [{s['delay_median_s']['min']:.2f}, {s['delay_median_s']['max']:.2f}], "
          f"p95 {s['delay_p95_s']['median']:.2f} s; controller step median {s['step_median_s']['median'] * 1000:.0f} ms, "
          f"max {s['step_max_s']['median'] * 1000:.0f} ms (simulated cluster, measured controller)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
