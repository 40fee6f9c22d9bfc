"""What ``cosched calibrate`` does, minus parsing and printing: calibrate a node and write its node-model file,
refit a model from everything stored (``--update``), read the error over time (``--report``).

The measuring backend comes from the caller (this layer sits below ``env.real``: a real node's backend and its
stored measurements are passed in). Nothing is written unless the whole calibration succeeded; every measurement
is kept in the calibration data (``env.calibration.store``) either way.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

# Through its module, not by name: whoever replaces calibrate() (a wrapper, a test) is called here too.
import env.calibration.calibrate as fitting
from env.calibration.calibrate import CalibrationConfig, CalibrationResult, Progress, error_summary
from env.calibration.store import CalibrationStore, StoredRun
from env.errors import InputError, RunError
from env.measure.probing import MeasuringBackend
from env.sim.nodemodel import NodeModel
from profiler.interference import InterferenceProfile, NodeBench

#: A real node's stored curves and microbenchmarks by node key (``env.real.profiling.stored_measurements``).
StoredMeasurements = Callable[[str], tuple[dict[str, InterferenceProfile], NodeBench | None]]


def write_model(path: Path, model: NodeModel) -> None:
    """The node-model file, atomically: a reader sees the old model or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(model.model_dump_json(indent=1) + "\n")
    os.replace(tmp, path)


def check_writable(path: Path) -> None:
    """Before hours of measuring: the model file can be written where asked (nothing is left behind)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        probe = path.with_name(f".{path.name}.{os.getpid()}.check")
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise InputError(f"cannot write the node model to {path}: {exc.strerror or exc} (choose another --out)") from None


def calibrate_node(backend: MeasuringBackend, key: str, out: Path, cfg: CalibrationConfig, progress: Progress,
                   stored: StoredMeasurements | None = None) -> tuple[CalibrationResult, Path]:
    """Measure and fit the node behind ``backend`` (``key``: its name in the calibration data), write the model to
    ``out`` and store every measurement; ``stored``: reuse what the node measured before. (the result, the
    calibration data's path). A fit that does not fit writes no model and raises ``RunError``."""
    check_writable(out)
    store = CalibrationStore()  # opened (and checked) before hours of measuring, written only at the end
    if stored is not None:
        profiles, bench = stored(key)
        cfg = replace(cfg, stored_profiles=profiles, stored_bench=bench)
    result = fitting.calibrate(backend, cfg, progress=progress)
    if result.fit_problem:
        store.add(key, result.records, "calibrate", str(out.resolve()))  # measured: kept for a later --update
        raise RunError(f"the node model of {key} did not fit: {result.fit_problem}; nothing written to {out} "
                       f"(the measurements are kept in {store.path})")
    write_model(out, result.model)
    model_ref = str(out.resolve())
    store.add(key, result.records, "calibrate", model_ref)
    store.add(key, result.heldout_records, "heldout", model_ref)
    return result, store.path


def calibration_document(result: CalibrationResult, out: Path, png: Path | None, key: str,
                         store_path: Path) -> dict[str, Any]:
    """A fresh calibration's document: the fit's, with the node time this run measured and the time it reused."""
    doc = fit_document(result.model, out, png, key, store_path)
    ns = result.node_seconds
    doc["node_seconds_this_run"] = ns["profiling"] + ns["probes"] + ns["heldout"]
    doc["node_seconds_reused"] = ns.get("reused", 0.0)
    floor = result.noise_floor
    doc["noise_floor"] = floor.model_dump() if floor is not None else None  # beside the held-out error, same units
    if doc["heldout"] is not None:
        doc["heldout"]["disjoint_from_probes"] = result.heldout_disjoint
    return doc


def fit_document(model: NodeModel, out: Path, png: Path | None, key: str, store_path: Path) -> dict[str, Any]:
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


def load_calibrated(path: Path) -> tuple[NodeModel, str]:
    """The node model 'cosched calibrate' wrote at ``path`` and the key of its node in the calibration data."""
    from env.sim.nodes import load_node
    from env.sim.world import world_for

    if not path.exists():
        raise InputError(f"no node model at {path}: run 'cosched calibrate' first (or give --out FILE)")
    model = world_for(load_node(f"sim:{path.resolve()}")).model
    if model is None:
        raise InputError(f"{path} is a node spec, not a node model: give the file 'cosched calibrate' wrote")
    prov = model.provenance
    key = prov.measured_node_id if prov.backend == "real" else prov.measured_node
    if not key:
        raise InputError(f"{path} was not calibrated (its provenance is {prov.source!r}): nothing measured to refit from")
    return model, key


def stored_runs(key: str) -> tuple[list[StoredRun], Path]:
    """Everything measured on the node ``key`` so far, and the calibration data's path."""
    store = CalibrationStore()
    rows = store.runs(key)
    if not rows:
        raise InputError(f"the calibration data {store.path} has nothing measured on {key}")
    return rows, store.path


def update_model(path: Path, model: NodeModel, key: str, rows: Sequence[StoredRun], store_path: Path,
                 progress: Progress) -> dict[str, Any]:
    """Refit the model at ``path`` from the stored ``rows`` and write it back; its document with the error of the
    held-out and run groups before (as predicted) and after (in-sample)."""
    checked = [r for r in rows if r.source in ("heldout", "run")]
    new, _, used = fitting.refit(model, [r.record for r in rows], CalibrationConfig(), progress=progress)
    after = fitting.predict_records(new, [r.record for r in checked])
    before = [r.predicted_s for r in checked]
    def errs(preds):
        return [abs(p - r.measured_s) / r.measured_s * 100 for p, r in zip(preds, checked) if p is not None and r.measured_s]
    write_model(path, new)
    doc = fit_document(new, path, None, key, store_path)
    doc["update"] = {"runs_used": used, "checked_groups": len(checked),
                     "before": error_summary(errs(before)).model_dump(), "after_in_sample": error_summary(errs(after)).model_dump()}
    return doc


def drift_document(rows: Sequence[StoredRun], key: str, path: Path) -> dict[str, Any]:
    """The error over time (a batch per calibration or run) and the five worst-predicted groups."""
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
