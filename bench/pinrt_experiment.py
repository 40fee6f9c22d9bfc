#!/usr/bin/env python3
"""The papers' experiment on this node: the ACO benchmark (native/build/aco)
with T threads on C CPUs, OS scheduling vs the pinning runtime, in three
settings: (a) alone, (b) an exogenous CPU-bound load pinned to the first CPU
from the start, (c) the same load starting after 30 % of the run (30 % of
the mean OS time of setting (a)). Prints mean and standard deviation of the
completion time over R runs, as the papers' tables do, and checks that every
run printed the same result. Runs of the two schedulers are interleaved so
that drifting background load hits both alike.

usage: bench/pinrt_experiment.py [--cpus 2] [--group 1] [--threads 4] [--runs 5]
                                 [--iterations 6000] [--jobs 120] [--ants 64] [--period 0.2]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "native" / "build"


def aco_cmd(a):
    return [str(BUILD / "aco"), "-t", str(a.threads), "-i", str(a.iterations), "-n", str(a.jobs), "-a",
            str(a.ants), "-s", str(a.seed)]


def run_once(a, cpus, runtime, load_at):
    """Returns (elapsed seconds, stdout). load_at: None, or seconds after start."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINRT_") and k != "LD_PRELOAD"}
    if runtime:
        env.update(LD_PRELOAD=str(BUILD / "libpinrt.so"), PINRT_PERIOD=str(a.period), PINRT_GROUP=str(a.group),
                   PINRT_SUMMARY="none", PINRT_SEED=str(a.seed))
    load = None
    load_cmd = [str(BUILD / "spin"), "-t", "1", "-d", "100000"]
    pin_load = lambda: os.sched_setaffinity(0, {cpus[0]})
    if load_at == 0:
        load = subprocess.Popen(load_cmd, stdout=subprocess.DEVNULL, preexec_fn=pin_load)
    t0 = time.monotonic()
    p = subprocess.Popen(aco_cmd(a), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: os.sched_setaffinity(0, set(cpus)))
    if load_at:
        try:
            p.wait(timeout=load_at)
        except subprocess.TimeoutExpired:
            load = subprocess.Popen(load_cmd, stdout=subprocess.DEVNULL, preexec_fn=pin_load)
    out, err = p.communicate()
    wall = time.monotonic() - t0
    if load:
        load.kill()
        load.wait()
    if p.returncode != 0:
        sys.exit(f"aco failed ({p.returncode}): {err}")
    m = re.search(r"elapsed_s=([\d.]+)", err)
    return (float(m.group(1)) if m else wall), out


def main():
    ap = argparse.ArgumentParser(description="ACO: OS scheduling vs the pinning runtime")
    ap.add_argument("--cpus", type=int, default=len(os.sched_getaffinity(0)), help="CPUs given to the job")
    ap.add_argument("--group", type=int, default=1, help="runtime core group size g")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=6000)
    ap.add_argument("--jobs", type=int, default=120)
    ap.add_argument("--ants", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--period", type=float, default=0.2)
    a = ap.parse_args()
    for f in ("aco", "spin", "libpinrt.so"):
        if not (BUILD / f).exists():
            sys.exit(f"missing {BUILD / f}: run make -C native")
    allowed = sorted(os.sched_getaffinity(0))
    if a.cpus < 1 or a.cpus > len(allowed):
        sys.exit(f"--cpus must be in 1..{len(allowed)}")
    cpus = allowed[:a.cpus]
    print(f"ACO: threads={a.threads} cpus={cpus} group={a.group} iterations={a.iterations} jobs={a.jobs} "
          f"ants={a.ants} runs={a.runs} period={a.period}s; load = 1 CPU-bound process pinned to CPU {cpus[0]}")
    print(f"loadavg at start: {open('/proc/loadavg').read().split()[:3]}")
    results = {}
    outputs = set()
    settings = [("a", "alone", None), ("b", "load from start", 0), ("c", "load after 30%", "late")]
    late = None
    for key, name, load in settings:
        if load == "late":
            load = late
        for mode in ("OS", "runtime"):
            results[(key, mode)] = []
        for r in range(a.runs):
            for mode in ("OS", "runtime") if r % 2 == 0 else ("runtime", "OS"):
                t, out = run_once(a, cpus, mode == "runtime", load)
                results[(key, mode)].append(t)
                outputs.add(out)
                print(f"  ({key}) {mode:8s} run {r + 1}: {t:.2f} s", flush=True)
        if key == "a":
            late = 0.3 * statistics.mean(results[("a", "OS")])
    print()
    print(f"{'setting':24s} {'OS mean':>9s} {'OS sd':>7s} {'runtime mean':>13s} {'runtime sd':>11s} {'runtime/OS':>11s}")
    for key, name, _ in settings:
        os_t, rt_t = results[(key, "OS")], results[(key, "runtime")]
        sd = lambda x: statistics.stdev(x) if len(x) > 1 else 0.0
        print(f"({key}) {name:20s} {statistics.mean(os_t):8.2f}s {sd(os_t):6.2f}s {statistics.mean(rt_t):12.2f}s "
              f"{sd(rt_t):10.2f}s {statistics.mean(rt_t) / statistics.mean(os_t):10.3f}")
    print(f"same result in every run: {len(outputs) == 1}")
    print(f"loadavg at end: {open('/proc/loadavg').read().split()[:3]}")
    if len(outputs) != 1:
        sys.exit(1)


if __name__ == "__main__":
    main()
