#!/usr/bin/env python3
"""MEASURED: one stream of real programs on this node, run by time sharing, the real packing and continuous
co-scheduling side by side (issue 26, item 6).

The stream: 12 jobs, two of each of six programs (the example jobs of ``examples/``, their inputs scaled so that each
runs 5 s or more alone on this 2-CPU node when it is quiet), all submitted at 0, Cmax 2. ``--programs heldout``,
``heldout2`` and ``heldout3``: the same shape with six other programs each (``HELDOUT*_PROGRAMS``; which
choices each played a part in is said beside them), with their own profiles and calibration (their own ``--home``). Each mode is an online run
of ``cosched run STREAM.json --mode continuous --policy P`` (``env.real.online``: decided at every real job end,
started through the executor's launch path, pinned with ``numactl --physcpubind``):

* ``timeshare``: each job alone on the whole node, in order (time sharing, measured in the same repeat);
* ``packing``: Slurm's node sharing, for real: Cmax slots of floor(N/Cmax) CPUs (here CPU 0 and CPU 1), the next
  job in order started in the lowest free slot the moment one frees;
* ``rollout``: the default continuous policy, deciding each start on this node's calibrated node model.

On request (``--modes``): ``rollout-profiles``, rollout with the profiles' lengths only (``--no-learn-lengths``), and
``rollout-given``, rollout on the same stream whose jobs each say their own time alone (``solo_s``: the profile's time
alone times the job's k of ``--scale-seed``), what a user who knows each job's input could tell it.

Each repeat runs the three modes one after another, the order rotated between repeats (a load change hits each mode
in turn). Per repeat: each mode's makespan, throughput vs time sharing (the sum of the jobs' own times in that
repeat's time-sharing run over the mode's makespan), mean turnaround, continuous / packing (packing's makespan over
continuous'), and the 1-minute load average before and after. Then the median of the repeats with [min, max]. Every
mode's run is checked: every job ran once and exited 0, never more than Cmax at once, each job on the CPUs it was
given (read from the kernel while it ran), packing's jobs on its slots.

Needs the programs' profiles and the node's calibrated model (continuous decides on it): ``--setup`` runs the
documented steps for what is missing, ``cosched profile`` for each program and ``cosched calibrate`` (in ``--home``).
Writes ``OUT.json`` (every run's jobs, the repeats, the medians, the load, the command) and ``OUT.png`` (each mode's
jobs over time on their CPUs, from the median repeat).

    .venv/bin/python bench/stream_real.py --setup                       # profiles and calibration, once per node
    .venv/bin/python bench/stream_real.py --repeats 3 --wait-load 1.5   # the measurement
    .venv/bin/python bench/stream_real.py --dry-run                     # the stream, the commands, what is missing
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
COSCHED = str(ROOT / ".venv" / "bin" / "cosched")
DATA = ".cosched-example/text.txt"

#: The programs: the example jobs, inputs scaled to >= 5 s alone on this node (quiet). Name -> argv.
PROGRAMS: dict[str, list[str]] = {
    "sb-cpu-st-5s": ["sysbench", "cpu", "--threads=1", "--events=22000", "--time=0", "run"],
    "sb-cpu-mt-5s": ["sysbench", "cpu", "--threads=2", "--events=44000", "--time=0", "run"],
    "sng-matrix-5s": ["stress-ng", "--matrix", "1", "--matrix-ops", "25000", "--quiet"],
    "sb-mem-seq-5s": ["sysbench", "memory", "--threads=1", "--memory-block-size=1M", "--memory-total-size=160G",
                      "--time=0", "run"],
    "py-serial-5s": ["python3", "-c", "print(sum(i * i for i in range(60_000_000)))"],
    "py-io-pool-5s": ["python3", "-c", ("import time, concurrent.futures as f\ndef task(i):\n    time.sleep(0.2)\n"
                                        "    return sum(range(200_000))\nprint(sum(f.ThreadPoolExecutor(2).map(task, "
                                        "range(48))))")],
}
#: The stream's order (two jobs of each program, interleaved).
ORDER = ["sb-cpu-mt-5s", "sb-cpu-st-5s", "py-io-pool-5s", "sng-matrix-5s", "sb-mem-seq-5s", "py-serial-5s",
         "sb-cpu-st-5s", "sb-cpu-mt-5s", "sng-matrix-5s", "py-io-pool-5s", "py-serial-5s", "sb-mem-seq-5s"]
#: A second set, chosen before any measurement of it and never used to choose a rule or setting: programs the
#: examples do not have (compressors, an interpreter loop, FFT, a memory stream, two-worker page thrashing).
HELDOUT_PROGRAMS: dict[str, list[str]] = {
    "xz6-5s": ["sh", "-c", f"for i in 1 2 3 4 5 6; do xz -6 -T1 -c {ROOT / DATA}; done > /dev/null"],
    "bzip2-5s": ["sh", "-c", f"for i in $(seq 48); do bzip2 -9 -c {ROOT / DATA}; done > /dev/null"],
    "awk-loop-5s": ["awk", "BEGIN { s = 0; for (i = 0; i < 120000000; i++) s += i % 7; print s }"],
    "sng-fft-5s": ["stress-ng", "--cpu", "1", "--cpu-method", "fft", "--cpu-ops", "14000", "--quiet"],
    "sng-stream-5s": ["stress-ng", "--stream", "1", "--stream-ops", "66", "--quiet"],
    "sng-vm2-5s": ["stress-ng", "--vm", "2", "--vm-bytes", "64M", "--vm-ops", "420000", "--quiet"],
}
HELDOUT_ORDER = ["sng-vm2-5s", "awk-loop-5s", "xz6-5s", "sng-stream-5s", "bzip2-5s", "sng-fft-5s",
                 "awk-loop-5s", "sng-stream-5s", "sng-vm2-5s", "xz6-5s", "sng-fft-5s", "bzip2-5s"]
#: A third set, chosen after the held-out set had been measured (which had shaped rollout's rule for real nodes)
#: and before any measurement of its own.
HELDOUT2_PROGRAMS: dict[str, list[str]] = {
    "gzip9-5s": ["sh", "-c", f"for i in $(seq 80); do gzip -9 -c {ROOT / DATA}; done > /dev/null"],
    "sha256-5s": ["sh", "-c", f"for i in $(seq 900); do sha256sum {ROOT / DATA}; done > /dev/null"],
    "py-dict-5s": ["python3", "-c", "d = {}\nfor i in range(56_000_000): d[i % 100003] = i\nprint(len(d))"],
    "sng-int64-5s": ["stress-ng", "--cpu", "1", "--cpu-method", "int64", "--cpu-ops", "14000", "--quiet"],
    "sng-memcpy-5s": ["stress-ng", "--memcpy", "1", "--memcpy-ops", "1700", "--quiet"],
    "sng-cache2-5s": ["stress-ng", "--cache", "2", "--cache-ops", "4400000", "--quiet"],
}
HELDOUT2_ORDER = ["sha256-5s", "sng-memcpy-5s", "py-dict-5s", "sng-cache2-5s", "gzip9-5s", "sng-int64-5s",
                  "sng-memcpy-5s", "gzip9-5s", "sng-cache2-5s", "sha256-5s", "sng-int64-5s", "py-dict-5s"]
#: A fourth set (``heldout3``), new to the project on 2026-11-28, after every rule of rollout for real nodes was set,
#: and used for nothing but its own measurement: sizes timed once alone on a quiet node; the order is a seeded
#: shuffle of two of each (``random.Random(3).shuffle``, the first seed drawn), which put each pair side by side.
HELDOUT3_PROGRAMS: dict[str, list[str]] = {
    "sng-heapsort-5s": ["stress-ng", "--heapsort", "1", "--heapsort-ops", "32", "--quiet"],
    "sng-memrate-5s": ["stress-ng", "--memrate", "1", "--memrate-bytes", "64M", "--memrate-ops", "28", "--quiet"],
    "sng-bsearch2-5s": ["stress-ng", "--bsearch", "2", "--bsearch-ops", "2100", "--quiet"],
    "gcc-O2-5s": ["sh", "-c", f"for i in $(seq 18); do gcc -O2 -c {ROOT / 'native/src/simkernel/simgroup.c'} "
                  "-o /dev/null; done"],
    "cksum-5s": ["sh", "-c", f"for i in $(seq 3000); do cksum {ROOT / DATA}; done > /dev/null"],
    "py-regex-5s": ["python3", "-c", (f"import re\np = re.compile(r'(\\w+)\\s+(\\w+)ing\\b')\n"
                                      f"t = open('{ROOT / DATA}').read()\nprint(sum(len(p.findall(t)) for _ in range(9)))")],
}
HELDOUT3_ORDER = ["sng-memrate-5s", "sng-memrate-5s", "cksum-5s", "sng-heapsort-5s", "sng-heapsort-5s", "py-regex-5s",
                  "cksum-5s", "py-regex-5s", "sng-bsearch2-5s", "sng-bsearch2-5s", "gcc-O2-5s", "gcc-O2-5s"]
PROGRAM_SETS = {"example": (PROGRAMS, ORDER), "heldout": (HELDOUT_PROGRAMS, HELDOUT_ORDER),
                "heldout2": (HELDOUT2_PROGRAMS, HELDOUT2_ORDER), "heldout3": (HELDOUT3_PROGRAMS, HELDOUT3_ORDER)}
MODES = ["timeshare", "packing", "rollout"]
CONTINUOUS = "rollout"
#: On request (--modes): rollout deciding with the profiles' lengths only (--no-learn-lengths), the ablation of the
#: lengths an online run learns from its jobs that ended.
PROFILES_MODE = "rollout-profiles"
#: On request (--modes): rollout told each job's own time alone (its entry's solo_s: its program's profiled time
#: alone times the job's k of --scale-seed, 1 without), what a user who knows the job's input could say; a stream
#: file of its own (STREAM-given.json) in the runs directory.
GIVEN_MODE = "rollout-given"
#: --scale-seed S: each program's jobs do k times the work its profile was taken on (a program profiled on one input
#: and run on another), k drawn per program (in name order) by random.Random(S).choice(SCALES).
SCALES = (0.5, 1.0, 2.0, 3.0)


def scaled_argv(argv: list[str], k: float) -> list[str]:
    """``argv`` doing k times its work: the count after a stress-ng ``--*-ops`` flag, a shell loop's ``seq N`` or a
    Python ``range(N)`` (the first), times k; one line naming the program where none is found."""
    out = list(argv)
    for i, a in enumerate(out):
        if i > 0 and out[i - 1].startswith("--") and out[i - 1].endswith("-ops") and a.isdigit():
            out[i] = str(max(1, round(int(a) * k)))
            return out
        for pat in (r"seq (\d+)", r"range\((\d[\d_]*)\)"):
            m = re.search(pat, a)
            if m:
                n = max(1, round(int(m.group(1).replace("_", "")) * k))
                out[i] = a[:m.start(1)] + str(n) + a[m.end(1):]
                return out
    raise SystemExit(f"stream_real: no work count to scale in {shlex.join(argv)}")


def scales(programs: list[str], seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    return {p: rng.choice(SCALES) for p in sorted(programs)}


def stream_doc(cmax: int, programs: str = "example") -> dict[str, Any]:
    progs, order = PROGRAM_SETS[programs]
    seen: dict[str, int] = {}
    jobs = []
    for p in order:
        seen[p] = seen.get(p, 0) + 1
        jobs.append({"id": f"{p.removesuffix('-5s')}-{seen[p]}", "profile": p, "command": progs[p], "submit_s": 0})
    return {"jobs": jobs, "max_concurrency": cmax}


def say(line: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)


def load1() -> float:
    return round(os.getloadavg()[0], 2)


def mode_argv(stream: Path, mode: str, runs: Path) -> list[str]:
    """The command one mode of one repeat runs (an online run; its report on stdout)."""
    policy, extra = (CONTINUOUS, ["--no-learn-lengths"]) if mode == PROFILES_MODE else (
        (CONTINUOUS, []) if mode == GIVEN_MODE else (mode, []))
    if mode == GIVEN_MODE:
        stream = given_path(stream)
    return [COSCHED, "run", str(stream), "--mode", "continuous", "--policy", policy, *extra, "--runs", str(runs),
            "--json"]


def given_path(stream: Path) -> Path:
    return stream.with_name(f"{stream.stem}-given.json")


def given_stream(doc: dict[str, Any], ks: dict[str, float], home: Path) -> dict[str, Any]:
    """``doc`` with each job's solo_s: its program's stored profile's time alone on this node times its k."""
    os.environ["COSCHED_HOME"] = str(home)
    from env.node.discover import local_node_id
    from profiler.store import ProfileStore

    store, key = ProfileStore(), local_node_id()
    out = json.loads(json.dumps(doc))
    for j in out["jobs"]:
        prof = store.get(j["profile"], key)
        if prof is None:
            raise SystemExit(f"stream_real: {GIVEN_MODE} needs a stored profile of {j['profile']} (--setup)")
        j["solo_s"] = round(prof.duration_s * ks.get(j["profile"], 1.0), 3)
    return out


def run_mode(stream: Path, policy: str, runs: Path, env: dict[str, str], tag: str) -> dict[str, Any]:
    """One online run; its progress lines pass through, prefixed; returns its report."""
    proc = subprocess.Popen(mode_argv(stream, policy, runs), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, env=env)
    assert proc.stderr is not None and proc.stdout is not None
    errs = []
    for line in proc.stderr:
        errs.append(line.rstrip())
        say(f"{tag}: {line.rstrip()}")
    out = proc.stdout.read()
    if proc.wait() != 0:
        raise SystemExit(f"stream_real: {policy} failed (exit {proc.returncode}): {errs[-1] if errs else out[-300:]}")
    return json.loads(out)


def check_run(rep: dict[str, Any], policy: str, n_jobs: int, cmax: int, cpus: list[int]) -> list[str]:
    """What is wrong with one mode's run (empty: every job ran once and exited 0, at most Cmax at once, each job on
    the CPUs it was given; packing's jobs on its slots, time sharing's on the whole node)."""
    bad = []
    jobs = rep["jobs"]
    if len(jobs) != n_jobs or len({j["id"] for j in jobs}) != n_jobs:
        bad.append(f"{policy}: {len(jobs)} job records for {n_jobs} jobs")
    for j in jobs:
        if j["start_s"] is None or j["end_s"] is None or j["exit_code"] != 0 or j.get("note"):
            bad.append(f"{policy}: {j['id']} did not run once to exit 0 ({j})")
        if j.get("observed_cpus") is not None and sorted(j["observed_cpus"]) != sorted(j["cpus"]):
            bad.append(f"{policy}: {j['id']} ran on CPUs {j['observed_cpus']}, given {j['cpus']}")
    if rep["max_running"] > cmax:
        bad.append(f"{policy}: {rep['max_running']} jobs at once, above Cmax {cmax}")
    if policy == "packing":
        size = len(cpus) // cmax
        slots = [cpus[i * size:(i + 1) * size] for i in range(cmax)]
        off = [j["id"] for j in jobs if j["cpus"] not in slots]
        if off:
            bad.append(f"packing: {', '.join(off)} not on one of its slots {slots}")
    if policy == "timeshare":
        off = [j["id"] for j in jobs if sorted(j["cpus"]) != sorted(cpus)]
        if off or rep["max_running"] != 1:
            bad.append(f"timeshare: not each job alone on the whole node ({', '.join(off)})")
    return bad


def repeat_row(reps: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One repeat's figures: each mode's makespan, throughput vs time sharing (measured in this repeat), mean
    turnaround; continuous / packing."""
    ts_total = sum(j["end_s"] - j["start_s"] for j in reps["timeshare"]["jobs"]) if "timeshare" in reps else None
    row: dict[str, Any] = {}
    for pol, rep in reps.items():
        jobs = rep["jobs"]
        makespan = max(j["end_s"] for j in jobs) - min(j["submit_s"] for j in jobs)
        row[pol] = {"makespan_s": round(makespan, 3),
                    "throughput_vs_timeshare": round(ts_total / makespan, 4) if ts_total else None,
                    "mean_turnaround_s": round(statistics.fmean(j["end_s"] - j["submit_s"] for j in jobs), 3)}
    if "packing" in row and CONTINUOUS in row:
        row["continuous_over_packing"] = round(row["packing"]["makespan_s"] / row[CONTINUOUS]["makespan_s"], 4)
    return row


def med(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 4), "min": round(min(values), 4), "max": round(max(values), 4)}


def summary(rows: list[dict[str, Any]], modes: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pol in modes:
        out[pol] = {k: med([r[pol][k] for r in rows]) for k in ("makespan_s", "mean_turnaround_s")}
        tp = [r[pol]["throughput_vs_timeshare"] for r in rows if r[pol]["throughput_vs_timeshare"] is not None]
        out[pol]["throughput_vs_timeshare"] = med(tp) if tp else None
    ratios = [r["continuous_over_packing"] for r in rows if "continuous_over_packing" in r]
    if ratios:
        out["continuous_over_packing"] = med(ratios)
        out["continuous_at_least_packing"] = f"{sum(x >= 1.0 for x in ratios)} of {len(ratios)} repeats"
    return out


def picture(doc: dict[str, Any], path: Path) -> None:
    """Each mode's jobs over time on their CPUs (the median repeat by continuous / packing), measured."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = doc["repeats"]
    key = [r["row"].get("continuous_over_packing", r["row"][doc["modes"][0]]["makespan_s"]) for r in rows]
    pick = sorted(range(len(rows)), key=lambda i: key[i])[len(rows) // 2]
    rep = rows[pick]
    modes = doc["modes"]
    progs = sorted({j["profile"] for j in doc["stream"]["jobs"]})
    colours = {p: plt.get_cmap("tab10")(i % 10) for i, p in enumerate(progs)}
    ncpu = len(doc["cpus"])
    span = max(rep["row"][m]["makespan_s"] for m in modes)
    fig, axes = plt.subplots(len(modes), 1, figsize=(11, 1.2 + 1.0 * ncpu * len(modes)), sharex=True, squeeze=False)
    for ax, mode in zip(axes[:, 0], modes):
        for j in rep["runs"][mode]["jobs"]:
            for c in j["cpus"]:
                y = doc["cpus"].index(c)
                ax.barh(y, j["end_s"] - j["start_s"], left=j["start_s"], height=0.8, color=colours[j["profile"]],
                        edgecolor="black", linewidth=0.5)
                ax.text(j["start_s"] + 0.1, y, j["id"], va="center", fontsize=6, clip_on=True)
        r = rep["row"][mode]
        tp = r["throughput_vs_timeshare"]
        ax.set_title(f"{mode}: makespan {r['makespan_s']:.1f} s" + (f", {tp:.3f} x time sharing" if tp else "")
                     + f", mean turnaround {r['mean_turnaround_s']:.1f} s", fontsize=9, loc="left")
        ax.set_yticks(range(ncpu), [f"CPU {c}" for c in doc["cpus"]])
        ax.set_xlim(0, span * 1.01)
    axes[-1, 0].set_xlabel("seconds since the mode's run started (measured)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[p]) for p in progs]
    fig.legend(handles, progs, loc="upper right", fontsize=7, ncol=3)
    fig.suptitle(f"MEASURED on {doc['node']} ({doc['date']}), repeat {pick + 1} of {len(rows)} (median continuous / "
                 f"packing), Cmax {doc['max_concurrency']}, load {rep['load_before']}-{rep['load_after']}\n"
                 f"{doc['command']}", fontsize=8, x=0.01, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- setup: the documented steps for what the node lacks

def known_programs(home: Path) -> tuple[set[str], set[str], Path]:
    """(programs with a stored profile, programs the calibrated model holds, its file)."""
    os.environ["COSCHED_HOME"] = str(home)
    from env.calibration.store import model_path
    from env.node.discover import local_node_id
    from profiler.store import ProfileStore

    key = local_node_id()
    profiled = {p.name for p in ProfileStore().list(key)}
    path = model_path(key)
    calibrated = set()
    if path.is_file():
        calibrated = {j["params"]["name"] for j in json.loads(path.read_text())["jobs"]}
    return profiled, calibrated, path


def node_model_info(home: Path) -> dict[str, Any] | None:
    """What continuous decided on: the node model file, when it was calibrated, its held-out error and programs."""
    _, calibrated, path = known_programs(home)
    if not path.is_file():
        return None
    prov = json.loads(path.read_text())["provenance"]
    return {"file": os.path.relpath(path, ROOT), "created_at": prov.get("created_at"), "heldout": prov.get("heldout"),
            "programs": sorted(calibrated)}


def setup(home: Path, env: dict[str, str], programs: str) -> None:
    progs = PROGRAM_SETS[programs][0]
    profiled, calibrated, path = known_programs(home)
    for k, (name, argv) in enumerate(progs.items()):
        if name in profiled:
            say(f"{name}: profile stored")
            continue
        say(f"profiling {name} ({k + 1}/{len(progs)}): solo on the whole node, then on one core (load {load1()})")
        subprocess.run([COSCHED, "profile", "--name", name, "--", *argv], check=True, stdout=subprocess.DEVNULL, cwd=ROOT,
                       env=env)
    if set(progs) <= calibrated:
        say(f"the node model {path} holds every program")
        return
    say(f"calibrating the node model on the six programs (load {load1()}): cosched calibrate --jobs ... --probes 6 "
        "--heldout 4 --repeats 3")
    subprocess.run([COSCHED, "calibrate", "--jobs", ",".join(progs), "--probes", "6", "--heldout", "4", "--repeats",
                    "3"], check=True, cwd=ROOT, env=env)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated stream policies, rotated each repeat")
    ap.add_argument("--cmax", type=int, default=2)
    ap.add_argument("--programs", choices=sorted(PROGRAM_SETS), default="example",
                    help="the built-in stream's programs: the examples' (default) or a held-out set")
    ap.add_argument("--stream", default=None, metavar="FILE", help="another stream document (default: the built-in one)")
    ap.add_argument("--home", default=None, help="the COSCHED_HOME of the profiles and the node model (default: "
                                                 ".cosched-home/stream-real, -PROGRAMS for a held-out set)")
    ap.add_argument("--runs", default=None, help="where the runs go (default: runs/stream-real, -PROGRAMS for a "
                                                 "held-out set)")
    ap.add_argument("--out", default=None, help="OUT.json and OUT.png (default: docs/figures/stream-real-cmaxCMAX)")
    ap.add_argument("--scale-seed", type=int, default=None, metavar="S",
                    help="each program's jobs do k x its profiled work, k drawn per program from "
                    f"{', '.join(map(str, SCALES))} by seed S (profiles stay of the base work)")
    ap.add_argument("--setup", action="store_true", help="profile and calibrate what is missing, then stop")
    ap.add_argument("--dry-run", action="store_true", help="print the stream and the commands; run nothing")
    ap.add_argument("--wait-load", type=float, default=None, metavar="L",
                    help="before measuring, wait (polling each minute) for the 1-minute load to fall below L")
    ap.add_argument("--wait-max", type=float, default=1800, metavar="S", help="wait at most S seconds (then run anyway)")
    args = ap.parse_args(argv)
    suffix = "" if args.programs == "example" else f"-{args.programs}"
    home = Path(args.home or ROOT / ".cosched-home" / f"stream-real{suffix}").resolve()
    runs = Path(args.runs or ROOT / "runs" / f"stream-real{suffix}").resolve()
    out = Path(args.out or ROOT / "docs" / "figures" / f"stream-real-cmax{args.cmax}")
    modes = [m for m in args.modes.split(",") if m]
    env = {**os.environ, "COSCHED_HOME": str(home)}
    home.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, str(ROOT / "examples" / "make-data.py"), DATA], check=True, cwd=ROOT)
    doc_stream = json.loads(Path(args.stream).read_text()) if args.stream else stream_doc(args.cmax, args.programs)
    ks: dict[str, float] = {}
    if args.scale_seed is not None and not args.setup:  # the profiles (--setup) stay of the base work
        ks = scales(sorted({j["profile"] for j in doc_stream["jobs"]}), args.scale_seed)
        for j in doc_stream["jobs"]:
            j["command"] = scaled_argv(j["command"], ks[j["profile"]])
        say(f"--scale-seed {args.scale_seed}: each program's jobs do k x its profiled work: " +
            ", ".join(f"{p} x{k:g}" for p, k in ks.items()))
    doc_stream["max_concurrency"] = args.cmax
    runs.mkdir(parents=True, exist_ok=True)
    stream = runs / "stream.json"
    stream.write_text(json.dumps(doc_stream, indent=1))
    if GIVEN_MODE in modes and not args.setup:
        given_path(stream).write_text(json.dumps(given_stream(doc_stream, ks, home), indent=1))
    if args.setup:
        setup(home, env, args.programs)
        return 0
    if args.dry_run:
        profiled, calibrated, path = known_programs(home)
        progs = sorted({j.get("profile") or j["id"] for j in doc_stream["jobs"]})
        print(f"stream {stream}: {len(doc_stream['jobs'])} jobs, Cmax {args.cmax}; home {home}")
        for j in doc_stream["jobs"]:
            print(f"  {j['id']}: {' '.join(j['command'])!r}")
        for m in modes:
            print(f"{m}: {' '.join(mode_argv(stream, m, runs / m))}")
        print(f"profiles missing: {', '.join(p for p in progs if p not in profiled) or 'none'}")
        print(f"not in the node model {path}: {', '.join(p for p in progs if p not in calibrated) or 'none'}"
              + ("  (bench/stream_real.py --setup)" if not set(progs) <= calibrated else ""))
        return 0
    from env.node.discover import discover, local_node_id

    node = discover()
    cpus = sorted(node.cpus)
    if args.wait_load is not None:
        t = time.monotonic()
        while load1() >= args.wait_load and time.monotonic() - t < args.wait_max:
            say(f"waiting for the 1-minute load ({load1()}) to fall below {args.wait_load} "
                f"({int(time.monotonic() - t)} s of {int(args.wait_max)})")
            time.sleep(60)
        say(f"load {load1()}: measuring" + (" (not below the bar: the load is recorded beside each repeat)"
                                            if load1() >= args.wait_load else ""))
    command = " ".join([".venv/bin/python", "bench/stream_real.py",
                        *map(shlex.quote, argv if argv is not None else sys.argv[1:])])
    repeats = []
    bad_all = []
    for k in range(args.repeats):
        order = modes[k % len(modes):] + modes[:k % len(modes)]
        rec: dict[str, Any] = {"repeat": k + 1, "order": order, "load_before": load1(), "runs": {}, "load": {}}
        for pol in order:
            l0 = load1()
            say(f"repeat {k + 1}/{args.repeats}: {pol} (load {l0})")
            rep = run_mode(stream, pol, runs / pol, env, f"{k + 1}/{pol}")
            rec["load"][pol] = [l0, load1()]
            rec["runs"][pol] = {key: rep[key] for key in ("run_dir", "policy", "decided_on", "decisions", "max_running",
                                                          "metrics", "solo_source", "notes", "jobs")}
            bad = check_run(rep, pol, len(doc_stream["jobs"]), args.cmax, cpus)
            bad_all += bad
            for b in bad:
                say(f"CHECK FAILED: {b}")
            say(f"repeat {k + 1}: {pol} makespan {rep['metrics']['makespan_s']} s")
        rec["load_after"] = load1()
        rec["row"] = repeat_row({m: rec["runs"][m] for m in modes})
        repeats.append(rec)
        say(f"repeat {k + 1}: " + ", ".join(f"{m} {rec['row'][m]['makespan_s']:.1f} s" for m in modes)
            + (f"; continuous / packing {rec['row']['continuous_over_packing']:.3f}"
               if "continuous_over_packing" in rec["row"] else "") + f" (load {rec['load_before']}-{rec['load_after']})")
    doc = {"kind": "measured", "what": "a stream of real programs, time sharing vs the real packing vs continuous",
           "date": time.strftime("%Y-%m-%d"), "node": local_node_id(), "cpus": cpus, "max_concurrency": args.cmax,
           "command": command, "modes": modes, "scale_seed": args.scale_seed, "continuous_policy": CONTINUOUS, "stream": doc_stream,
           "throughput_definition": "sum of the jobs' own times in the same repeat's time-sharing run / the mode's "
                                    "makespan",
           "node_model": node_model_info(home), "checks_failed": bad_all, "summary": summary([r["row"] for r in repeats], modes), "repeats": repeats}
    out.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{out}.json").write_text(json.dumps(doc, indent=1))
    picture(doc, Path(f"{out}.png"))
    print(render(doc))
    say(f"wrote {out}.json and {out}.png")
    return 1 if bad_all else 0


def render(doc: dict[str, Any]) -> str:
    s, lines = doc["summary"], []
    lines.append(f"MEASURED on {doc['node']} ({doc['date']}), {len(doc['stream']['jobs'])} jobs, Cmax "
                 f"{doc['max_concurrency']}, median of {len(doc['repeats'])} repeats [min, max]: {doc['command']}")
    lines.append("| mode | makespan s | throughput vs time sharing | mean turnaround s |")
    lines.append("| --- | ---: | ---: | ---: |")
    f = lambda m: "-" if m is None else f"{m['median']:.3f} [{m['min']:.3f}, {m['max']:.3f}]"
    f1 = lambda m: f"{m['median']:.1f} [{m['min']:.1f}, {m['max']:.1f}]"
    for m in doc["modes"]:
        lines.append(f"| {m} | {f1(s[m]['makespan_s'])} | {f(s[m]['throughput_vs_timeshare'])} | "
                     f"{f1(s[m]['mean_turnaround_s'])} |")
    if "continuous_over_packing" in s:
        lines.append(f"continuous ({doc['continuous_policy']}) / packing: {f(s['continuous_over_packing'])}; "
                     f">= 1 in {s['continuous_at_least_packing']}")
    for r in doc["repeats"]:
        lines.append(f"repeat {r['repeat']} (order {', '.join(r['order'])}; load {r['load_before']}-{r['load_after']}): "
                     + ", ".join(f"{m} {r['row'][m]['makespan_s']:.1f} s" for m in doc["modes"]))
    nm = doc.get("node_model")
    if nm and nm.get("heldout"):
        h = nm["heldout"]
        lines.append(f"continuous decided on {nm['file']} (calibrated {nm['created_at']}): held-out median abs error "
                     f"{h['median_abs_error_pct']:.1f} % (n {h['n']}), noise floor {h['noise_floor']:.1f} %")
    if doc["checks_failed"]:
        lines.append("CHECKS FAILED: " + "; ".join(doc["checks_failed"]))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
