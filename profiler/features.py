"""Profile -> the f numbers the agent sees for a job, and the fitted preprocessing pipeline.

The one place that decides the feature vector. Two stages:

1. ``raw_features(profile)``: the documented transformation below, NaN where a counter is missing.
2. ``FeaturePipeline``: fitted on a set of profiles (the training jobs), a scikit-learn
   ``SimpleImputer(mean) -> StandardScaler`` then clipping to ``[-CLIP, CLIP]``; the availability mask is
   appended unscaled. Saved as JSON parameters (``FeaturePipelineParams``), loaded without unpickling anything.

Value features (``VALUE_FEATURES``; d = perf's duration_time in s, or the wall time; "pki" = per 1000
instructions; log10(1 + x) keeps rates that span decades comparable and finite at 0):

| name | formula | needs |
| --- | --- | --- |
| log10_duration_s | log10(d) | nothing (wall time as fallback) |
| scale_factor | one-core time / whole-node time | the one-core run |
| cpus_utilized | task-clock (s) / d | task-clock |
| log10_ctx_switches_per_s | log10(1 + context-switches / d) | context-switches |
| log10_page_faults_per_s | log10(1 + page-faults / d) | page-faults |
| log10_peak_rss_mib | log10(1 + peak RSS in MiB) | peak_rss_kb |
| ipc | instructions / cpu-cycles | both |
| ghz | cpu-cycles / task-clock (s) / 1e9 | both |
| log10_branch_miss_pki | log10(1 + 1000 branch-misses / instructions) | both |
| log10_l1d_miss_pki, log10_l1i_miss_pki, log10_llc_miss_pki, log10_dtlb_miss_pki, log10_itlb_miss_pki | likewise | the counter and instructions |
| log10_llc_misses_per_s | log10(1 + LLC-load-misses / d) (memory traffic) | LLC-load-misses |

Missing counters, explicitly (a choice, and why): a value feature whose inputs are missing is NaN in stage 1.
The pipeline fills it with the *training mean* of that feature, so after scaling it is exactly 0, the typical
job: an unknown counter pushes a job neither towards compute-bound nor towards memory-bound. Zero-filling the
raw value instead would claim "no cache misses at all", a strong and false statement. Because "typical" and
"unknown" must stay distinguishable, every value feature that can be missing has a 0/1 availability column
``has_<feature>`` (1 = measured) appended to the vector (``MASK_FEATURES``). A feature missing in every training
profile (the hardware counters on a node without a PMU) is filled with 0 and stays 0.

``FEATURE_SET_ID`` names this feature set (a hash of the names and ``FEATURE_VERSION``, which is bumped when
a formula changes): a pipeline or model made for another feature set is refused.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Final, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from profiler.errors import ProfilerInputError
from profiler.models import Profile

FEATURE_VERSION: Final = 1
CLIP: Final = 5.0

_Fn = Callable[[Profile], "float | None"]


def _c(p: Profile, event: str) -> float | None:
    return p.counters.get(event)


def _log1p10(x: float | None) -> float | None:
    return None if x is None else math.log10(1.0 + x)


def _ratio(num: float | None, den: float | None, times: float = 1.0) -> float | None:
    if num is None or den is None or den <= 0:
        return None
    return num * times / den


def _per_s(p: Profile, event: str) -> float | None:
    return _ratio(_c(p, event), p.duration_s)


def _pki(p: Profile, event: str) -> float | None:
    return _log1p10(_ratio(_c(p, event), _c(p, "instructions"), 1000.0))


def _task_clock_s(p: Profile) -> float | None:
    ms = _c(p, "task-clock")
    return None if ms is None else ms / 1000.0


_VALUE_FNS: Final[tuple[tuple[str, _Fn], ...]] = (
    ("log10_duration_s", lambda p: math.log10(p.duration_s)),
    ("scale_factor", lambda p: p.scale_factor),
    ("cpus_utilized", lambda p: _ratio(_task_clock_s(p), p.duration_s)),
    ("log10_ctx_switches_per_s", lambda p: _log1p10(_per_s(p, "context-switches"))),
    ("log10_page_faults_per_s", lambda p: _log1p10(_per_s(p, "page-faults"))),
    ("log10_peak_rss_mib", lambda p: None if p.peak_rss_kb is None else math.log10(1.0 + p.peak_rss_kb / 1024.0)),
    ("ipc", lambda p: _ratio(_c(p, "instructions"), _c(p, "cpu-cycles"))),
    ("ghz", lambda p: _ratio(_c(p, "cpu-cycles"), _task_clock_s(p), 1e-9)),
    ("log10_branch_miss_pki", lambda p: _pki(p, "branch-misses")),
    ("log10_l1d_miss_pki", lambda p: _pki(p, "L1-dcache-load-misses")),
    ("log10_l1i_miss_pki", lambda p: _pki(p, "L1-icache-load-misses")),
    ("log10_llc_miss_pki", lambda p: _pki(p, "LLC-load-misses")),
    ("log10_llc_misses_per_s", lambda p: _log1p10(_per_s(p, "LLC-load-misses"))),
    ("log10_dtlb_miss_pki", lambda p: _pki(p, "dTLB-load-misses")),
    ("log10_itlb_miss_pki", lambda p: _pki(p, "iTLB-load-misses")),
)

#: Value features, in vector order.
VALUE_FEATURES: Final[tuple[str, ...]] = tuple(name for name, _ in _VALUE_FNS)
#: Value features that are always present (no availability column).
ALWAYS_PRESENT: Final[frozenset[str]] = frozenset({"log10_duration_s"})
#: Availability columns (1 = measured), appended after the value features.
MASK_FEATURES: Final[tuple[str, ...]] = tuple(f"has_{n}" for n in VALUE_FEATURES if n not in ALWAYS_PRESENT)
#: The whole feature vector, in order: f = len(FEATURE_NAMES).
FEATURE_NAMES: Final[tuple[str, ...]] = VALUE_FEATURES + MASK_FEATURES
N_FEATURES: Final[int] = len(FEATURE_NAMES)

FEATURE_SET_ID: Final[str] = "features-v{}-{}".format(
    FEATURE_VERSION,
    hashlib.sha256(
        json.dumps({"version": FEATURE_VERSION, "names": FEATURE_NAMES, "clip": CLIP}).encode()
    ).hexdigest()[:12],
)

_MASKED_INDEX: Final[tuple[int, ...]] = tuple(i for i, n in enumerate(VALUE_FEATURES) if n not in ALWAYS_PRESENT)


# -- stage 1: the documented transformation -------------------------------------------------------


def raw_features(profile: Profile) -> np.ndarray:
    """The value features of one profile (float64, len(VALUE_FEATURES)); NaN where missing."""
    out = np.full(len(VALUE_FEATURES), np.nan, dtype=np.float64)
    for i, (_, fn) in enumerate(_VALUE_FNS):
        value = fn(profile)
        if value is not None and math.isfinite(value):
            out[i] = value
    return out


def availability_mask(raw: np.ndarray) -> np.ndarray:
    """The has_<feature> columns of raw value features (1.0 = measured)."""
    raw = np.atleast_2d(raw)
    return (~np.isnan(raw[:, _MASKED_INDEX])).astype(np.float64)


def raw_matrix(profiles: Sequence[Profile]) -> np.ndarray:
    if not profiles:
        raise ProfilerInputError("no profiles given")
    return np.vstack([raw_features(p) for p in profiles])


# -- the figures the reward needs (unscaled) ------------------------------------------------------


@dataclass(frozen=True)
class JobFigures:
    """A job's raw figures for the reward: solo time, scale factor, and an L3-miss measure."""

    solo_s: float
    """Solo time on the whole node (s): perf's duration_time, else the wall time."""
    scale_factor: float | None
    """One-core time / whole-node time; None when not measured."""
    l3_misses_per_s: float | None
    """LLC-load-misses per second of solo time (memory traffic); None when the node cannot count it."""


def job_figures(profile: Profile) -> JobFigures:
    return JobFigures(
        solo_s=profile.duration_s,
        scale_factor=profile.scale_factor,
        l3_misses_per_s=_per_s(profile, "LLC-load-misses"),
    )


# -- stage 2: the fitted pipeline, saved as JSON --------------------------------------------------


class FeaturePipelineParams(BaseModel):
    """The fitted pipeline as a JSON document (no code, nothing to unpickle)."""

    model_config = ConfigDict(extra="forbid")

    kind: str = Field(default="cosched-feature-pipeline")
    feature_set: str
    feature_names: list[str]
    value_features: list[str]
    clip: float = Field(gt=0)
    impute_values: list[float] = Field(description="SimpleImputer(mean).statistics_: the fill of each value feature")
    mean: list[float] = Field(description="StandardScaler.mean_")
    scale: list[float] = Field(description="StandardScaler.scale_ (1 where the training values were constant)")
    var: list[float] = Field(description="StandardScaler.var_")
    n_profiles: int = Field(ge=1, description="how many profiles it was fitted on")
    fitted_on: list[str] = Field(default_factory=list, description="name@node of the profiles it was fitted on")
    sklearn_version: str

    @model_validator(mode="after")
    def _lengths(self) -> "FeaturePipelineParams":
        n = len(self.value_features)
        for field in ("impute_values", "mean", "scale", "var"):
            values = getattr(self, field)
            if len(values) != n:
                raise ValueError(f"{field} has {len(values)} values, not {n}")
            if not all(math.isfinite(v) for v in values):
                raise ValueError(f"{field} holds a non-finite value")
        if any(s <= 0 for s in self.scale):
            raise ValueError("scale values must be > 0")
        return self


class FeaturePipeline:
    """Imputer + scaler + clip over the value features; the availability mask appended unscaled."""

    def __init__(self, params: FeaturePipelineParams) -> None:
        check_feature_set(params.feature_set, what="this feature pipeline")
        if tuple(params.feature_names) != FEATURE_NAMES or tuple(params.value_features) != VALUE_FEATURES:
            raise ProfilerInputError("this feature pipeline lists other features than this cosched computes")
        self.params = params
        # transform is numpy (what SimpleImputer(mean) and StandardScaler do with these parameters): scikit-learn is
        # imported by fit only, so planning (cosched schedule, the service) starts fast and small without it
        self._impute = np.asarray(params.impute_values, dtype=np.float64)
        self._mean = np.asarray(params.mean, dtype=np.float64)
        self._scale = np.asarray(params.scale, dtype=np.float64)

    @classmethod
    def fit(cls, profiles: Sequence[Profile], clip: float = CLIP) -> "FeaturePipeline":
        """Fit on a set of profiles (the training jobs)."""
        import sklearn
        from sklearn.impute import SimpleImputer
        from sklearn.preprocessing import StandardScaler

        raw = raw_matrix(profiles)
        imputer = SimpleImputer(strategy="mean", keep_empty_features=True).fit(raw)
        scaler = StandardScaler().fit(imputer.transform(raw))
        params = FeaturePipelineParams(
            feature_set=FEATURE_SET_ID,
            feature_names=list(FEATURE_NAMES),
            value_features=list(VALUE_FEATURES),
            clip=clip,
            impute_values=[float(v) for v in imputer.statistics_],
            mean=[float(v) for v in scaler.mean_],
            scale=[float(v) for v in scaler.scale_],
            var=[float(v) for v in scaler.var_],
            n_profiles=len(profiles),
            fitted_on=[f"{p.name}@{p.node_id}" for p in profiles],
            sklearn_version=sklearn.__version__,
        )
        return cls(params)

    @property
    def feature_set(self) -> str:
        return self.params.feature_set

    def transform_raw(self, raw: np.ndarray) -> np.ndarray:
        """Raw value features (n, len(VALUE_FEATURES)) with NaN -> (n, N_FEATURES) float32."""
        raw = np.atleast_2d(np.asarray(raw, dtype=np.float64))
        if raw.shape[1] != len(VALUE_FEATURES):
            raise ProfilerInputError(f"expected {len(VALUE_FEATURES)} raw features, got {raw.shape[1]}")
        scaled = (np.where(np.isnan(raw), self._impute, raw) - self._mean) / self._scale
        clipped = np.clip(scaled, -self.params.clip, self.params.clip)
        return np.hstack([clipped, availability_mask(raw)]).astype(np.float32)

    def transform(self, profiles: Sequence[Profile]) -> np.ndarray:
        """Profiles -> (len(profiles), N_FEATURES) float32, in FEATURE_NAMES order."""
        return self.transform_raw(raw_matrix(profiles))

    def transform_one(self, profile: Profile) -> np.ndarray:
        return self.transform([profile])[0]

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(low, high) of every feature (float32): [-clip, clip] for values, [0, 1] for the mask (gymnasium Box)."""
        low = np.array([-self.params.clip] * len(VALUE_FEATURES) + [0.0] * len(MASK_FEATURES), dtype=np.float32)
        high = np.array([self.params.clip] * len(VALUE_FEATURES) + [1.0] * len(MASK_FEATURES), dtype=np.float32)
        return low, high

    # -- persistence (JSON, no pickle) --

    def to_json(self) -> str:
        return self.params.model_dump_json(indent=2)

    def to_dict(self) -> dict[str, object]:
        """The parameters as a JSON-able dict (to embed in a model file)."""
        return self.params.model_dump(mode="json")

    @classmethod
    def from_dict(cls, doc: object) -> "FeaturePipeline":
        return cls.from_json(json.dumps(doc))

    @classmethod
    def from_json(cls, text: str | bytes) -> "FeaturePipeline":
        try:
            raw = json.loads(text)
        except ValueError as exc:
            raise ProfilerInputError(f"not a feature pipeline document: {exc}") from None
        if isinstance(raw, dict) and "feature_set" in raw:
            check_feature_set(str(raw["feature_set"]), what="this feature pipeline")
        try:
            return cls(FeaturePipelineParams.model_validate(raw))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first["loc"]) or "document"
            raise ProfilerInputError(f"not a valid feature pipeline document: {where}: {first['msg']}") from None

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the parameters as JSON (atomically: a crash leaves the old file or the new one)."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(self.to_json() + "\n")
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "FeaturePipeline":
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise ProfilerInputError(f"cannot read the feature pipeline {path}: {exc.strerror or exc}") from None
        return cls.from_json(text)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FeaturePipeline) and self.params == other.params

    def __hash__(self) -> int:
        # equal parameters, equal hash (planners cache job information per pipeline); computed once
        h = self.__dict__.get("_hash")
        if h is None:
            h = self.__dict__["_hash"] = hash(self.params.model_dump_json())
        return h


def check_feature_set(feature_set: str, what: str = "this model") -> None:
    """Refuse anything made for another feature set than the one this code computes."""
    if feature_set != FEATURE_SET_ID:
        raise ProfilerInputError(
            f"{what} was made for feature set {feature_set!r}, but this cosched computes {FEATURE_SET_ID!r}: "
            "refit or retrain it"
        )
