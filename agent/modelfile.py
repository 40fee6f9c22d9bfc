"""The model file: one ``.npz`` holding the actor's weights and a JSON metadata document, loadable
without unpickling code (``np.load(allow_pickle=False)``; the metadata is JSON validated by pydantic).

Layout of the archive:
* ``metadata``: the UTF-8 JSON of ``ModelMeta``, stored as a uint8 array;
* ``actor.{i}.weight`` (out, in) and ``actor.{i}.bias`` (out,), float32, for the linear layers i = 0..L-1
  (torch's layout; ReLU between layers, none after the last);
* for an ensemble of K actors of the same shape (``cosched train --ensemble K``), members 1..K-1 as
  ``actor{k}.{i}.weight`` / ``actor{k}.{i}.bias``; the policy averages the members' logits. A one-actor file is
  unchanged by this (same names, same content id).

The model id is ``sha256:`` of the content (the metadata without its id, in canonical JSON, then each array's
name, dtype, shape and bytes), so the same weights and metadata always get the same id whatever the zip's
timestamps, and a file whose content was altered is detected on load.

``load_model`` refuses, with one line naming the reason and the fix, a missing or corrupt file, another
format version, a model for another node shape and a model for another feature set.
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Mapping, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.errors import ModelFileError

MODEL_FORMAT = "cosched-model/1"


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


class ModelMeta(BaseModel):
    model_config = ConfigDict(extra="forbid")
    format: Literal["cosched-model/1"] = MODEL_FORMAT
    model_id: str = ""  # "sha256:<hex>" of the content; filled in by write_model
    action_encoding: str  # the version string of env's 257-action encoding
    window_size: int = Field(ge=1)  # W
    max_concurrency: int = Field(ge=1)  # the Cmax limit the model was trained with
    obs_size: int = Field(ge=1)
    n_actions: int = Field(ge=2)
    hidden_sizes: list[int]
    activation: Literal["relu"] = "relu"
    trained_for: TrainedFor
    feature_set: str  # id of the feature set (which counters, which derived rates)
    feature_pipeline: dict[str, Any] = Field(default_factory=dict)  # opaque: the fitted pipeline's JSON parameters
    training: dict[str, Any] = Field(default_factory=dict)  # opaque: figures, config, seed, commands


Layers = list[tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class LoadedModel:
    meta: ModelMeta
    layers: Layers  # the first (or only) actor: (weight (out, in), bias (out,)) float32
    path: Path
    members: tuple[Layers, ...] = ()  # every actor of an ensemble, the first included; () means (layers,)

    @property
    def actors(self) -> tuple[Layers, ...]:
        return self.members or (self.layers,)


def _canonical(obj: Any) -> bytes:
    # allow_nan=False: NaN/inf are not JSON; a figure like that must be fixed by the writer, not hidden.
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()


def content_id(meta: ModelMeta, arrays: Mapping[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    h.update(b"cosched-model\0")
    h.update(_canonical(meta.model_dump(mode="json", exclude={"model_id"})))
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"\0{name}\0{a.dtype.str}\0{list(a.shape)}\0".encode())
        h.update(a.tobytes())
    return "sha256:" + h.hexdigest()


def _prefix(member: int) -> str:
    return "actor" if member == 0 else f"actor{member}"


def _layer_names(n_layers: int, n_members: int = 1) -> list[str]:
    return [f"{_prefix(k)}.{i}.{kind}" for k in range(n_members) for i in range(n_layers) for kind in ("weight", "bias")]


def _n_members(arrays: Mapping[str, np.ndarray]) -> int:
    k = 1
    while f"{_prefix(k)}.0.weight" in arrays:
        k += 1
    return k


def write_model(
    path: str | os.PathLike[str],
    layers: Sequence[tuple[np.ndarray, np.ndarray]],
    *,
    action_encoding: str,
    window_size: int,
    max_concurrency: int,
    trained_for: TrainedFor | Mapping[str, Any],
    feature_set: str,
    feature_pipeline: Mapping[str, Any] | None = None,
    training: Mapping[str, Any] | None = None,
    more_members: Sequence[Sequence[tuple[np.ndarray, np.ndarray]]] = (),
) -> ModelMeta:
    """Write the actor's linear layers (weight (out, in), bias (out,)) and the metadata as one ``.npz``;
    ``more_members``: the other actors of an ensemble (same shapes). Returns the metadata with its content id.
    The file is written beside ``path`` first, then renamed."""
    if not layers:
        raise ValueError("a model needs at least one layer")
    arrays: dict[str, np.ndarray] = {}
    for k, member in enumerate([layers, *more_members]):
        for i, (w, b) in enumerate(member):
            arrays[f"{_prefix(k)}.{i}.weight"] = np.ascontiguousarray(w, dtype=np.float32)
            arrays[f"{_prefix(k)}.{i}.bias"] = np.ascontiguousarray(b, dtype=np.float32)
    w0 = arrays["actor.0.weight"]
    meta = ModelMeta(
        action_encoding=action_encoding,
        window_size=window_size,
        max_concurrency=max_concurrency,
        obs_size=int(w0.shape[1]),
        n_actions=int(arrays[f"actor.{len(layers) - 1}.weight"].shape[0]),
        hidden_sizes=[int(w.shape[0]) for w, _ in layers[:-1]],
        trained_for=trained_for if isinstance(trained_for, TrainedFor) else TrainedFor.model_validate(trained_for),
        feature_set=feature_set,
        feature_pipeline=dict(feature_pipeline or {}),
        training=dict(training or {}),
    )
    _check_layers(meta, arrays, where="write_model")
    meta = meta.model_copy(update={"model_id": content_id(meta, arrays)})
    text = _canonical(meta.model_dump(mode="json"))
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp.npz")
    with open(tmp, "wb") as f:
        np.savez(f, metadata=np.frombuffer(text, dtype=np.uint8), **arrays)
    os.replace(tmp, path)
    return meta


def _check_layers(meta: ModelMeta, arrays: Mapping[str, np.ndarray], *, where: str) -> None:
    sizes = [meta.obs_size, *meta.hidden_sizes, meta.n_actions]
    n_members = _n_members(arrays)
    for k in range(n_members):
        actor = "the actor" if n_members == 1 else f"actor {k} of the ensemble"
        for i in range(len(sizes) - 1):
            w, b = arrays.get(f"{_prefix(k)}.{i}.weight"), arrays.get(f"{_prefix(k)}.{i}.bias")
            if w is None or b is None:
                raise ModelFileError(f"{where}: layer {i} of {actor} is missing")
            if w.dtype != np.float32 or b.dtype != np.float32:
                raise ModelFileError(f"{where}: layer {i} of {actor} is {w.dtype}/{b.dtype}, expected float32")
            if w.shape != (sizes[i + 1], sizes[i]) or b.shape != (sizes[i + 1],):
                raise ModelFileError(f"{where}: layer {i} of {actor} has shape {w.shape}/{b.shape}, expected {(sizes[i + 1], sizes[i])}/{(sizes[i + 1],)}")
            if not (np.isfinite(w).all() and np.isfinite(b).all()):
                raise ModelFileError(f"{where}: layer {i} of {actor} holds NaN or infinite weights")
    extra = set(arrays) - set(_layer_names(len(sizes) - 1, n_members))
    if extra:
        raise ModelFileError(f"{where}: unexpected arrays {sorted(extra)}")


def _shape_of(s: NodeShape | Mapping[str, Any]) -> NodeShape:
    return s if isinstance(s, NodeShape) else NodeShape.model_validate(dict(s))


def load_model(
    path: str | os.PathLike[str],
    *,
    expect_node_shape: NodeShape | Mapping[str, Any] | None = None,
    expect_feature_set: str | None = None,
) -> LoadedModel:
    """Read and verify a model file. Raises ``ModelFileError`` (one line) when it is missing, corrupt, of
    another format version, trained for another node shape, or for another feature set."""
    path = Path(path)
    doc, arrays = _read_archive(path)
    fmt = doc.get("format")
    if fmt != MODEL_FORMAT:
        raise ModelFileError(f"model file {path} has format {fmt!r}; this version of cosched reads {MODEL_FORMAT!r}: retrain or use a matching cosched")
    try:
        meta = ModelMeta.model_validate(doc)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        raise ModelFileError(f"model file {path} has invalid metadata: {loc}: {err['msg']}") from None
    _check_layers(meta, arrays, where=f"model file {path}")
    actual = content_id(meta, arrays)
    if actual != meta.model_id:
        raise ModelFileError(f"model file {path} is corrupt: its content hash {actual} does not match its id {meta.model_id}")
    _check_fit(meta.model_id, meta.trained_for, meta.feature_set, expect_node_shape, expect_feature_set)
    n = len(meta.hidden_sizes) + 1
    members = tuple([(arrays[f"{_prefix(k)}.{i}.weight"], arrays[f"{_prefix(k)}.{i}.bias"]) for i in range(n)]
                    for k in range(_n_members(arrays)))
    return LoadedModel(meta=meta, layers=members[0], path=path, members=members)



# ---------------------------------------------------------------------------------- format 2: the set encoder
SET_MODEL_FORMAT = "cosched-model/2"


class SetModelMeta(BaseModel):
    """Metadata of a ``cosched-model/2`` file: one set-encoder actor (``agent.setnet``) for every window of
    1..max_window jobs and every Cmax of 1..max_concurrency on one node shape. Arrays: ``actor.<parameter>``."""

    model_config = ConfigDict(extra="forbid")
    format: Literal["cosched-model/2"] = SET_MODEL_FORMAT
    model_id: str = ""
    action_encoding: str
    architecture: str  # agent.setnet.ARCHITECTURE
    net: dict[str, int]  # agent.setnet.SetNetShape.to_dict()
    observation: str  # the episode's layout the network reads (env.episode: "set-v1")
    max_window: int = Field(ge=1)
    max_concurrency: int = Field(ge=1)
    trained_for: TrainedFor
    feature_set: str
    feature_pipeline: dict[str, Any] = Field(default_factory=dict)
    training: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True)
class LoadedSetModel:
    meta: SetModelMeta
    params: dict[str, np.ndarray]  # the actor's parameters by name (agent.setnet.SetNetShape.param_shapes)
    path: Path


def write_set_model(path: str | os.PathLike[str], params: Mapping[str, np.ndarray], **fields: Any) -> SetModelMeta:
    """Write a set-encoder actor and its metadata (``SetModelMeta``'s fields but format and id) as one ``.npz``."""
    from agent.setnet import SetNetShape, check_params

    arrays = {f"actor.{k}": np.ascontiguousarray(v, dtype=np.float32) for k, v in params.items()}
    meta = SetModelMeta.model_validate({**fields, "trained_for": TrainedFor.model_validate(
        fields["trained_for"] if not isinstance(fields["trained_for"], TrainedFor) else fields["trained_for"].model_dump())})
    bad = check_params(SetNetShape.from_dict(meta.net), params)
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
    bad = check_params(shape, params) if len(params) == len(arrays) else "arrays outside the actor"
    if bad:
        raise ModelFileError(f"model file {path}: {bad}")
    if content_id(meta, arrays) != meta.model_id:  # type: ignore[arg-type]
        raise ModelFileError(f"model file {path} is corrupt: its content hash does not match its id {meta.model_id}")
    _check_fit(meta.model_id, meta.trained_for, meta.feature_set, expect_node_shape, expect_feature_set)
    return LoadedSetModel(meta=meta, params=params, path=path)


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

__all__ = ["MODEL_FORMAT", "NodeShape", "TrainedFor", "ModelMeta", "LoadedModel", "write_model", "load_model", "content_id",
           "SET_MODEL_FORMAT", "SetModelMeta", "LoadedSetModel", "write_set_model", "load_set_model"]
