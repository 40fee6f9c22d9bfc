"""The simulated node as black-box hardware: a ``MeasuringBackend`` whose parameters cannot be read through it.

``sim_measuring_backend(model, noise_sd, seed)`` returns an object with exactly the protocol of
``env.measure.probing.MeasuringBackend`` (``simulated``, ``shape()``, ``jobs()``, ``measure()``): the node model it
simulates is held in the closure of those methods, never in an attribute, and the shape it reports is what
discovery on a real node would give (CPUs, domains, L3 size and ways, CAT / MBA), without the per-domain
bandwidth a node spec may carry. So the calibrator, given this object, can only run programs and read their
times, counters and metrics, as on a real node (the twin test; ``tests/env/test_calib_blackbox.py``).

Noise: each run's time of each program x exp(N(0, noise_sd)), drawn from ``measure``'s seed, or from the
backend's own seeded stream when no seed is given. ``node_seconds`` of a measurement is its makespan.
Counters: a solo run of a node job on the whole node carries its simulated perf counters (``env.sim.profiles``).
"""

from __future__ import annotations

import math
import random
from typing import Sequence

from env.node.spec import NodeSpec
from env.measure.probing import BUBBLE, Measurement, MeasuringBackend, Placement
from env.sim.nodemodel import NodeModel
from env.sim.probes import GroupModel, check_group


def discoverable_shape(node: NodeSpec) -> NodeSpec:
    """What discovery on the node would show: no bandwidth figures, no notes on where numbers came from."""
    return node.model_copy(update={
        "numa": [d.model_copy(update={"memory_bandwidth_gbs": None}) for d in node.numa],
        "notes": {"measuring": "simulated node used as black-box hardware (hidden parameters)"},
    }, deep=True)


def sim_measuring_backend(model: NodeModel, noise_sd: float = 0.0, seed: int = 0) -> MeasuringBackend:
    """The black-box simulated node of ``model`` (see the module docstring)."""
    from env.sim.world import world_of_model

    if not 0.0 <= noise_sd <= 1.0:
        from env.errors import InputError

        raise InputError(f"--noise must be between 0 and 1 (a log-normal standard deviation), not {noise_sd}")
    world = world_of_model(model)
    truth = GroupModel(model.node, world.params, {n: e.params for n, e in world.entries.items()}, world.probe)
    shape = discoverable_shape(model.node)
    names = list(world.all_jobs)
    stream = random.Random(seed)
    whole = tuple(model.node.cpus)

    def counters_of(job: str, t: float) -> dict[str, float | None]:
        from env.sim.catalogue import CatalogueJob, _solo_traffic_gb, solo_time
        from env.sim.profiles import model_profile

        e = world.entries[job]
        cj = CatalogueJob(e, solo_time(model.node, e.params, sp=world.params),
                          solo_time(model.node, e.params, cpus=[model.node.cpus[0]], sp=world.params),
                          _solo_traffic_gb(model.node, e.params, world.params))
        c = dict(model_profile(model.node, cj, world.params).counters)
        c["duration_time"] = t * 1e9
        return c

    class SimulatedNode:
        __slots__ = ()
        simulated = True

        def shape(self) -> NodeSpec:
            return shape.model_copy(deep=True)

        def jobs(self) -> list[str]:
            return list(names)

        def measure(self, group: Sequence[Placement], *, seed: int | None = None) -> Measurement:
            group = list(group)
            check_group(shape, names, group)
            rng = random.Random(seed) if seed is not None else stream
            factors = [math.exp(rng.gauss(0.0, noise_sd)) for _ in group] if noise_sd > 0 else None
            times, metric = truth.times(group, factors)
            fg = [t for t, p in zip(times, group) if p.job != BUBBLE and t is not None]
            counters = tuple(counters_of(p.job, t) if len(group) == 1 and p.job in world.entries and p.cpus == whole
                             and t is not None else None for p, t in zip(group, times))
            return Measurement(times_s=tuple(times), node_seconds=max(fg), counters=counters, metric=tuple(metric))

    return SimulatedNode()

