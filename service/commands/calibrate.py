"""``cosched calibrate``: fit the node model from the node's own measurements; refit from every run; report drift.

* ``cosched calibrate [--backend real|sim] [--node local|sim:FILE] [--probes N] [--noise SD] [--out FILE]``:
  microbenchmarks, each job's curves, N co-run probes where the fit is least sure, held-out co-runs (their pairs
  never probed) and R probes repeated (the noise floor beside the held-out error); writes
  the node-model file (``--node sim:FILE`` accepts it), stores every measurement in the calibration data
  (``env.calibration.store``) and draws predicted vs measured (FILE.png).
* ``--update``: refit the model at ``--out`` from everything measured on its node so far (probes, held-out
  co-runs, ``cosched run`` groups); ``--report``: the error over time (drift) and the worst-predicted groups.

With ``--backend sim`` the node is black-box hardware (``env.sim.measuring``): the calibrator sees only the
measuring protocol; every figure is simulated. Nothing is written unless the whole calibration succeeded.

The command line only: the work is ``env.calibration.workflow``'s (this module picks the measuring backend, a real
node's from ``env.real.probes``, and prints, draws and writes the output).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from env.calibration.store import model_path as default_model_path
from env.errors import InputError
from service.chart import calibration_scatter, drift_chart
from service.output import emit


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help="fit the node model from the node's own measurements",
                       description="Measure the node (microbenchmarks, each job's interference curves, co-run probes "
                       "chosen where the fit is least sure), fit every parameter of the contention model, check it on "
                       "held-out co-runs and write the node-model file (use it as --node sim:FILE).")
    p.add_argument("--backend", choices=("real", "sim"), default="real", help="real: this node (default); sim: a simulated node as black-box hardware")
    p.add_argument("--node", default=None, help="local (real) or sim:NAME / sim:FILE (sim; default sim:reference)")
    p.add_argument("--probes", type=int, default=None, metavar="N", help="job-with-job co-run probes (default: 2 per job + 30)")
    p.add_argument("--noise", type=float, default=0.0, metavar="SD", help="sim: each run's time x exp(N(0, SD)), seeded (default 0)")
    p.add_argument("--heldout", type=int, default=40, metavar="K", help="held-out co-runs the fit is judged on (default 40; "
                   "a third of the job pairs is kept for them and never probed)")
    p.add_argument("--repeats", type=int, default=8, metavar="R", help="probed co-runs measured once more: the noise floor "
                   "shown beside the held-out error (default 8; 0: none)")
    p.add_argument("--jobs", default=None, help="calibrate on these of the node's jobs, comma-separated (default: all)")
    p.add_argument("--seed", type=int, default=0, help="seed of the probe choice, the held-out groups and sim noise (default 0)")
    p.add_argument("--out", default=None, metavar="FILE", help="the node-model file (default $COSCHED_HOME/node-models/NODE.json)")
    p.add_argument("--update", action="store_true", help="refit the model at --out from everything measured on its node so far")
    p.add_argument("--report", action="store_true", help="show the prediction error over time and the worst-predicted groups")
    p.add_argument("--remeasure", action="store_true", help="real: measure every job's curves and the microbenchmarks again "
                   "(default: reuse what 'cosched profile' and 'cosched node --bench' stored, measure only what is missing)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON document")
    p.set_defaults(handler=run)


def _backend(args: argparse.Namespace):
    """(the MeasuringBackend, its node key in the calibration data)."""
    if args.backend == "real":
        if args.node not in (None, "local"):
            raise InputError(f"--backend real calibrates this node: --node local, not {args.node!r}")
        if args.noise:
            raise InputError("--noise is for the simulated node; a real node's noise is its own")
        try:
            from env.real.probes import local_backend  # the real node's MeasuringBackend
        except ImportError:
            raise InputError("the real measuring backend is not in this build yet (env.real.probes): "
                             "use --backend sim --node sim:NAME for now") from None
        from env.node.discover import local_node_id

        return local_backend(), local_node_id()
    from env.sim.nodes import load_node
    from env.sim.measuring import sim_measuring_backend
    from env.sim.variants import model_for_node

    node = load_node(args.node or "sim:reference")
    if not node.simulated:
        raise InputError(f"--backend sim needs a simulated node (sim:NAME or sim:FILE), not {args.node!r}")
    return sim_measuring_backend(model_for_node(node), noise_sd=args.noise, seed=args.seed), node.name


def run(args: argparse.Namespace) -> int:
    if args.update and args.report:
        raise InputError("give --update or --report, not both")
    if args.update or args.report:
        return _update_or_report(args)
    from env.calibration.calibrate import CalibrationConfig
    from env.calibration.workflow import calibrate_node, calibration_document

    if args.probes is not None and args.probes < 1:
        raise InputError(f"--probes must be at least 1, not {args.probes}: the fit is judged and refined on co-runs")
    if args.heldout < 1:
        raise InputError(f"--heldout must be at least 1, not {args.heldout}")
    if args.repeats < 0:
        raise InputError(f"--repeats must be 0 or more, not {args.repeats}")
    if not 0.0 <= args.noise <= 1.0:
        raise InputError("--noise must be between 0 and 1 (a log-normal standard deviation)")
    backend, key = _backend(args)
    out = Path(args.out) if args.out else default_model_path(key)
    console = Console(stderr=True)
    jobs = [j for j in args.jobs.split(",") if j] if args.jobs else None
    stored = None
    if args.backend == "real" and not args.remeasure:
        from env.real.profiling import stored_measurements as stored
    cfg = CalibrationConfig(probes=args.probes, heldout=args.heldout, repeats=args.repeats, seed=args.seed, jobs=jobs,
                            noise_sd=args.noise if args.backend == "sim" else None)
    result, store_path = calibrate_node(backend, key, out, cfg, lambda m: console.print(m, highlight=False), stored)
    png = out.with_suffix(".png")
    calibration_scatter(result.heldout, png, result.model, simulated=args.backend == "sim")
    doc = calibration_document(result, out, png, key, store_path)
    emit(doc, args.json, lambda: render(doc))
    return 0


def render(doc: dict[str, Any]) -> None:
    c = Console()
    kind = "simulated" if doc["simulated"] else "measured"
    h = doc["heldout"]
    c.print(f"[bold]node model of {doc['node']}[/] ({len(doc['jobs'])} jobs, figures {kind})")
    if h:
        nf = doc.get("noise_floor")
        floor = (f"; noise floor {nf['median_abs_error_pct']:.1f} % (p90 {nf['p90_abs_error_pct']:.1f} %, {nf['n']} probed "
                 "co-runs repeated)") if nf else "; noise floor not measured (--repeats 0)"
        apart = {True: ", no pair of them probed", False: ", pairs also probed (too few job pairs to keep apart)"}.get(
            h.get("disjoint_from_probes"), "")
        c.print(f"held-out co-runs: median abs error {h['median_abs_error_pct']:.1f} %, p90 {h['p90_abs_error_pct']:.1f} % "
                f"(n {h['n']}{apart}){floor}; {kind}", soft_wrap=True)
    c.print(f"co-run probes used: {doc['probes']}; profiling runs (generator, probe, microbenchmarks, solo): {doc['profiling_runs']}")
    d = doc["node_seconds_detail"]
    c.print(f"node time: {doc['node_seconds']:.0f} s = {doc['node_seconds'] / 3600:.2f} h ({kind}: profiling {d['profiling']:.0f} s, "
            f"probes {d['probes']:.0f} s; held-out check {d['heldout']:.0f} s more)")
    if doc["fit_rms_log"] is not None:
        c.print(f"fit: RMS of log(predicted / measured) over the fitted runs {doc['fit_rms_log']:.3f}")
    if doc.get("node_seconds_reused"):
        c.print(f"this calibration measured {doc['node_seconds_this_run']:.0f} s of node time (held-out check included); "
                f"{doc['node_seconds_reused']:.0f} s of stored curves and microbenchmarks reused ({kind})")
    c.print(f"written: {doc['out']}" + (f"; picture: {doc['scatter_png']}" if doc["scatter_png"] else ""))
    c.print(f"use it: cosched schedule ... {doc['use']}")


def _model_file(args: argparse.Namespace) -> Path:
    """The node-model file --update and --report read: --out, else the node's default place."""
    if args.out:
        return Path(args.out)
    if args.backend == "real":
        from env.node.discover import local_node_id

        return default_model_path(local_node_id())
    from env.sim.nodes import load_node

    return default_model_path(load_node(args.node or "sim:reference").name)


def _update_or_report(args: argparse.Namespace) -> int:
    from env.calibration.workflow import drift_document, load_calibrated, stored_runs, update_model

    path = _model_file(args)
    model, key = load_calibrated(path)
    rows, store_path = stored_runs(key)
    if args.report:
        doc = drift_document(rows, key, path)
        png = path.with_name(path.stem + "-drift.png")
        drift_chart(rows, png, simulated=model.provenance.backend == "sim")
        doc["drift_png"] = str(png)
        emit(doc, args.json, lambda: render_drift(doc))
        return 0
    console = Console(stderr=True)
    doc = update_model(path, model, key, rows, store_path, lambda m: console.print(m, highlight=False))
    emit(doc, args.json, lambda: _render_update(doc))
    return 0


def _render_update(doc: dict[str, Any]) -> None:
    u = doc["update"]
    c = Console()
    c.print(f"refitted {doc['out']} from {u['runs_used']} stored runs (update {doc['updates']})")
    b, a = u["before"], u["after_in_sample"]
    c.print(f"{u['checked_groups']} held-out / run groups: median abs error {b['median_abs_error_pct']:.1f} % as predicted "
            f"-> {a['median_abs_error_pct']:.1f} % after the refit (in-sample: they are now fitted)")


def render_drift(doc: dict[str, Any]) -> None:
    c = Console()
    c.print(f"[bold]prediction error over time on {doc['node']}[/] ({doc['runs']} stored runs)")
    for b in doc["over_time"]:
        c.print(f"  {b['at'][:19]}  {b['source']:8}  n {b['n']:3}  median abs error {b['median_abs_error_pct']:.1f} %")
    c.print("worst-predicted groups:")
    for w in doc["worst"]:
        c.print(f"  {' + '.join(w['jobs'])}: measured {w['measured_s']:.1f} s, predicted {w['predicted_s']:.1f} s "
                f"({w['abs_error_pct']:.1f} %, {w['source']})")
    c.print(f"picture: {doc['drift_png']}")


__all__ = ["register"]
if __name__ == "__main__":  # pragma: no cover
    sys.exit("run it as: cosched calibrate")
