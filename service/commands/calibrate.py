"""``cosched calibrate``: fit the node model from the node's own measurements; refit from every run; report drift.

* ``cosched calibrate [--backend real|sim] [--node local|sim:FILE] [--probes N] [--noise SD] [--out FILE]``:
  microbenchmarks, each job's curves, N co-run probes where the fit is least sure, held-out co-runs; writes
  the node-model file (``--node sim:FILE`` accepts it), stores every measurement in the calibration data
  (``env.calibration.store``) and draws predicted vs measured (FILE.png).
* ``--update``: refit the model at ``--out`` from everything measured on its node so far (probes, held-out
  co-runs, ``cosched run`` groups); ``--report``: the error over time (drift) and the worst-predicted groups.

With ``--backend sim`` the node is black-box hardware (``env.sim.measuring``): the calibrator sees only the
measuring protocol; every figure is simulated. Nothing is written unless the whole calibration succeeded.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from env.calibration.store import model_path as default_model_path
from env.errors import InputError, RunError
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
    p.add_argument("--heldout", type=int, default=40, metavar="K", help="held-out co-runs the fit is judged on (default 40)")
    p.add_argument("--jobs", default=None, help="calibrate on these of the node's jobs, comma-separated (default: all)")
    p.add_argument("--seed", type=int, default=0, help="seed of the probe choice, the held-out groups and sim noise (default 0)")
    p.add_argument("--out", default=None, metavar="FILE", help="the node-model file (default $COSCHED_HOME/node-models/NODE.json)")
    p.add_argument("--update", action="store_true", help="refit the model at --out from everything measured on its node so far")
    p.add_argument("--report", action="store_true", help="show the prediction error over time and the worst-predicted groups")
    p.add_argument("--remeasure", action="store_true", help="real: measure every job's curves and the microbenchmarks again "
                   "(default: reuse what 'cosched profile' and 'cosched node --bench' stored, measure only what is missing)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON document")
    p.set_defaults(handler=run)


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _check_writable(path: Path) -> None:
    """Before hours of measuring: the model file can be written where asked (nothing is left behind)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        probe = path.with_name(f".{path.name}.{os.getpid()}.check")
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise InputError(f"cannot write the node model to {path}: {exc.strerror or exc} (choose another --out)") from None


def _backend(args: argparse.Namespace):
    """(the MeasuringBackend, its node key in the calibration data)."""
    if args.backend == "real":
        if args.node not in (None, "local"):
            raise InputError(f"--backend real calibrates this node: --node local, not {args.node!r}")
        if args.noise:
            raise InputError("--noise is for the simulated node; a real node's noise is its own")
        try:
            from env.real.probes import local_backend  # engineer B's real MeasuringBackend (branch nm-real)
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
    from env.calibration.calibrate import CalibrationConfig, calibrate
    from env.calibration.store import CalibrationStore

    if args.probes is not None and args.probes < 1:
        raise InputError(f"--probes must be at least 1, not {args.probes}: the fit is judged and refined on co-runs")
    if args.heldout < 1:
        raise InputError(f"--heldout must be at least 1, not {args.heldout}")
    if not 0.0 <= args.noise <= 1.0:
        raise InputError("--noise must be between 0 and 1 (a log-normal standard deviation)")
    backend, key = _backend(args)
    out = Path(args.out) if args.out else default_model_path(key)
    _check_writable(out)
    store = CalibrationStore()  # opened (and checked) before hours of measuring, written only at the end
    console = Console(stderr=True)
    jobs = [j for j in args.jobs.split(",") if j] if args.jobs else None
    stored_profiles, stored_bench = (None, None)
    if args.backend == "real" and not args.remeasure:
        from env.real.profiling import stored_measurements

        stored_profiles, stored_bench = stored_measurements(key)
    cfg = CalibrationConfig(probes=args.probes, heldout=args.heldout, seed=args.seed, jobs=jobs,
                            noise_sd=args.noise if args.backend == "sim" else None,
                            stored_profiles=stored_profiles, stored_bench=stored_bench)
    result = calibrate(backend, cfg, progress=lambda m: console.print(m, highlight=False))
    model = result.model
    if result.fit_problem:
        store.add(key, result.records, "calibrate", str(out.resolve()))  # measured: kept for a later --update
        raise RunError(f"the node model of {key} did not fit: {result.fit_problem}; nothing written to {out} "
                       f"(the measurements are kept in {store.path})")
    _write_atomic(out, model.model_dump_json(indent=1) + "\n")
    model_ref = str(out.resolve())
    store.add(key, result.records, "calibrate", model_ref)
    store.add(key, result.heldout_records, "heldout", model_ref)
    png = out.with_suffix(".png")
    calibration_scatter(result.heldout, png, model, simulated=args.backend == "sim")
    doc = fit_document(model, out, png, key, store.path)
    ns = result.node_seconds
    doc["node_seconds_this_run"] = ns["profiling"] + ns["probes"] + ns["heldout"]
    doc["node_seconds_reused"] = ns.get("reused", 0.0)
    emit(doc, args.json, lambda: render(doc))
    return 0


def fit_document(model, out: Path, png: Path | None, key: str, store_path: Path) -> dict[str, Any]:
    prov = model.provenance
    h = prov.heldout
    return {
        "node": key, "backend": prov.backend, "simulated": prov.backend == "sim", "noise_sd": prov.noise_sd,
        "heldout": {"median_abs_error_pct": h.median_abs_error_pct, "p90_abs_error_pct": h.p90_abs_error_pct, "n": h.n} if h else None,
        "probes": prov.corun_probes, "profiling_runs": prov.profiling_runs,
        "node_seconds": prov.node_seconds_profiling + prov.node_seconds_probes,
        "node_seconds_detail": {"profiling": prov.node_seconds_profiling, "probes": prov.node_seconds_probes,
                                "heldout": prov.node_seconds_heldout},
        "fit_rms_log": prov.fit_rms_log, "jobs": [j.name for j in model.jobs], "updates": prov.updates,
        "out": str(out), "scatter_png": str(png) if png else None, "calibration_data": str(store_path),
        "use": f"--node sim:{out.resolve()}",
    }


def render(doc: dict[str, Any]) -> None:
    c = Console()
    kind = "simulated" if doc["simulated"] else "measured"
    h = doc["heldout"]
    c.print(f"[bold]node model of {doc['node']}[/] ({len(doc['jobs'])} jobs, figures {kind})")
    if h:
        c.print(f"held-out co-runs: median abs error {h['median_abs_error_pct']:.1f} %, p90 {h['p90_abs_error_pct']:.1f} % "
                f"(n {h['n']}; {kind})")
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


def _load_model(args: argparse.Namespace):
    from env.sim.nodes import load_node
    from env.sim.world import world_for

    if args.out:
        path = Path(args.out)
    else:
        if args.backend == "real":
            from env.node.discover import local_node_id

            path = default_model_path(local_node_id())
        else:
            path = default_model_path(load_node(args.node or "sim:reference").name)
    if not path.exists():
        raise InputError(f"no node model at {path}: run 'cosched calibrate' first (or give --out FILE)")
    node = load_node(f"sim:{path.resolve()}")
    model = world_for(node).model
    if model is None:
        raise InputError(f"{path} is a node spec, not a node model: give the file 'cosched calibrate' wrote")
    prov = model.provenance
    key = prov.measured_node_id if prov.backend == "real" else prov.measured_node
    if not key:
        raise InputError(f"{path} was not calibrated (its provenance is {prov.source!r}): nothing measured to refit from")
    return path, model, key


def _update_or_report(args: argparse.Namespace) -> int:
    from env.calibration.store import CalibrationStore

    path, model, key = _load_model(args)
    store = CalibrationStore()
    rows = store.runs(key)
    if not rows:
        raise InputError(f"the calibration data {store.path} has nothing measured on {key}")
    if args.report:
        doc = drift_document(rows, key, path)
        png = path.with_name(path.stem + "-drift.png")
        drift_chart(rows, png, simulated=model.provenance.backend == "sim")
        doc["drift_png"] = str(png)
        emit(doc, args.json, lambda: render_drift(doc))
        return 0
    from env.calibration.calibrate import CalibrationConfig, error_summary, predict_records, refit

    console = Console(stderr=True)
    checked = [r for r in rows if r.source in ("heldout", "run")]
    new, _, used = refit(model, [r.record for r in rows], CalibrationConfig(), progress=lambda m: console.print(m, highlight=False))
    after = predict_records(new, [r.record for r in checked])
    before = [r.predicted_s for r in checked]
    def errs(preds):
        return [abs(p - r.measured_s) / r.measured_s * 100 for p, r in zip(preds, checked) if p is not None and r.measured_s]
    _write_atomic(path, new.model_dump_json(indent=1) + "\n")
    doc = fit_document(new, path, None, key, store.path)
    doc["update"] = {"runs_used": used, "checked_groups": len(checked),
                     "before": error_summary(errs(before)).model_dump(), "after_in_sample": error_summary(errs(after)).model_dump()}
    emit(doc, args.json, lambda: _render_update(doc))
    return 0


def _render_update(doc: dict[str, Any]) -> None:
    u = doc["update"]
    c = Console()
    c.print(f"refitted {doc['out']} from {u['runs_used']} stored runs (update {doc['updates']})")
    b, a = u["before"], u["after_in_sample"]
    c.print(f"{u['checked_groups']} held-out / run groups: median abs error {b['median_abs_error_pct']:.1f} % as predicted "
            f"-> {a['median_abs_error_pct']:.1f} % after the refit (in-sample: they are now fitted)")


def drift_document(rows, key: str, path: Path) -> dict[str, Any]:
    judged = [r for r in rows if r.source in ("heldout", "run") and r.abs_error_pct is not None]
    batches: list[dict[str, Any]] = []
    for r in judged:  # consecutive rows of one source and one model make a batch (a calibration, a run)
        if not batches or batches[-1]["source"] != r.source or batches[-1]["model"] != r.model or \
                (r.at - batches[-1]["_last"]).total_seconds() > 600:
            batches.append({"source": r.source, "model": r.model, "at": r.at.isoformat(), "errors": [], "_last": r.at})
        batches[-1]["errors"].append(r.abs_error_pct)
        batches[-1]["_last"] = r.at
    over_time = [{"at": b["at"], "source": b["source"], "n": len(b["errors"]),
                  "median_abs_error_pct": statistics.median(b["errors"])} for b in batches]
    worst = sorted(judged, key=lambda r: -(r.abs_error_pct or 0))[:5]
    return {"node": key, "model": str(path), "runs": len(rows), "over_time": over_time,
            "worst": [{"at": r.at.isoformat(), "source": r.source, "jobs": [p.job for p in r.record.group],
                       "measured_s": r.measured_s, "predicted_s": r.predicted_s, "abs_error_pct": r.abs_error_pct}
                      for r in worst]}


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
