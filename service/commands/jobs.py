"""``cosched jobs``: the simulated node's job catalogue (``--backend sim``, all figures simulated), or this node's
programs as its node model knows them (``--backend real``): calibrated, or learned from production runs with their
co-runs so far and the model's error on them (``env.calibration.learned``).

The command line only: the sim document is ``env.episode.listing.catalogue_document``'s."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.table import Table

from env.errors import InputError
from env.sim.nodes import DEFAULT_SIM_NODE
from service.output import emit


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("jobs", help="the simulated node's job catalogue",
                       description="List the simulated node's job catalogue: each program's character, its solo "
                       "time and scale factor (what the model gives), its simulated profile and features.")
    p.add_argument("--backend", choices=("sim", "real"), default="sim",
                   help="sim (the catalogue); real: this node's programs in its node model, with their uncertainty")
    p.add_argument("--node", default=DEFAULT_SIM_NODE, help=f"a simulated node (default {DEFAULT_SIM_NODE})")
    p.add_argument("--json", action="store_true", help="print the catalogue as one JSON document")
    p.set_defaults(handler=run)


def render(doc: dict[str, Any]) -> None:
    console = Console()
    table = Table(title=f"job catalogue of {doc['node']} (simulated)")
    for col in ("job", "suite", "set", "solo s", "1-core s", "scale factor", "LLC misses/s"):
        table.add_column(col, justify="left" if col in ("job", "suite", "set") else "right")
    for j in doc["jobs"]:
        table.add_row(j["name"], j["suite"], j["set"], f"{j['solo_s']:.1f}", f"{j['one_core_s']:.0f}",
                      f"{j['scale_factor']:.1f}", f"{j['l3_misses_per_s']:.2e}")
    console.print(table)
    for j in doc["jobs"]:
        console.print(f"[bold]{j['name']}[/]: {j['character']}", highlight=False)
    console.print("All figures come from the model of the simulated node (simulated); 'cosched jobs --json' adds "
                  "each job's parameters, reasons, simulated counters and features.")


def real_document() -> dict[str, Any]:
    """This node's programs as its node model knows them: calibrated ones, and those learned from production runs."""
    from env.calibration.learned import KNOWN_AFTER, planning_model
    from env.calibration.store import model_path
    from env.node.discover import local_node_id

    key = local_node_id()
    got = planning_model(key)
    if got is None:
        raise InputError(f"this node ({key}) has no calibrated node model at {model_path(key)}: run 'cosched calibrate' "
                         "(its programs are the stored profiles meanwhile: 'cosched profiles list')")
    path, model, learned = got
    h = model.provenance.heldout
    by = {lj.name: lj for lj in learned}
    jobs = []
    for j in model.jobs:
        lj = by.get(j.name)
        row: dict[str, Any] = {"name": j.name, "source": "learned" if lj else "calibrated",
                               # a learned program's solo time is the model's (its first run's, or its co-runs')
                               "solo_s": lj.solo_s if lj else (j.profile.duration_s if j.profile else None),
                               "scale_factor": lj.scale_factor if lj else (j.profile.scale_factor if j.profile else None)}
        if lj:
            row.update(first_run_s=lj.first_run_s, scale_source=lj.scale_source, intensity_gb_per_s=lj.intensity,
                       coruns=lj.coruns, error_pct=lj.error_pct, known=lj.known, state=lj.describe())
        else:
            row.update(known=True, state="calibrated" + (f" (held-out median error {h.median_abs_error_pct:.1f} %)"
                                                         if h is not None and h.n else ""))
        jobs.append(row)
    return {"backend": "real", "node": key, "model": str(path), "simulated": False, "known_after_coruns": KNOWN_AFTER,
            "jobs": jobs}


def render_real(doc: dict[str, Any]) -> None:
    console = Console()
    table = Table(title=f"programs of this node ({doc['node']}) in its node model {doc['model']}")
    for col in ("program", "from", "solo s", "scale factor", "co-runs", "what the model knows"):
        table.add_column(col, justify="right" if col in ("solo s", "scale factor", "co-runs") else "left")
    for j in doc["jobs"]:
        table.add_row(j["name"], j["source"], f"{j['solo_s']:.2f}" if j["solo_s"] else "-",
                      f"{j['scale_factor']:.2f}" + (" (est.)" if j.get("scale_source") == "estimated" else "")
                      if j["scale_factor"] else "-", str(j.get("coruns", "-")), j["state"])
    console.print(table)
    console.print(f"A program learned from production runs is paired cautiously until {doc['known_after_coruns']} "
                  "co-runs (solo times measured, or moved to its co-runs where they contradicted its first run; the rest is the "
                  "node model's).")


def run(args: argparse.Namespace) -> int:
    if args.backend == "real":
        doc = real_document()
        emit(doc, args.json, lambda: render_real(doc))
        return 0
    from env.episode.listing import catalogue_document

    doc = catalogue_document(args.node)
    emit(doc, args.json, lambda: render(doc))
    return 0
