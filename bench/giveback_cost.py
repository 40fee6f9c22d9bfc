#!/usr/bin/env python3
"""MEASURED: what giving CPUs back costs a running job on this node, against what the node model assumes.

The node model (``StreamNode.give_back``) lets a running job keep fewer CPUs and carry on as if it had been started
on them: its work left, at the rate the model gives a job started on the kept CPUs. A real program fixed its thread
count when it started (OpenMP: as many threads as the CPUs it was allowed then), so after the give-back its threads
share the kept CPUs, two or more to one. This bench measures the difference, for each program:

* ``full``: the program started on every CPU of the node (``numactl --physcpubind``), alone: T_full;
* ``kept``: the same command started on the CPUs a give-back keeps (``env.plan.allocate.dealt``: half of them,
  dealt over the NUMA domains), alone: T_kept, what the model's rate after a give-back stands for;
* ``giveback``: the program started on every CPU, and at T_full / 2 every thread of its session re-pinned onto the
  kept CPUs (``profiler.repin.repin``, the runner's own code): T_gb.

The model's prediction for the give-back run is g + (1 - g / T_full) * T_kept (g: when it gave back); the bench
prints T_gb over that (1: the model is right; above: the give-back costs more than the model says). A run is
stopped at ``--cap`` times its prediction and reported as at least that (">"). Median of ``--repeats`` [min, max],
the three runs of a program side by side in each repeat. Writes ``--json`` (every run).

    .venv/bin/python bench/giveback_cost.py --repeats 3 --json docs/figures/giveback_cost.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from env.node.cpulist import format_cpulist  # noqa: E402
from env.node.discover import discover  # noqa: E402
from env.plan.allocate import dealt  # noqa: E402
from profiler.repin import repin  # noqa: E402

OMP = str(ROOT / "native" / "build" / "cosched-ompbarrier")

#: name -> (argv, environment): programs whose threads wait differently. Work is fixed (sweeps, events, ops).
PROGRAMS: dict[str, tuple[list[str], dict[str, str]]] = {
    "omp-barrier (OMP_WAIT_POLICY unset)": ([OMP, "--sweeps", "20000"], {}),
    "omp-barrier (OMP_WAIT_POLICY=passive)": ([OMP, "--sweeps", "20000"], {"OMP_WAIT_POLICY": "passive"}),
    "sysbench cpu (shared event counter)": (["sysbench", "cpu", "--threads=NCPU", "--events=20000", "--time=0", "run"], {}),
    "stress-ng matrix (independent workers)": (["stress-ng", "--matrix", "NCPU", "--matrix-ops", "12000", "--quiet"], {}),
}


def _run(argv: list[str], env: dict[str, str], cpus: list[int], cap_s: float, keep: list[int] | None = None,
         at_s: float | None = None) -> tuple[float, bool]:
    """(wall seconds, finished): started pinned to ``cpus``; re-pinned onto ``keep`` at ``at_s``; killed at cap_s."""
    t0 = time.monotonic()
    p = subprocess.Popen(["numactl", f"--physcpubind={format_cpulist(cpus)}", "--", *argv], env={**os.environ, **env},
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    if keep is not None and at_s is not None:
        try:
            p.wait(timeout=at_s)
        except subprocess.TimeoutExpired:
            repin(p.pid, keep)
    try:
        p.wait(timeout=max(0.0, cap_s - (time.monotonic() - t0)))
        if p.returncode != 0:
            raise SystemExit(f"giveback_cost: {' '.join(argv)} exited {p.returncode}")
        return time.monotonic() - t0, True
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        p.wait()
        return time.monotonic() - t0, False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cap", type=float, default=200.0, help="stop a give-back run at this many times its prediction")
    ap.add_argument("--json", type=Path, help="write every run here")
    a = ap.parse_args()
    if not Path(OMP).is_file():
        print(f"giveback_cost: {OMP} is missing: run 'make -C native'", file=sys.stderr)
        return 2
    node = discover()
    full = list(node.cpus)
    keep = sorted(dealt(node, full, max(1, len(full) // 2)))
    n = str(len(full))
    runs = []
    for r in range(a.repeats):
        for name, (argv, env) in PROGRAMS.items():
            argv = [x.replace("NCPU", n) for x in argv]
            t_full, _ = _run(argv, env, full, 600)
            t_kept, _ = _run(argv, env, keep, 600)
            g = t_full / 2
            pred = g + (1 - g / t_full) * t_kept
            t_gb, finished = _run(argv, env, full, a.cap * pred, keep=keep, at_s=g)
            runs.append({"repeat": r + 1, "program": name, "argv": argv, "env": env, "full_cpus": full, "kept_cpus": keep,
                         "t_full_s": round(t_full, 3), "t_kept_s": round(t_kept, 3), "gave_back_at_s": round(g, 3),
                         "predicted_s": round(pred, 3), "t_giveback_s": round(t_gb, 3), "finished": finished,
                         "ratio": round(t_gb / pred, 3), "load": os.getloadavg()[0]})
            print(f"repeat {r + 1} {name}: full {t_full:.2f} s, kept {t_kept:.2f} s, give-back "
                  f"{'' if finished else '> '}{t_gb:.2f} s against {pred:.2f} s predicted", file=sys.stderr, flush=True)
    print(f"MEASURED on {node.name} ({len(full)} CPUs; kept {format_cpulist(keep)}), median of {a.repeats} [min, max]:")
    print("| program | full s | kept s | give-back s | predicted s | give-back / predicted |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name in PROGRAMS:
        rs = [x for x in runs if x["program"] == name]

        def med(k: str) -> str:
            v = [x[k] for x in rs]
            return f"{statistics.median(v):.2f} [{min(v):.2f}, {max(v):.2f}]"
        cut = "" if all(x["finished"] for x in rs) else f" (stopped at {a.cap:g}x in {sum(not x['finished'] for x in rs)}: at least)"
        print(f"| {name} | {med('t_full_s')} | {med('t_kept_s')} | {med('t_giveback_s')} | {med('predicted_s')} | "
              f"{med('ratio')}{cut} |")
    if a.json:
        a.json.write_text(json.dumps({"measured": True, "node": node.name, "command": " ".join(sys.argv),
                                      "date": time.strftime("%Y-%m-%d %H:%M"), "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
