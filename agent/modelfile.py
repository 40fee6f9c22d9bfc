"""The model file (``cosched-model/2``): one ``.npz`` holding the set-encoder actor's weights and a JSON metadata
document, loadable without unpickling code (``np.load(allow_pickle=False)``; the metadata is JSON validated by
pydantic).

Layout of the archive: ``metadata``, the UTF-8 JSON of ``SetModelMeta`` stored as a uint8 array; ``actor.<parameter>``,
float32, the parameters of ``agent.setnet``; optionally ``group.<parameter>``, the group-cost head of
``agent.groupnet`` (described by the metadata's ``group_head``).

The model id is ``sha256:`` of the content (the metadata without its id, in canonical JSON, then each array's
name, dtype, shape and bytes), so the same weights and metadata always get the same id whatever the zip's
timestamps, and a file whose content was altered is detected on load.

``load_set_model`` refuses, with one line naming the reason and the fix, a missing or corrupt file, another format
(the earlier MLP format ``cosched-model/1`` included), a model for another node shape and one for another feature
set.
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Mapping

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.errors import ModelFileError

#: The earlier format (an MLP over W job slots): recognised only to refuse it in one line.
OLD_MLP_FORMAT = "cosched-model/1"


class NodeShape(BaseModel):
    """What makes a model specific to a node: a model trained for one shape is refused on another."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    cpus: int = Field(ge=1)
    numa_domains: int = Field(ge=1)
    l3_domains: int = Field(ge=1)

    def describe(self) -> str:
        return f"cpus={self.cpus}, numa_domains={self.numa_domains}, l3_domains={self.l3_domains}"


class TrainedFor(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str  # e.g. "sim:reference" or "local"
    node_id: str  # a stable id of the node (caller's choice, e.g. a hash of its discovered description)
    shape: NodeShape


def _canonical(obj: Any) -> bytes:
    # allow_nan=False: NaN/inf are not JSON; a figure like that must be fixed by the writer, not hidden.
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()


def content_id(meta: BaseModel, arrays: Mapping[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    h.update(b"cosched-model\0")
    # a model without a group head hashes as before the head existed (the shipped files keep their ids)
    absent = {"group_head"} if getattr(meta, "group_head", "") is None else set()
    h.update(_canonical(meta.model_dump(mode="json", exclude={"model_id"} | absent)))
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"\0{name}\0{a.dtype.str}\0{list(a.shape)}\0".encode())
        h.update(a.tobytes())
    return "sha256:" + h.hexdigest()


def _shape_of(s: NodeShape | Mapping[str, Any]) -> NodeShape:
    return s if isinstance(s, NodeShape) else NodeShape.model_validate(dict(s))


# ---------------------------------------------------------------------------------- format 2: the set encoder
SET_MODEL_FORMAT = "cosched-model/2"


class GroupHeadMeta(BaseModel):
    """The group-cost head (``agent.groupnet``) and what its option indices mean on the node it was trained for."""

    model_config = ConfigDict(extra="forbid")
    architecture: str  # agent.groupnet.GROUP_ARCHITECTURE
    net: dict[str, int]  # agent.groupnet.GroupNetShape.to_dict()
    core_actions: list[int]  # core option i -> the job action (env.plan.actions index) that takes it
    core_cpus: list[int]  # core option i -> the CPUs it takes on the node
    schedule_actions: list[int]  # schedule option s -> the schedule action (env.plan.actions index)
    training: dict[str, Any] = Field(default_factory=dict)


class SetModelMeta(BaseModel):
    """Metadata of a ``cosched-model/2`` file: one set-encoder actor (``agent.setnet``) for every window of
    1..max_window jobs and every Cmax of 1..max_concurrency on one node shape. Arrays: ``actor.<parameter>``."""

    model_config = ConfigDict(extra="forbid")
    format: Literal["cosched-model/2"] = SET_MODEL_FORMAT
    model_id: str = ""
    action_encoding: str
    architecture: str  # agent.setnet.ARCHITECTURE
    net: dict[str, int]  # agent.setnet.SetNetShape.to_dict()
    observation: str  # the episode's layout the network reads (env.episode.window: "set-v1")
    max_window: int = Field(ge=1)
    max_concurrency: int = Field(ge=1)
    trained_for: TrainedFor
    feature_set: str
    feature_pipeline: dict[str, Any] = Field(default_factory=dict)
    training: dict[str, Any] = Field(default_factory=dict)
    group_head: GroupHeadMeta | None = None  # present when the file holds ``group.<parameter>`` arrays


@dataclass(frozen=True, eq=False)  # one object a loaded file: hashed and compared by identity (caches key on it)
class LoadedSetModel:
    meta: SetModelMeta
    params: dict[str, np.ndarray]  # the actor's parameters by name (agent.setnet.SetNetShape.param_shapes)
    path: Path
    group_params: dict[str, np.ndarray] | None = None  # the group-cost head's (agent.groupnet), when it has one


def write_set_model(path: str | os.PathLike[str], params: Mapping[str, np.ndarray], *,
                    group: Mapping[str, np.ndarray] | None = None, **fields: Any) -> SetModelMeta:
    """Write a set-encoder actor (and a group-cost head ``group`` when given, described by ``group_head``) and its
    metadata (``SetModelMeta``'s fields but format and id) as one ``.npz``."""
    from agent.setnet import SetNetShape, check_params

    arrays = {f"actor.{k}": np.ascontiguousarray(v, dtype=np.float32) for k, v in params.items()}
    arrays.update({f"group.{k}": np.ascontiguousarray(v, dtype=np.float32) for k, v in (group or {}).items()})
    meta = SetModelMeta.model_validate({**fields, "trained_for": TrainedFor.model_validate(
        fields["trained_for"] if not isinstance(fields["trained_for"], TrainedFor) else fields["trained_for"].model_dump())})
    bad = check_params(SetNetShape.from_dict(meta.net), params) or _check_group(meta, dict(group or {}))
    if bad:
        raise ModelFileError(f"write_set_model: {bad}")
    meta = meta.model_copy(update={"model_id": content_id(meta, arrays)})  # type: ignore[arg-type]
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp.npz")
    with open(tmp, "wb") as f:
        np.savez(f, metadata=np.frombuffer(_canonical(meta.model_dump(mode="json")), dtype=np.uint8), **arrays)
    os.replace(tmp, path)
    return meta


def _read_archive(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(metadata document, arrays) of a model file; ModelFileError (one line) when it is not one."""
    if not path.is_file():
        raise ModelFileError(f"model file {path} not found: train one with `cosched train` or pass --model")
    try:
        with np.load(path, allow_pickle=False) as z:
            if "metadata" not in z.files:
                raise ModelFileError(f"model file {path} has no metadata: not a cosched model file")
            raw = bytes(z["metadata"].astype(np.uint8, copy=False).tobytes())
            arrays = {n: z[n] for n in z.files if n != "metadata"}
        doc = json.loads(raw.decode("utf-8"))
    except ModelFileError:
        raise
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError, UnicodeDecodeError) as e:
        raise ModelFileError(f"model file {path} is corrupt or not a cosched model file ({type(e).__name__}: {e})") from None
    if not isinstance(doc, dict):
        raise ModelFileError(f"model file {path} is corrupt: its metadata is not a JSON object")
    return doc, arrays


def load_set_model(path: str | os.PathLike[str], *, expect_node_shape: NodeShape | Mapping[str, Any] | None = None,
                   expect_feature_set: str | None = None) -> LoadedSetModel:
    """Read and verify a ``cosched-model/2`` file. Raises ``ModelFileError`` (one line) for a missing or corrupt
    file, a file of another format (the MLP models of ``cosched-model/1`` included), another node shape or
    another feature set."""
    from agent.setnet import SetNetShape, check_params

    path = Path(path)
    doc, arrays = _read_archive(path)
    fmt = doc.get("format")
    if fmt == OLD_MLP_FORMAT:
        raise ModelFileError(f"model file {path} is the earlier MLP format {OLD_MLP_FORMAT!r}, which cosched no longer "
                             f"serves: train a set-encoder model ({SET_MODEL_FORMAT!r}) with `cosched train`")
    if fmt != SET_MODEL_FORMAT:
        raise ModelFileError(f"model file {path} has format {fmt!r}, not {SET_MODEL_FORMAT!r} (the set-encoder policy): "
                             "retrain it with `cosched train --backend sim` or plan with the model it was made for")
    try:
        meta = SetModelMeta.model_validate(doc)
        shape = SetNetShape.from_dict(meta.net)
    except (ValidationError, TypeError, ValueError) as e:
        msg = e.errors()[0]["msg"] if isinstance(e, ValidationError) else str(e)
        raise ModelFileError(f"model file {path} has invalid metadata: {msg}") from None
    params = {k[len("actor."):]: v for k, v in arrays.items() if k.startswith("actor.")}
    group = {k[len("group."):]: v for k, v in arrays.items() if k.startswith("group.")}
    bad = (check_params(shape, params) if len(params) + len(group) == len(arrays) else "arrays outside the actor and the group head") \
        or _check_group(meta, group)
    if bad:
        raise ModelFileError(f"model file {path}: {bad}")
    if content_id(meta, arrays) != meta.model_id:  # type: ignore[arg-type]
        raise ModelFileError(f"model file {path} is corrupt: its content hash does not match its id {meta.model_id}")
    _check_fit(meta.model_id, meta.trained_for, meta.feature_set, expect_node_shape, expect_feature_set)
    return LoadedSetModel(meta=meta, params=params, path=path, group_params=group or None)


def _check_group(meta: SetModelMeta, group: dict[str, np.ndarray]) -> str | None:
    """None when the group head's arrays and its metadata agree (both absent, or the shape's exact parameters)."""
    from agent.groupnet import GROUP_ARCHITECTURE, GroupNetShape, check_group_params

    head = meta.group_head
    if head is None:
        return "group-cost arrays without a group_head description" if group else None
    if head.architecture != GROUP_ARCHITECTURE:
        return f"group head architecture {head.architecture!r} is not {GROUP_ARCHITECTURE!r}: retrain it with this cosched"
    try:
        shape = GroupNetShape.from_dict(head.net)
    except (TypeError, ValueError) as e:
        return f"group head shape is invalid ({e})"
    if len(head.core_actions) != shape.n_cores or len(head.core_cpus) != shape.n_cores \
            or len(head.schedule_actions) != shape.n_schedules:
        return "group head option tables do not match its shape"
    return check_group_params(shape, group)


def _check_fit(model_id: str, trained_for: TrainedFor, feature_set: str,
               expect_node_shape: NodeShape | Mapping[str, Any] | None, expect_feature_set: str | None) -> None:
    if expect_node_shape is not None:
        want = _shape_of(expect_node_shape)
        if trained_for.shape != want:
            raise ModelFileError(
                f"model {model_id[:19]} was trained for node {trained_for.name!r} ({trained_for.shape.describe()}), "
                f"not for this node's shape ({want.describe()}): train a model for this node with `cosched train`")
    if expect_feature_set is not None and feature_set != expect_feature_set:
        raise ModelFileError(
            f"model {model_id[:19]} uses feature set {feature_set!r}, not {expect_feature_set!r}: "
            f"its observations would mean something else; train a model with this feature set")

__all__ = ["OLD_MLP_FORMAT", "NodeShape", "TrainedFor", "content_id", "SET_MODEL_FORMAT", "GroupHeadMeta", "SetModelMeta", "LoadedSetModel", "write_set_model", "load_set_model"]
