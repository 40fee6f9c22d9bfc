"""The node-model file: one document holding everything the simulated node needs to stand for a node.

* ``node``: the node's shape (``NodeSpec``), per-domain bandwidth included;
* ``params``: EVERY node-level parameter of the contention model (``SimParams``: none left at a hidden default);
* ``jobs``: the node's own jobs, each with every ``JobParams`` field, the profile columns that simulated
  counters need, and (for a calibrated model) its measured profile and interference curves;
* ``probe``: the reference probe program's parameters on this node (it is a program like any other);
* ``provenance``: where the numbers came from (hand-written reference, a variant, or a calibration: probes
  used, node seconds, held-out error).

``--node sim:FILE`` accepts it wherever a simulated node is accepted (``env.sim.nodes.load_node`` registers the
file's world under the node's name: ``env.sim.world``). ``sim:reference`` and its variants exist as such
files too (``env/sim/nodes/*.json`` holding ``"kind": "cosched-node-model"``; ``env.sim.variants`` writes them).
"""

from __future__ import annotations

from datetime import datetime, timezone
from functools import lru_cache
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_serializer, model_serializer, model_validator

from env.node.spec import NodeSpec
from env.sim.model import JobParams
from env.sim.params import FILE_ORDER, SimParams
from profiler.interference import InterferenceProfile, NodeBench
from profiler.models import Profile

NODE_MODEL_KIND = "cosched-node-model"
NODE_MODEL_SCHEMA_VERSION = 2
#: What each schema version changed (a file of an older version is refused with this reason, in one line).
SCHEMA_HISTORY = {2: "schema 2 gives each job a two-working-set L3 miss-ratio curve (ws2_mb, ws2_share) in place of "
                     "schema 1's single exponential"}


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


P = TypeVar("P", SimParams, JobParams)


def checked(params: P) -> P:
    """``params`` within a node-model file's bounds (pydantic's ValidationError if not): for parameters made in code
    that go into a model without its constructor (``model_copy(update=...)`` does not validate)."""
    return _adapter(type(params)).validate_python(params)


@lru_cache(maxsize=None)
def _adapter(cls: type) -> TypeAdapter:
    return TypeAdapter(cls)


class ProfileColumns(BaseModel):
    """What simulated counters need beyond the model's parameters (``env.sim.profiles``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    footprint_gb: float = Field(gt=0)
    ipc: float = Field(gt=0)
    branch_mpki: float = Field(ge=0)
    l1i_mpki: float = Field(ge=0)
    cs_per_cpu_s: float = Field(ge=0)


#: Columns for a job whose counters were not measured (a real node without counters): mid-range values.
NEUTRAL_COLUMNS = ProfileColumns(footprint_gb=1.0, ipc=1.2, branch_mpki=3.0, l1i_mpki=0.5, cs_per_cpu_s=30.0)


class ModelJob(BaseModel):
    model_config = ConfigDict(extra="forbid")
    params: JobParams
    columns: ProfileColumns = NEUTRAL_COLUMNS
    role: Literal["train", "held-out", "other"] = "train"
    suite: str = "node"
    character: str = ""
    profile: Profile | None = Field(None, description="the job's measured profile (a calibrated model)")
    interference: InterferenceProfile | None = Field(None, description="its interference curves (a calibrated model)")

    @property
    def name(self) -> str:
        return self.params.name


class HeldOutError(BaseModel):
    model_config = ConfigDict(extra="forbid")
    median_abs_error_pct: float
    p90_abs_error_pct: float
    n: int
    noise_floor: float | None = Field(None, description="the median error (%) that repeated measurements of the same "
                                      "groups show against each other (cosched calibrate --repeats): below it a model "
                                      "cannot be judged; None (left out of the file) when no group was repeated")

    @model_serializer(mode="wrap")
    def _floor_only_when_measured(self, handler: Any) -> dict[str, Any]:
        """Files written before the field existed read and write back the same."""
        out = handler(self)
        if isinstance(out, dict) and out.get("noise_floor") is None:
            out.pop("noise_floor", None)
        return out


class Provenance(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source: Literal["reference", "variant", "calibrated"]
    description: str = ""
    backend: str | None = Field(None, description="calibrated: 'sim' or 'real'")
    measured_node: str | None = Field(None, description="calibrated: the node measured (name) and its id")
    measured_node_id: str | None = None
    noise_sd: float | None = Field(None, description="calibrated on the sim backend: the measurement noise")
    corun_probes: int = 0
    profiling_runs: int = 0
    node_seconds_profiling: float = 0.0
    node_seconds_probes: float = 0.0
    node_seconds_heldout: float = 0.0
    fit_rms_log: float | None = Field(None, description="RMS of log(predicted / measured) over the fitted runs")
    heldout: HeldOutError | None = None
    bench: NodeBench | None = None
    updates: int = Field(0, description="refits from stored calibration data (cosched calibrate --update)")
    created_at: datetime = Field(default_factory=_utcnow)


class NodeModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["cosched-node-model"] = NODE_MODEL_KIND
    schema_version: Literal[2] = NODE_MODEL_SCHEMA_VERSION

    @model_validator(mode="before")
    @classmethod
    def _refuse_old_schema(cls, data: Any) -> Any:
        """An older file's jobs lack the fields the current cache model needs, and their old miss curve does not
        carry over: refused with the reason, not migrated with invented numbers."""
        if isinstance(data, dict):
            v = data.get("schema_version")
            if isinstance(v, int) and v < NODE_MODEL_SCHEMA_VERSION:
                raise ValueError(f"schema_version {v} is older than {NODE_MODEL_SCHEMA_VERSION} ("
                                 f"{SCHEMA_HISTORY[NODE_MODEL_SCHEMA_VERSION]}): recalibrate the node "
                                 f"(cosched calibrate) or regenerate the variants (python -m env.sim.variants)")
        return data

    node: NodeSpec
    params: SimParams
    jobs: list[ModelJob] = Field(min_length=1)
    probe: JobParams
    provenance: Provenance

    @field_serializer("params")
    def _params_in_file_order(self, sp: SimParams) -> dict[str, Any]:
        return {k: getattr(sp, k) for k in FILE_ORDER}

    def job_params(self) -> dict[str, JobParams]:
        return {j.name: j.params for j in self.jobs}


def is_node_model(text: str) -> bool:
    """Whether a JSON file's text is a node model (not a bare node spec): cheap, before parsing."""
    head = text[:4096]
    return '"kind"' in head and NODE_MODEL_KIND in head
