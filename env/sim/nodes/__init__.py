"""Node specs by name: ``local`` is discovered; ``sim:NAME`` is ``env/sim/nodes/NAME.json`` (or ``sim:PATH.json``).

A file may be a bare node spec or a node-model file (``env.sim.nodemodel``: the shape plus every parameter and
job of the contention model). A node model is registered under the node's name (``env.sim.world``), so every
sim component simulates with its parameters and jobs; a node model given by path is named ``sim:ABSOLUTE_PATH``.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import ValidationError

from env.node.discover import discover, sysroot
from env.errors import InputError
from env.node.spec import NodeSpec

NODES_DIR = Path(__file__).resolve().parent
DEFAULT_SIM_NODE = "sim:reference"


def known_sim_nodes() -> list[str]:
    return sorted(f"sim:{p.stem}" for p in NODES_DIR.glob("*.json"))


def load_node(name: str) -> NodeSpec:
    """The spec of a node. Cached per process (planning asks on every request): a node's shape does not
    change while a service runs; a spec file is re-read when it changes. Callers must not mutate it."""
    if name == "local":
        return _local(str(sysroot()))
    key = name[4:] if name.startswith("sim:") else ""
    path = Path(key) if key.endswith(".json") else NODES_DIR / f"{key}.json"
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        stamp = -1
    return _load_sim(name, stamp)


@lru_cache(maxsize=8)
def _local(root: str) -> NodeSpec:
    return discover(root)


@lru_cache(maxsize=64)
def _load_sim(name: str, _stamp: int) -> NodeSpec:
    if not name.startswith("sim:") or len(name) == 4:
        raise InputError(f"unknown node {name!r}: use 'local' or 'sim:NAME' ({', '.join(known_sim_nodes())}) or 'sim:PATH.json'")
    key = name[4:]
    path = Path(key) if key.endswith(".json") else NODES_DIR / f"{key}.json"
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise InputError(f"unknown simulated node {name!r}: no {path} (known: {', '.join(known_sim_nodes())})") from None
    except OSError as exc:
        raise InputError(f"cannot read node spec {path}: {exc.strerror}") from exc
    from env.sim.nodemodel import is_node_model

    if is_node_model(text):
        return _load_node_model(name, key, path, text)
    spec = _parse(NodeSpec, text, f"node spec {path}")
    if not spec.simulated:
        raise InputError(f"node spec {path} must be named 'sim:...', not {spec.name!r}")
    return spec.model_copy(update={"name": name if not key.endswith(".json") else spec.name})


def _parse(cls, text: str, what: str):  # noqa: ANN001, ANN202 - a pydantic model class and its instance
    """``cls`` from JSON text; invalid is one line naming the first wrong field."""
    try:
        return cls.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "document"
        raise InputError(f"{what} is invalid: {where}: {first['msg']}") from None


def _load_node_model(name: str, key: str, path: Path, text: str) -> NodeSpec:
    from env.sim.nodemodel import NodeModel
    from env.sim.world import register

    model = _parse(NodeModel, text, f"node model {path}")
    full = f"sim:{path.resolve()}" if key.endswith(".json") else name
    register(full, model)
    return model.node.model_copy(update={"name": full})
