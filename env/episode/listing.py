"""The simulated node's job catalogue as ``cosched jobs`` lists it: each job's figures from the model beside what
planning sees of it (its simulated profile and scaled features, ``jobinfo.sim_provider``). All figures simulated."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from env.episode.jobinfo import sim_provider
from env.errors import InputError
from env.sim.catalogue import catalogue
from env.sim.nodes import load_node
from env.sim.world import world_for
from profiler.features import FEATURE_NAMES


def catalogue_document(node_name: str) -> dict[str, Any]:
    """The catalogue of the simulated node ``node_name`` (sim:NAME or sim:FILE) as one JSON-ready document."""
    node = load_node(node_name)
    if not node.simulated:
        raise InputError(f"{node_name!r} is not a simulated node: the catalogue exists for sim:NAME nodes")
    world = world_for(node)  # a node model's own jobs, else the paper's catalogue
    ALL_JOBS, HELD_OUT_JOBS, TRAIN_JOBS = world.all_jobs, world.held_out_jobs, world.train_jobs
    prov = sim_provider(node)
    jobs = []
    cat = catalogue(node)
    for name in ALL_JOBS:
        job = cat[name]
        info = prov.get(name)
        assert info is not None and info.profile is not None
        jobs.append({
            "name": name,
            "suite": job.entry.suite,
            "set": "held-out" if name in HELD_OUT_JOBS else "train" if name in TRAIN_JOBS else "other",
            "solo_s": job.solo_s,
            "one_core_s": job.one_core_s,
            "scale_factor": job.scale_factor,
            "l3_misses_per_s": info.l3_misses_per_s,
            "character": job.entry.character,
            "why": job.entry.why,
            "params": asdict(job.entry.params),
            "counters": info.profile.counters,
            "features": dict(zip(FEATURE_NAMES, (float(x) for x in info.features))),
        })
    return {"backend": "sim", "node": node.name, "simulated": True, "train_jobs": list(TRAIN_JOBS),
            "held_out_jobs": list(HELD_OUT_JOBS), "jobs": jobs}
