"""What the node model learned of new programs, kept on disk between commands (``env.calibration.learned``): every
command is a process of its own, and learning the programs again from all the calibration data costs seconds.

The file sits beside the node's model, ``$COSCHED_HOME/node-models/NODE.learned.json``, under a digest of all it was
learned from (the calibrated model's file, the profiles, the runs' records, the learner's code and settings); it is
written whole or not at all, and one that is missing, stale or damaged is simply learned again."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Sequence

from env.calibration.store import model_path
from env.sim.nodemodel import NodeModel
from profiler.interference import RunRecord
from profiler.models import Profile

#: The sources whose code decides what is learned: a change to any of them makes the kept file stale.
LEARNER_SOURCES = ("env/calibration/learned.py", "env/sim/probes.py", "env/sim/model.py", "env/sim/kernel.py",
                   "env/calibration/space.py", "native/src/simkernel/simgroup.c")


def learned_cache_path(node_key: str) -> Path:
    """Where the programs learned for a node are kept between commands: beside its model."""
    return model_path(node_key).with_suffix(".learned.json")


def learned_key(path: str, profiles: Sequence[Profile], runs: Sequence[RunRecord], settings: tuple) -> str:
    """A digest of everything the learning reads: the calibrated model's file ``path``, the profiles, the runs'
    records, the learner's code (``LEARNER_SOURCES``) and its ``settings``."""
    root = Path(__file__).resolve().parents[2]
    h = hashlib.sha256()
    h.update(repr(settings).encode())
    h.update(Path(path).read_bytes())
    for src in LEARNER_SOURCES:
        f = root / src
        h.update(f.read_bytes() if f.exists() else src.encode())
    for p in profiles:
        h.update(p.model_dump_json().encode())
    for r in runs:
        h.update(r.model_dump_json().encode())
    return h.hexdigest()


def read_learned(node_key: str, key: str) -> tuple[NodeModel, list[dict[str, Any]]] | None:
    """The kept model and learned programs (as dicts) when kept under ``key``; else None."""
    try:
        doc = json.loads(learned_cache_path(node_key).read_text())
        if doc.get("key") != key:
            return None
        return NodeModel.model_validate(doc["model"]), list(doc["learned"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # none yet, or unreadable: learned again
        return None


def write_learned(node_key: str, key: str, model: NodeModel, learned: Sequence[dict[str, Any]]) -> None:
    """Keep ``model`` and ``learned`` under ``key``, whole or not at all (a reader never sees half a file)."""
    out = learned_cache_path(node_key)
    doc = {"key": key, "model": json.loads(model.model_dump_json()), "learned": list(learned)}
    tmp = None
    try:
        with tempfile.NamedTemporaryFile("w", dir=out.parent, prefix=out.name, suffix=".tmp", delete=False) as f:
            tmp = f.name
            json.dump(doc, f)
        os.replace(tmp, out)
    except OSError:  # a read-only home: the programs are simply learned again next time
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
