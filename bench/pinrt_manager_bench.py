#!/usr/bin/env python3
"""Manager overhead of the pinning runtime: runs a 64-thread CPU-bound
program (native/build/spin) under libpinrt.so at period T and prints the
manager thread's own CPU time as a share of one core, from the runtime's exit
summary. Target: <= 0.2 % at T = 0.2 s with 64 threads.

usage: bench/pinrt_manager_bench.py [--threads 64] [--seconds 20] [--period 0.2]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "native" / "build"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--period", type=float, default=0.2)
    ap.add_argument("--trace", action="store_true", help="also write a trace (costs more)")
    a = ap.parse_args()
    for f in ("libpinrt.so", "spin"):
        if not (BUILD / f).exists():
            sys.exit(f"missing {BUILD / f}: run make -C native")
    fd, summary = tempfile.mkstemp(prefix="pinrt-summary-")
    os.close(fd)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINRT_")}
    env.update(LD_PRELOAD=str(BUILD / "libpinrt.so"), PINRT_PERIOD=str(a.period), PINRT_SUMMARY=summary)
    if a.trace:
        env["PINRT_TRACE"] = summary + ".csv"
    try:
        p = subprocess.run([str(BUILD / "spin"), "-t", str(a.threads), "-d", str(a.seconds)], env=env,
                           capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"spin failed: {p.returncode} {p.stderr}")
        text = open(summary).read()
    finally:
        os.unlink(summary)
        if a.trace and os.path.exists(summary + ".csv"):
            os.unlink(summary + ".csv")
    m = dict(re.findall(r"(\w+)=(\S+)", text))
    pct = float(m["manager_cpu_pct"])
    epochs = int(m["epochs"])
    per_epoch_us = float(m["manager_cpu_s"]) / max(epochs, 1) * 1e6
    print(f"threads={a.threads} period_s={a.period} seconds={a.seconds} epochs={epochs} "
          f"threads_seen={m['threads_seen']} moves={m['moves']} speed_source={m['speed_source']}")
    print(f"manager_cpu_s={m['manager_cpu_s']} manager_cpu_us_per_epoch={per_epoch_us:.1f}")
    print(f"manager_cpu_pct_of_one_core={pct:.4f} (target <= 0.2) {'OK' if pct <= 0.2 else 'ABOVE TARGET'}")


if __name__ == "__main__":
    main()
