"""Training jobs drawn around a calibrated node's own jobs (``cosched train --node local``).

Why: a real node has a handful of profiled programs; an agent trained on those few feature vectors learns them,
not how features relate to good groupings; and a program profiled after training must not fall outside what it was
trained on. ``env.sim.synthetic`` draws from the catalogue's broad ranges
(minutes of work on the paper's node), which a node with 1-2 s programs never sees. Here each generated job is
one of the node's fitted jobs with its character perturbed (log-normal factors on its compute and on its memory
traffic, independently, so the mix of compute- and memory-bound jobs widens; its parallel fraction and cache
scale nudged), seeded; every second one is drawn across the node's measured range instead (its size log-uniform
from a third of the smallest job's to three times the largest's, its serial share uniform in 0..1, its memory
traffic per compute-second log-uniform from a tenth of the lightest to twice the heaviest job's). Its profile is what the node model predicts for it (solo on the whole node and on one
core; the base job's measured counters scaled to its time), so its features come from the same kind of
profile as the measured jobs'. The result is a node model file like any other (``--node sim:FILE``), whose
provenance names the calibrated model it came from.
"""

from __future__ import annotations

import dataclasses
import math
import random

from env.measure.probing import Placement
from env.sim.model import JobParams
from env.sim.nodemodel import ModelJob, NodeModel, checked
from env.sim.probes import GroupModel

SPREAD = 0.5  # log-normal sd of the size factors: most generated jobs within 0.4x-2.7x of their base


def around(model: NodeModel, n: int, seed: int, source: str = "") -> NodeModel:
    """``model`` with ``n`` generated jobs (role train, named ``BASE:gSEED.K``) drawn around its own jobs;
    ``source`` (the calibrated file) named in its provenance."""
    rng = random.Random(f"cosched-around-v1:{seed}")
    base = [j for j in model.jobs if j.profile is not None] or list(model.jobs)
    sp = model.params
    out = list(model.jobs)
    works = [j.params.work_s for j in base]
    ks = [j.params.stream_gb / j.params.work_s for j in base]
    k_pos = [k for k in ks if k > 0] or [1e-3]
    for k in range(n):
        src = base[k % len(base)]
        p = dataclasses.asdict(src.params)
        work, mem = math.exp(rng.gauss(0, SPREAD)), math.exp(rng.gauss(0, SPREAD))
        serial = (1 - p["parallel"]) * math.exp(rng.gauss(0, SPREAD))
        if k % 2 == 1:  # across the node's measured range, not only around today's jobs: size, parallelism, traffic
            w = math.exp(rng.uniform(math.log(min(works) / 3), math.log(max(works) * 3)))
            kk = math.exp(rng.uniform(math.log(min(k_pos) / 10), math.log(max(k_pos) * 2)))
            work, serial = w / p["work_s"], rng.uniform(0.0, 1.0)
            mem = (kk * w / p["stream_gb"]) if p["stream_gb"] > 0 else mem
        p.update(name=f"{src.name}:g{seed}.{k}", work_s=p["work_s"] * work, stream_gb=p["stream_gb"] * mem,
                 reuse_gb=p["reuse_gb"] * mem, comm_gb=p["comm_gb"] * mem,
                 parallel=1 - min(1.0, serial),
                 ws_mb=p["ws_mb"] * math.exp(rng.gauss(0, SPREAD)))
        p["ws2_mb"] = max(p["ws_mb"], p["ws2_mb"] * math.exp(rng.gauss(0, SPREAD)))  # drawn last: earlier draws unchanged
        params = checked(JobParams(**p))
        gm = GroupModel(model.node, sp, {params.name: params}, model.probe)
        solo = gm.times([Placement(params.name, tuple(model.node.cpus))])[0][0]
        one = gm.times([Placement(params.name, (model.node.cpus[0],))])[0][0]
        profile = None
        if src.profile is not None and solo and one:
            ratio = solo / src.profile.wall_s
            counters = {e: (v * ratio if v is not None else None) for e, v in src.profile.counters.items()}
            if counters.get("task-clock") is not None:  # its CPU time is its one-core time: CPUs kept busy = speed-up
                counters["task-clock"] = one * 1000.0
            profile = src.profile.model_copy(update={
                "name": params.name, "command": [f"generated/{params.name}"], "counters": counters, "wall_s": solo,
                "one_core_s": one, "scale_factor": one / solo, "simulated": True})
        out.append(ModelJob(params=params, columns=src.columns, role="train", suite="generated",
                            character=f"drawn around {src.name} (env/calibration/around.py)", profile=profile))
    prov = model.provenance.model_copy(update={"description": f"the node model {source or model.node.name} plus {n} "
                                                              f"training jobs drawn around its own (seed {seed})"})
    return model.model_copy(update={"jobs": out, "provenance": prov})
