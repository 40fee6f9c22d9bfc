"""``cosched jobs --backend sim``: the simulated node's job catalogue (all figures simulated).

The command line only: the document is ``env.episode.listing.catalogue_document``'s."""

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
    p.add_argument("--backend", choices=("sim", "real"), default="sim", help="sim (the catalogue); real jobs are profiles: see 'cosched profiles'")
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


def run(args: argparse.Namespace) -> int:
    if args.backend == "real":
        raise InputError("the real node has no catalogue: its jobs are the stored profiles ('cosched profiles list')")
    from env.episode.listing import catalogue_document

    doc = catalogue_document(args.node)
    emit(doc, args.json, lambda: render(doc))
    return 0
