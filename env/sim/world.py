"""Which jobs and parameters a simulated node has: the paper's catalogue, or a node-model file's own.

A simulated node named by a node-model file (``--node sim:FILE``; ``env.sim.nodes.load_node`` reads it) has its
own ``SimParams`` and jobs; every other simulated node (``sim:reference`` and bare node specs) has the paper's
19 programs and ``DEFAULT_PARAMS``. The sim components (catalogue, profiles, simulation, the searches, the
sim backend, training's setup) ask ``world_for(node)`` instead of reading the catalogue's constants, so a
node model replaces the paper's machine everywhere at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from env.node.spec import NodeSpec
from env.sim.params import DEFAULT_PARAMS, SimParams


@dataclass(frozen=True, eq=False)  # hashed by identity: caches key on the world object
class World:
    params: SimParams
    entries: dict  # name -> env.sim.catalogue.CatalogueEntry (a WithGenerated table: syn-… names resolve too)
    train_jobs: tuple[str, ...]
    held_out_jobs: tuple[str, ...]
    all_jobs: tuple[str, ...]
    probe: object = None  # env.sim.model.JobParams of the reference probe (None: env.sim.probes' own)
    profiles: dict = field(default_factory=dict)  # name -> measured Profile (a calibrated node model)
    source: str = "the paper's catalogue"
    model: object = None  # the env.sim.nodemodel.NodeModel it came from (None: the paper's catalogue)

    def is_known(self, name: str) -> bool:
        from env.sim.synthetic import is_synthetic

        return name in self.entries or is_synthetic(name)


_REGISTRY: dict[str, World] = {}
_REFERENCE: list[World] = []


def reference_world() -> World:
    if not _REFERENCE:
        from env.sim.catalogue import ALL_JOBS, BY_NAME, HELD_OUT_JOBS, TRAIN_JOBS

        _REFERENCE.append(World(DEFAULT_PARAMS, BY_NAME, TRAIN_JOBS, HELD_OUT_JOBS, ALL_JOBS))
    return _REFERENCE[0]


def world_for(node: NodeSpec) -> World:
    """The world of ``node``: its node model's when one was loaded under its name, else the paper's."""
    return _REGISTRY.get(node.name) or reference_world()


def register(name: str, model) -> World:  # model: env.sim.nodemodel.NodeModel
    """Make ``name`` (a node's name) simulate with ``model``'s parameters and jobs; returns its world."""
    w = world_of_model(model)
    _REGISTRY[name] = w
    return w


def world_of_model(model) -> World:
    from env.sim.catalogue import CatalogueEntry, _Entries

    entries = _Entries()
    for j in model.jobs:
        c = j.columns
        entries[j.name] = CatalogueEntry(j.params, j.suite, j.character or "from the node model", "",
                                         c.footprint_gb, c.ipc, c.branch_mpki, c.l1i_mpki, c.cs_per_cpu_s)
    names = tuple(j.name for j in model.jobs)
    train = tuple(j.name for j in model.jobs if j.role == "train") or names
    held = tuple(j.name for j in model.jobs if j.role == "held-out")
    profiles = {j.name: j.profile for j in model.jobs if j.profile is not None}
    return World(model.params, entries, train, held, names, model.probe, profiles,
                 source=f"node model ({model.provenance.source})", model=model)


def fingerprint(node: NodeSpec) -> str:
    """A short hash of everything the simulated node's figures depend on (its parameters and its jobs'): a cache
    of simulated results keyed by it goes stale by itself when the model changes."""
    import hashlib

    w = world_for(node)
    text = repr((node.model_dump_json(), w.params, [(n, w.entries[n].params) for n in w.all_jobs], w.probe))
    return hashlib.sha256(text.encode()).hexdigest()[:12]
