#!/usr/bin/env python3
"""One window through Slurm three ways on one node with this machine's real CPUs (measured):

* cosched: `sbatch --cosched`, job_submit.lua holds the jobs, `cosched slurm run --once` releases each planned
  group together with its placement (the SPANK plugin applies it);
* one at a time: plain Slurm, partition `batch` (no oversubscription), each job the whole node;
* packing: plain Slurm, the co-scheduling partition without --cosched (OverSubscribe=FORCE:4, no controller,
  no placement): Slurm starts up to 4 jobs at once on the node's CPUs, as task/affinity binds them.

Every job asks for the whole node (-c CPUs) in all three, so only the grouping and placement differ. The
makespan is the first job's start to the last job's end, from the jobs' own clocks; each mode is run
--repeats times (interleaved), and the median and [min, max] are printed with the ratios to one at a time.
Starts its own 1-node cluster (`cosched slurm up`, port 16870) and profiles the programs in a temporary
COSCHED_HOME; needs `make setup` and `make native`.

    .venv/bin/python bench/slurm_makespan.py [--repeats 3] [--json] [--png slurm_makespan.png]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PORT = 16870

PROGRAMS = {
    "sb": "sysbench cpu --events=1000 --threads=1 --time=0 run >/dev/null",
    "py": "python3 -c 's=0\nfor i in range(3_000_000): s+=i'",
    "nap": "python3 -c 'import time; time.sleep(1)'",
    "xz": "xz -2 -T1 -c {data} >/dev/null",
}
WINDOW = ["sb", "nap", "py", "xz", "nap", "sb", "xz", "py"]


def sh(argv: list[str], env: dict[str, str], **kw) -> str:  # type: ignore[no-untyped-def]
    r = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=ROOT, **kw)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} failed: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}")
    return r.stdout


def submit(env: dict[str, str], work: Path, tag: str, prog: str, data: Path, extra: list[str]) -> int:
    script = work / f"{tag}.sh"
    out = work / f"{tag}.out"
    script.write_text(f"#!/bin/sh\ndate +start=%s.%N\n{PROGRAMS[prog].format(data=data)}\ndate +end=%s.%N\n")
    return int(sh(["sbatch", "--parsable", "-J", prog, "-o", str(out), *extra, str(script)], env).strip().split(";")[0])


def wait_done(env: dict[str, str], ids: list[int], timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        jobs = {int(j["job_id"]): j for j in json.loads(sh(["squeue", "--json"], env))["jobs"]}
        if all(jobs[i]["job_state"] in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT") for i in ids):
            bad = [i for i in ids if jobs[i]["job_state"] != "COMPLETED"]
            if bad:
                raise SystemExit(f"jobs {bad} did not complete")
            return
        time.sleep(0.2)
    raise SystemExit("the window did not finish in time")


def makespan(work: Path, tags: list[str]) -> float:
    starts, ends = [], []
    for tag in tags:
        vals = dict(line.split("=", 1) for line in (work / f"{tag}.out").read_text().splitlines() if "=" in line)
        starts.append(float(vals["start"]))
        ends.append(float(vals["end"]))
    return max(ends) - min(starts)


def run_mode(mode: str, rep: int, env: dict[str, str], work: Path, data: Path, cpus: int, state: Path) -> float:
    tags = [f"{mode}-{rep}-{k}" for k in range(len(WINDOW))]
    extra = {"cosched": ["--cosched", "-c", str(cpus)], "one-at-a-time": ["-p", "batch", "-c", str(cpus)],
             "packing": ["-p", "cosched", "-c", str(cpus)]}[mode]
    ids = [submit(env, work, t, p, data, extra) for t, p in zip(tags, WINDOW)]
    if mode == "cosched":
        sh([sys.executable, "-m", "service.cli", "slurm", "run", "--once", "--poll", "0.2", "--state-dir", str(state),
            "--window", str(len(WINDOW))], env, timeout=600)
    wait_done(env, ids)
    return makespan(work, tags)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--png", default=None, help="also draw the makespans (matplotlib)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="cosched-bench-") as d:
        base = Path(d)
        work = base / "work"
        work.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
        env["COSCHED_HOME"] = str(base / "home")
        state = base / "cluster"
        up = json.loads(sh([sys.executable, "-m", "service.cli", "slurm", "up", "--nodes", "1", "--port", str(PORT),
                            "--state-dir", str(state), "--json"], env, timeout=180))
        env["SLURM_CONF"] = up["slurm_conf"]
        try:
            if up["plugin"] is None:
                raise SystemExit("cosched's SPANK plugin is not built: run 'make native'")
            data = base / "seq.txt"
            data.write_text("".join(f"{i}\n" for i in range(400_000)))
            for name, cmd in PROGRAMS.items():
                print(f"profiling {name}", file=sys.stderr)
                sh([sys.executable, "-m", "service.cli", "profile", "--name", name, "--", "sh", "-c", cmd.format(data=data)], env,
                   timeout=300)
            modes = ["one-at-a-time", "packing", "cosched"]
            spans: dict[str, list[float]] = {m: [] for m in modes}
            for rep in range(args.repeats):
                for m in modes:
                    spans[m].append(run_mode(m, rep, env, work, data, up["cpus_per_node"], state))
                    print(f"repeat {rep + 1}: {m}: {spans[m][-1]:.2f} s", file=sys.stderr)
        finally:
            subprocess.run([sys.executable, "-m", "service.cli", "slurm", "down", "--state-dir", str(state)], env=env,
                           cwd=ROOT, capture_output=True, timeout=180)
    base_med = statistics.median(spans["one-at-a-time"])
    doc = {"label": "measured", "node": f"1 Slurm node, {up['cpus_per_node']} real CPUs", "window": WINDOW,
           "repeats": args.repeats,
           "makespan_s": {m: {"median": statistics.median(v), "min": min(v), "max": max(v), "all": v} for m, v in spans.items()},
           "speedup_vs_one_at_a_time": {m: base_med / statistics.median(v) for m, v in spans.items()}}
    if args.png:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 3.5))
        meds = [statistics.median(spans[m]) for m in modes]
        errs = [[meds[i] - min(spans[m]) for i, m in enumerate(modes)], [max(spans[m]) - meds[i] for i, m in enumerate(modes)]]
        ax.bar(modes, meds, yerr=errs, capsize=6, color=["#999999", "#d08a3b", "#3b7dd0"])
        ax.set_ylabel("makespan (s), median and range")
        ax.set_title(f"one window of {len(WINDOW)} jobs through Slurm (measured, {args.repeats} repeats)")
        fig.tight_layout()
        fig.savefig(args.png, dpi=120)
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    print(f"one window of {len(WINDOW)} jobs ({', '.join(WINDOW)}) through Slurm on {doc['node']} (measured; "
          f"median of {args.repeats} [min, max])")
    for m in modes:
        s = doc["makespan_s"][m]
        print(f"  {m:14s} makespan {s['median']:6.2f} s [{s['min']:.2f}, {s['max']:.2f}]   "
              f"speedup vs one at a time {doc['speedup_vs_one_at_a_time'][m]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
