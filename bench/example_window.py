#!/usr/bin/env python3
"""Measured throughput vs time sharing of the example window on this node (real runs, not simulated).

Each repeat plans the window with each policy of --policies in turn, executes it with the batch runner, then
runs every job alone on the whole node (--measure-timeshare), so each ratio is measured side by side in one run
and the policies alternate (a load change hits them alike). Prints every repeat and each policy's median.
Profiles for the jobs must exist (`make run` makes them for the example window; `cosched profile` for others).

    .venv/bin/python bench/example_window.py [--repeats 3] [--policies agent,greedy] [--window FILE] [--model MODEL]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_argv(window: str, policy: str, runs: str, model: str | None = None) -> list[str]:
    """The ``cosched run`` of one repeat of one policy (time sharing measured in the same run)."""
    return [str(ROOT / ".venv" / "bin" / "cosched"), "run", window, "--policy", policy, "--measure-timeshare", "--json",
            "--runs", runs, *(["--model", model] if model else [])]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--policies", "--policy", dest="policies", default="greedy", help="comma-separated, run in turn")
    ap.add_argument("--window", default=str(ROOT / "examples" / "window.json"))
    ap.add_argument("--runs", default=str(ROOT / "runs" / "bench"))
    ap.add_argument("--model", default=None, metavar="MODEL",
                    help="the model file the agent policies plan with (default: the user's own for this node in "
                    "$COSCHED_HOME/models, else the shipped one)")
    args = ap.parse_args(argv)
    subprocess.run([sys.executable, str(ROOT / "examples" / "make-data.py"), ".cosched-example/text.txt"], check=True, cwd=ROOT)
    policies = [p for p in args.policies.split(",") if p]
    ratios: dict[str, list[float]] = {p: [] for p in policies}
    rows = []
    for k in range(args.repeats):
        for pol in policies:
            out = subprocess.run(run_argv(args.window, pol, args.runs, args.model), capture_output=True, text=True, cwd=ROOT)
            if out.returncode != 0:
                print(out.stderr, file=sys.stderr)
                return 1
            r = json.loads(out.stdout)
            groups = " | ".join("+".join(j["id"] for j in g["jobs"]) for g in r["groups"])
            ratios[pol].append(r["throughput_vs_timeshare"])
            rows.append(f"run {k + 1} {pol}: co-scheduled {r['total_s']:.2f} s, time sharing {r['timeshare_s']:.2f} s, "
                        f"ratio {r['throughput_vs_timeshare']:.3f}  [{groups}]")
    print(f"window {Path(args.window).name}{f', model {args.model}' if args.model else ''}, measured on this node ({args.repeats} repeats of {', '.join(policies)} in turn, "
          "time sharing measured in the same run):")
    print("\n".join(rows))
    for pol in policies:
        v = ratios[pol]
        print(f"{pol}: median throughput vs time sharing {statistics.median(v):.3f} [{min(v):.3f}, {max(v):.3f}] (measured)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
