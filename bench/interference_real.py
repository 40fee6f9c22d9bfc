#!/usr/bin/env python3
"""Interference curves on this node, measured for real and repeated: how large the effects are next to
the noise (medians of repeats with their spread; every figure is measured).

    python3 bench/interference_real.py [--jobs examples/calibration-jobs.json] [--names a,b] [--repeats 3]

For the reference probe: its time alone and next to the pressure generator at levels 0.25..1 (the probe's
own sensitivity: the generator's reach on this node). For each named job: ``env.measure.interference``'s curves
(sensitivity by level, pressure on the probe) through the real MeasuringBackend, ``--repeats`` times.
Needs ``make native`` and, for the example jobs, ``python3 examples/make-data.py .cosched-example/text.txt``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from env.node.discover import discover  # noqa: E402
from env.measure.interference import BUBBLE_LEVELS, curve_cpus, measure_interference  # noqa: E402
from env.plan.models import Window  # noqa: E402
from env.measure.probing import BUBBLE, PROBE, Placement  # noqa: E402
from env.real.probes import RealMeasuringBackend  # noqa: E402


def fig(values: list[float]) -> str:
    med = statistics.median(values)
    return f"{med:.3f} [{min(values):.3f}-{max(values):.3f}] ({100 * (max(values) - min(values)) / med:.0f} % spread)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", default="examples/calibration-jobs.json", help="a window file with the jobs' commands")
    ap.add_argument("--names", default="sng-stream,sng-matrix,sb-mem-rnd", help="comma-separated job ids of --jobs")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    window = Window.model_validate_json(Path(args.jobs).read_text())
    commands = {j.id: list(j.command or []) for j in window.jobs}
    names = [n for n in args.names.split(",") if n]
    unknown = [n for n in names if n not in commands]
    if unknown:
        print(f"unknown job(s) {unknown}: {args.jobs} has {sorted(commands)}", file=sys.stderr)
        return 2
    node = discover()
    be = RealMeasuringBackend(node, {n: commands[n] for n in names})
    cpus, partner = curve_cpus(node)
    t0 = time.monotonic()
    print(f"node {node.name}: {len(node.cpus)} CPUs; job on {cpus}, generator / probe on {partner}; "
          f"medians of {args.repeats} repeats [min-max], measured")
    alone = [be.measure([Placement(PROBE, partner)]).times_s[0] for _ in range(args.repeats)]
    print(f"probe alone: {fig(alone)} s")
    for level in BUBBLE_LEVELS:
        with_gen = [be.measure([Placement(PROBE, partner), Placement(BUBBLE, cpus, level=level)]).times_s[0] for _ in range(args.repeats)]
        print(f"probe next to the generator at {level:g}: {fig(with_gen)} s, slowdown {statistics.median(with_gen) / statistics.median(alone):.3f}")
    for name in names:
        curves = [measure_interference(be, name) for _ in range(args.repeats)]
        print(f"{name}: alone on {cpus} {fig([c.alone_s for c in curves])} s")
        for i, level in enumerate(BUBBLE_LEVELS):
            print(f"  sensitivity at {level:g}: {fig([c.sensitivity[i].slowdown for c in curves])}")
        print(f"  pressure on the probe: {fig([c.pressure for c in curves])}")
    print(f"node time {be.node_seconds:.0f} s in {be.measurements} measurements; wall {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
