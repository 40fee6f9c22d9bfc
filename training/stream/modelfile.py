"""The stream model file (``cosched-stream-model/1``): one ``.npz`` with the actor's and the first critic's parameters
(``agent.streamnet``) and a JSON metadata document (``StreamModelMeta``), loadable without unpickling code. The model
id is the content's sha256 (``agent.modelfile.content_id``), so an altered file is detected on load; a model for
another node shape is refused in one line.

Arrays: ``metadata`` (UTF-8 JSON as uint8), ``actor.<parameter>``, ``critic.<parameter>``.
"""

from __future__ import annotations

import json
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Mapping

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.errors import ModelFileError
from agent.modelfile import NodeShape, TrainedFor, _canonical, content_id
from agent.setnet import check_arrays
from agent.streamnet import ARCHITECTURE, StreamNetShape

FORMAT = "cosched-stream-model/1"


class StreamModelMeta(BaseModel):
    model_config = ConfigDict(extra="forbid")
    format: Literal["cosched-stream-model/1"] = FORMAT
    model_id: str = ""
    architecture: str = ARCHITECTURE
    net: dict[str, int]  # agent.streamnet.StreamNetShape.to_dict()
    options: list[list[str]]  # env.episode.stream_gym.OPTIONS: what option k of the head means
    max_window: int = Field(ge=1)
    max_concurrency: int = Field(ge=1)
    trained_for: TrainedFor
    training: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class StreamModel:
    meta: StreamModelMeta
    actor: dict[str, np.ndarray]
    critic: dict[str, np.ndarray]
    path: Path | None = None

    @property
    def shape(self) -> StreamNetShape:
        return StreamNetShape.from_dict(self.meta.net)


def write_stream_model(path: str | os.PathLike[str], actor: Mapping[str, np.ndarray], critic: Mapping[str, np.ndarray],
                       **fields: Any) -> StreamModelMeta:
    meta = StreamModelMeta.model_validate(fields)
    want = StreamNetShape.from_dict(meta.net).param_shapes()
    bad = check_arrays(want, dict(actor), "actor ") or check_arrays(want, dict(critic), "critic ")
    if bad:
        raise ModelFileError(f"write_stream_model: {bad}")
    arrays = {f"actor.{k}": np.ascontiguousarray(v, np.float32) for k, v in actor.items()}
    arrays.update({f"critic.{k}": np.ascontiguousarray(v, np.float32) for k, v in critic.items()})
    meta = meta.model_copy(update={"model_id": content_id(meta, arrays)})
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")
    with open(tmp, "wb") as f:
        np.savez(f, metadata=np.frombuffer(_canonical(meta.model_dump(mode="json")), dtype=np.uint8), **arrays)
    os.replace(tmp, path)
    return meta


def load_stream_model(path: str | os.PathLike[str], *, expect_node_shape: NodeShape | None = None) -> StreamModel:
    """The model in ``path``; ModelFileError (one line: what is wrong and what to do) when it is not a usable one."""
    path = Path(path)
    if not path.is_file():
        raise ModelFileError(f"stream model file {path} not found: train one with `python -m training.stream.sac`")
    try:
        with np.load(path, allow_pickle=False) as z:
            if "metadata" not in z.files:
                raise ModelFileError(f"{path} has no metadata: not a cosched model file")
            doc = json.loads(bytes(z["metadata"].astype(np.uint8)).decode("utf-8"))
            arrays = {n: z[n] for n in z.files if n != "metadata"}
    except ModelFileError:
        raise
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError, UnicodeDecodeError) as e:
        raise ModelFileError(f"{path} is corrupt or not a cosched model file ({type(e).__name__})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        got = doc.get("format") if isinstance(doc, dict) else None
        raise ModelFileError(f"{path} is a {got or 'unknown'} file, not a stream model ({FORMAT}): train one with "
                             "`python -m training.stream.sac`")
    try:
        meta = StreamModelMeta.model_validate(doc)
    except ValidationError as e:
        raise ModelFileError(f"{path}: its metadata is not valid ({e.errors()[0]['msg']})") from None
    if content_id(meta, arrays) != meta.model_id:
        raise ModelFileError(f"{path} was altered after it was written (its content does not match its id)")
    actor = {k[6:]: v for k, v in arrays.items() if k.startswith("actor.")}
    critic = {k[7:]: v for k, v in arrays.items() if k.startswith("critic.")}
    want = StreamNetShape.from_dict(meta.net).param_shapes()
    bad = check_arrays(want, actor, "actor ") or check_arrays(want, critic, "critic ")
    if bad:
        raise ModelFileError(f"{path}: {bad}")
    if expect_node_shape is not None and meta.trained_for.shape != expect_node_shape:
        raise ModelFileError(f"{path} was trained for {meta.trained_for.name} ({meta.trained_for.shape.describe()}), "
                             f"not this node ({expect_node_shape.describe()}): train a stream model for it")
    return StreamModel(meta, actor, critic, path)


__all__ = ["FORMAT", "StreamModel", "StreamModelMeta", "write_stream_model", "load_stream_model"]
