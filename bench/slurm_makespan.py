#!/usr/bin/env python3
"""A stream of real programs through Slurm four ways on the local cluster (measured):

* one at a time: plain Slurm, partition `batch` (no oversubscription), each job the whole node;
* packing: plain Slurm, the co-scheduling partition without --cosched (OverSubscribe=FORCE:4, no controller, no
  placement): Slurm starts up to 4 jobs at once on the node's CPUs, each free to use all of them;
* cosched groups: `sbatch --cosched`, `cosched slurm run --mode groups --once`: windows planned into groups, each
  group released together with its placements, the next when the node is free again;
* cosched continuous: `cosched slurm run --mode continuous --once`: at each job's end a decision for the node starts
  held jobs beside those still running, pinned to the CPUs decided (one job per CPU at most); each program's length
  learned from its jobs that ended (``cosched-continuous-profiles``, on request: the profiles' lengths only;
  ``cosched-continuous-given``, on request: each job says its own time alone in its comment, ``solo_s`` = its
  length factor x --target, the length it was sized for, as a user who knows the job's input could say).

The programs do fixed work (a Python loop, sysbench cpu, xz of a fixed file, a memory stream), each sized once at
the start so that it runs about --target seconds alone on one CPU of this machine (``--sizes`` gives the sizes of an
earlier run, for a rerun of the same work). Every job asks for the whole node (-c CPUs) in every mode, so only the
order, grouping and placement differ. Makespan: the first job's start to the last job's end, from the jobs' own
clocks; each mode is run --repeats times, interleaved, and the median and [min, max] are printed with the ratios to
one at a time. The picture (--png) shows each mode's median run: each job as a bar over time, one lane per job
running at once.

The profiles the planner and the decisions use are taken on runs of 1/--profile-div of each program's work (the
program's character, at a fraction of its length). Continuous mode decides with rollout where the COSCHED_HOME has a
calibrated node model of this machine (--calibrate, or --home with one), else with packing's rule (the controller says
which).
Starts its own cluster (`cosched slurm up --nodes N`, port 16870); needs `make setup` and `make native`.

    .venv/bin/python bench/slurm_makespan.py [--repeats 3] [--jobs 12] [--target 25] [--json OUT] [--png OUT.png]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PORT = 16870
MEMBENCH = ROOT / "native" / "build" / "cosched-membench"

# name -> (command with {n}, the work unit's n for the sizing run): each does n units of fixed work on one thread.
PROGRAMS: dict[str, tuple[str, int]] = {
    "py": ("python3 -c 's=0\nfor i in range({n}): s+=i'", 2_000_000),
    "sb": ("sysbench cpu --events={n} --threads=1 --time=0 run >/dev/null", 600),
    "xz": ("i=0; while [ $i -lt {n} ]; do xz -2 -T1 -c {data} >/dev/null; i=$((i+1)); done", 1),
    # membench takes at most 1000 reps a run: n reps in runs of up to 1000
    "mem": (f"n={{n}}; while [ $n -gt 0 ]; do r=$(( n < 1000 ? n : 1000 )); {MEMBENCH} stream --mb 64 --reps $r "
            ">/dev/null || exit 1; n=$((n - r)); done", 4),
}
STREAM = ["py", "mem", "sb", "xz", "mem", "py", "xz", "sb", "py", "mem", "xz", "sb"]
LENGTHS = [1.0, 0.8, 1.2, 1.0, 1.2, 0.8, 0.9, 1.1, 1.2, 0.9, 1.1, 0.8]  # x --target, so jobs differ in length
MODES = ["one-at-a-time", "packing", "cosched-groups", "cosched-continuous"]
# on request (--modes): continuous mode deciding with the profiles' lengths only (--no-learn-lengths), the ablation of
# the lengths the controller learns from the jobs that ended
ALL_MODES = [*MODES, "cosched-continuous-profiles", "cosched-continuous-given"]


def sh(argv: list[str], env: dict[str, str], **kw) -> str:  # type: ignore[no-untyped-def]
    r = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=ROOT, check=False, **kw)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} failed: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}")
    return r.stdout


def command(prog: str, n: int, data: Path) -> str:
    return PROGRAMS[prog][0].format(n=n, data=data)


def size_programs(target: float, data: Path) -> dict[str, int]:
    """Each program's units for about ``target`` seconds alone, from one timed run of its sizing unit."""
    out = {}
    for prog, (_, unit) in PROGRAMS.items():
        t0 = time.monotonic()
        subprocess.run(["sh", "-c", command(prog, unit, data)], check=True, cwd=ROOT)
        out[prog] = max(1, round(unit * target / (time.monotonic() - t0)))
    return out


def submit(env: dict[str, str], work: Path, tag: str, cmd: str, name: str, extra: list[str]) -> int:
    script = work / f"{tag}.sh"
    script.write_text("#!/bin/sh\n"
                      'echo "start=$(date +%s.%N) cpus=$(grep Cpus_allowed_list /proc/self/status | cut -f2) '
                      'node=$SLURMD_NODENAME"\n'
                      f"{cmd} || exit 1\n"  # a program that fails fails the job (wait_done says so)
                      'echo "end=$(date +%s.%N)"\n')
    return int(sh(["sbatch", "--parsable", "-J", name, "-o", str(work / f"{tag}.out"), *extra, str(script)],
                  env).strip().split(";")[0])


def wait_done(env: dict[str, str], ids: list[int], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        jobs = {int(j["job_id"]): j for j in json.loads(sh(["squeue", "--json"], env))["jobs"]}
        if all(jobs[i]["job_state"] in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT") for i in ids):
            bad = [i for i in ids if jobs[i]["job_state"] != "COMPLETED"]
            if bad:
                raise SystemExit(f"jobs {bad} did not complete")
            return
        time.sleep(0.5)
    raise SystemExit(f"the stream did not finish within {timeout:.0f} s")


def read_jobs(work: Path, tags: list[str], progs: list[str]) -> list[dict]:
    out = []
    for tag, prog in zip(tags, progs):
        words = {}
        for line in (work / f"{tag}.out").read_text().splitlines():
            for w in line.split():
                k, sep, v = w.partition("=")
                if sep:
                    words[k] = v
        out.append({"tag": tag, "program": prog, "start": float(words["start"]), "end": float(words["end"]),
                    "cpus": words.get("cpus", ""), "node": words.get("node", "")})
    return out


def run_mode(mode: str, rep: int, env: dict[str, str], work: Path, data: Path, sizes: dict[str, int], cpus: int,
             state: Path, cmax: int, target: float) -> dict:
    tags = [f"{mode}-{rep}-{k:02d}" for k in range(len(STREAM))]
    extra = {"one-at-a-time": ["-p", "batch", "-c", str(cpus)], "packing": ["-p", "cosched", "-c", str(cpus)]}.get(
        mode, ["--cosched", "-c", str(cpus)])
    own = (lambda f: ["--comment", f"solo_s={f * target:.1f}"]) if mode.endswith("-given") else (lambda f: [])
    ids = [submit(env, work, t, command(p, max(1, round(sizes[p] * f)), data), p, [*extra, *own(f)])
           for t, p, f in zip(tags, STREAM, LENGTHS)]
    ctl_log = ""
    if mode.startswith("cosched-"):
        cdir = work / f"ctl-{mode}-{rep}"
        sh([sys.executable, "-m", "service.cli", "slurm", "run", "--once", "--poll", "0.3", "--state-dir", str(cdir),
            "--placement-dir", str(state / "placements"), "--mode", mode.split("-")[1], "--window", "6",
            "--cmax", str(cmax), *(["--no-learn-lengths"] if mode.endswith("-profiles") else [])], env,
           timeout=len(STREAM) * target * 10)
        ctl_log = (cdir / "controller" / "controller.log").read_text()
    wait_done(env, ids, timeout=len(STREAM) * target * 10)
    jobs = read_jobs(work, tags, STREAM)
    t0 = min(j["start"] for j in jobs)
    return {"makespan_s": max(j["end"] for j in jobs) - t0, "jobs": [
        {**j, "start": round(j["start"] - t0, 3), "end": round(j["end"] - t0, 3)} for j in jobs],
        "decided_with": next((ln.split("deciding with ")[1] for ln in ctl_log.splitlines() if "deciding with" in ln),
                             None),
        # the controller's starts whose decision its policy's guard made as packing, by the order it took
        "guard_starts": {k: sum(f"decided as packing ({k})" in ln for ln in ctl_log.splitlines())
                         for k in ("packing", "packing's slots, longest first")}}


def lanes(jobs: list[dict]) -> list[int]:
    """A lane per job, the lowest free at its start (jobs running at once get different lanes)."""
    free_at: list[float] = []
    out = [0] * len(jobs)
    for k in sorted(range(len(jobs)), key=lambda k: jobs[k]["start"]):
        j = jobs[k]
        lane = next((i for i, t in enumerate(free_at) if t <= j["start"] + 1e-6), None)
        if lane is None:
            free_at.append(0.0)
            lane = len(free_at) - 1
        free_at[lane] = j["end"]
        out[k] = lane
    return out


def picture(doc: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"py": "#3b7dd0", "sb": "#d08a3b", "xz": "#5aa469", "mem": "#b04a8b"}
    modes = [m for m in ALL_MODES if m in doc["runs"]]
    fig, axes = plt.subplots(len(modes), 1, figsize=(9, 1.3 + 1.25 * len(modes)), sharex=True, squeeze=False)
    for ax, mode in zip(axes[:, 0], modes):
        runs = doc["runs"][mode]
        med = sorted(runs, key=lambda r: r["makespan_s"])[len(runs) // 2]
        ls = lanes(med["jobs"])
        for j, lane in zip(med["jobs"], ls):
            ax.barh(lane, j["end"] - j["start"], left=j["start"], color=colors[j["program"]], edgecolor="white")
            ax.text(j["start"] + 0.5, lane, f"{j['program']} {j['cpus']}", va="center", fontsize=6, color="white")
        ax.set_yticks(range(max(ls) + 1))
        ax.set_ylabel("lane")
        ax.set_title(f"{mode}: makespan {med['makespan_s']:.1f} s (median run of {len(runs)})", fontsize=9, loc="left")
    axes[-1, 0].set_xlabel("seconds since the first start (labels: program, CPUs allowed)")
    fig.suptitle(f"{len(STREAM)} jobs on one Slurm node of this machine's {doc['cpus_per_node']} CPUs (measured; "
                 f"{doc['load']})", fontsize=9)
    fig.text(0.01, 0.005, "bench/slurm_makespan.py " + doc["argv"], fontsize=6)
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    fig.savefig(path, dpi=120)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--target", type=float, default=25.0, help="seconds each program runs alone (20-60; default 25)")
    ap.add_argument("--sizes", default=None, help="the programs' sizes of an earlier run, JSON ({\"py\": N, ...})")
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated, of " + ", ".join(ALL_MODES) +
                    f" (default {','.join(MODES)})")
    ap.add_argument("--cmax", type=int, default=None, help="jobs at once for cosched (default: the node's CPUs)")
    ap.add_argument("--home", type=Path, default=None, help="a COSCHED_HOME to use (its calibrated node model lets "
                    "continuous mode decide with rollout); default: a new one")
    ap.add_argument("--profile-div", type=int, default=10, help="profiles taken on 1/N of each program's work")
    ap.add_argument("--calibrate", action="store_true", help="calibrate this machine's node model on the profiled "
                    "programs first (a few minutes), so that continuous mode decides with rollout")
    ap.add_argument("--json", default=None, help="write the whole measurement (every job) to this file")
    ap.add_argument("--png", default=None, help="the picture of each mode's median run (matplotlib)")
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if any(m not in ALL_MODES for m in modes) or not modes:
        raise SystemExit(f"--modes takes some of {', '.join(ALL_MODES)}, not {args.modes!r}")
    if not 5 <= args.target <= 120 or args.repeats < 1:
        raise SystemExit("--target must be 5..120 seconds and --repeats at least 1")
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="cosched-bench-") as d:
        base = Path(d)
        work = base / "work"
        work.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
        env["COSCHED_HOME"] = str(args.home or base / "home")
        state = base / "cluster"
        data = base / "seq.txt"
        data.write_text("".join(f"{i}\n" for i in range(400_000)))
        sizes = json.loads(args.sizes) if args.sizes else size_programs(args.target, data)
        print(f"sizes: {json.dumps(sizes)}", file=sys.stderr)
        up = json.loads(sh([sys.executable, "-m", "service.cli", "slurm", "up", "--nodes", "1", "--port", str(PORT),
                            "--state-dir", str(state), "--json"], env, timeout=180))
        env["SLURM_CONF"] = up["slurm_conf"]
        cpus = up["cpus_per_node"]
        runs: dict[str, list[dict]] = {m: [] for m in modes}
        try:
            if up["plugin"] is None:
                raise SystemExit("cosched's SPANK plugin is not built: run 'make native'")
            for name in PROGRAMS:
                print(f"profiling {name} (1/{args.profile_div} of its work)", file=sys.stderr)
                n = max(1, round(sizes[name] * 1.0 / args.profile_div))
                sh([sys.executable, "-m", "service.cli", "profile", "--name", name, "--", "sh", "-c",
                    command(name, n, data)], env, timeout=900)
            if args.calibrate:
                print("calibrating the node model (co-runs of the profiled programs)", file=sys.stderr)
                sh([sys.executable, "-m", "service.cli", "calibrate", "--probes", "12", "--heldout", "6", "--repeats", "0"],
                   env, timeout=3600)
            for rep in range(args.repeats):
                for m in modes:
                    r = run_mode(m, rep, env, work, data, sizes, cpus, state, args.cmax or cpus, args.target)
                    runs[m].append(r)
                    print(f"repeat {rep + 1}: {m}: {r['makespan_s']:.2f} s (load {os.getloadavg()[0]:.1f})",
                          file=sys.stderr)
        finally:
            subprocess.run([sys.executable, "-m", "service.cli", "slurm", "down", "--state-dir", str(state)], env=env,
                           cwd=ROOT, capture_output=True, timeout=180, check=False)
    load1 = os.getloadavg()[0]
    spans = {m: [r["makespan_s"] for r in runs[m]] for m in modes}
    base_med = statistics.median(spans["one-at-a-time"]) if "one-at-a-time" in spans else None
    solo = {}  # each program's run time in one-at-a-time mode (alone on the node), median over its jobs
    for r in runs.get("one-at-a-time", []):
        for j in r["jobs"]:
            solo.setdefault(j["program"], []).append(j["end"] - j["start"])
    doc = {"label": "measured", "node": f"1 Slurm node, {cpus} real CPUs (this machine)", "cpus_per_node": cpus,
           "stream": STREAM, "lengths": LENGTHS, "sizes": sizes, "repeats": args.repeats,
           "argv": " ".join(shlex.quote(a) for a in sys.argv[1:]) + (
               "" if args.sizes else f" --sizes {shlex.quote(json.dumps(sizes, separators=(',', ':')))}"),
           "load": f"1-min load average {load0:.1f} at the start, {load1:.1f} at the end (machine shared)",
           "solo_s_median": {p: round(statistics.median(v), 1) for p, v in solo.items()},
           "makespan_s": {m: {"median": statistics.median(v), "min": min(v), "max": max(v), "all": v}
                          for m, v in spans.items()},
           "speedup_vs_one_at_a_time": {m: base_med / statistics.median(v) for m, v in spans.items()} if base_med else {},
           # packing's makespan over each mode's, repeat by repeat (the runs of one repeat are side by side)
           "vs_packing": {m: {"median": statistics.median(r := [p / x for p, x in zip(spans["packing"], v)]),
                              "min": min(r), "max": max(r), "all": r} for m, v in spans.items()} if "packing" in spans else {},
           "continuous_decided_with": next((r["decided_with"] for r in runs.get("cosched-continuous", [])
                                            if r["decided_with"]), "the controller's policy (rollout)"),
           "runs": runs}
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1))
    if args.png:
        picture(doc, args.png)
    print(f"{len(STREAM)} jobs ({', '.join(STREAM)}) through Slurm on {doc['node']} (measured; median of "
          f"{args.repeats} [min, max]; {doc['load']})")
    print(f"  programs alone (one at a time), median s: {doc['solo_s_median']}")
    for m in modes:
        s = doc["makespan_s"][m]
        ratio = doc["speedup_vs_one_at_a_time"].get(m)
        print(f"  {m:19s} makespan {s['median']:7.1f} s [{s['min']:.1f}, {s['max']:.1f}]" +
              (f"   vs one at a time {ratio:.2f}x" if ratio else "") + (
                  f"   packing's / its {doc['vs_packing'][m]['median']:.3f} [{doc['vs_packing'][m]['min']:.3f}, "
                  f"{doc['vs_packing'][m]['max']:.3f}]" if doc["vs_packing"] else ""))
    print(f"  continuous decided with: {doc['continuous_decided_with']}")
    print(f"  rerun: .venv/bin/python bench/slurm_makespan.py {doc['argv']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
