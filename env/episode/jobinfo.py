"""What the episode knows about a job: its figures for the reward and its feature vector for the state.

A ``JobInfoProvider`` answers ``get(profile_name) -> JobInfo | None`` (None: no profile, the job is excluded).
Two providers:

* ``ProfileProvider(lookup, pipeline)``: any source of ``profiler.models.Profile`` (the real node's profile
  store: ``lambda name: store.get(name, node_id)``) plus a fitted ``profiler.features.FeaturePipeline``.
* ``sim_provider(node, train_jobs)``: the simulated catalogue's profiles, with a pipeline fitted on the
  training jobs' simulated profiles (so held-out jobs are scaled like unseen jobs on a real node).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Protocol, Sequence

import numpy as np

from env.node.spec import NodeSpec
from profiler.features import N_FEATURES, FeaturePipeline, job_figures
from profiler.models import Profile


@dataclass(frozen=True)
class JobInfo:
    name: str
    solo_s: float  # solo time on the whole node (s)
    scale_factor: float | None  # one-core time / whole-node time
    l3_misses_per_s: float | None  # LLC-load-misses per second of the solo run; None when not counted
    features: np.ndarray = field(repr=False)  # the f scaled features (float32), profiler.features order
    profile: Profile | None = field(default=None, repr=False, compare=False)


class JobInfoProvider(Protocol):
    n_features: int

    def get(self, profile_name: str) -> JobInfo | None: ...

    def missing_reason(self, profile_name: str) -> str: ...


class ProfileProvider:
    """JobInfo from profiles and a fitted feature pipeline; results are cached per name."""

    n_features = N_FEATURES

    def __init__(self, lookup: Callable[[str], Profile | None], pipeline: FeaturePipeline, what: str = "profile") -> None:
        self._lookup = lookup
        self.pipeline = pipeline
        self._what = what
        self._cache: dict[str, JobInfo | None] = {}

    def get(self, profile_name: str) -> JobInfo | None:
        if profile_name in self._cache:
            return self._cache[profile_name]
        prof = self._lookup(profile_name)
        info = None if prof is None else info_from_profile(prof, self.pipeline)
        self._cache[profile_name] = info
        return info

    def missing_reason(self, profile_name: str) -> str:
        return f"no {self._what} named {profile_name!r}: will run alone and be profiled"


def info_from_profile(prof: Profile, pipeline: FeaturePipeline) -> JobInfo:
    fig = job_figures(prof)
    return JobInfo(
        name=prof.name,
        solo_s=fig.solo_s,
        scale_factor=fig.scale_factor,
        l3_misses_per_s=fig.l3_misses_per_s,
        features=pipeline.transform_one(prof).astype(np.float32),
        profile=prof,
    )


_SIM_PROVIDERS: dict[tuple[str, tuple[str, ...]], ProfileProvider] = {}


def sim_provider(node: NodeSpec, train_jobs: Sequence[str] | None = None) -> ProfileProvider:
    """The simulated catalogue as a provider; the feature pipeline is fitted on ``train_jobs`` (default: the paper's 12)."""
    from env.sim.profiles import simulated_profiles
    from env.sim.world import world_for

    train = tuple(train_jobs) if train_jobs is not None else world_for(node).train_jobs
    key = (node.model_dump_json(), train)
    hit = _SIM_PROVIDERS.get(key)
    if hit is not None:
        return hit
    profiles = simulated_profiles(node)
    unknown = [t for t in train if t not in profiles]
    if unknown:
        from env.errors import InputError

        raise InputError(f"training jobs {unknown} are not in the simulated catalogue ({', '.join(profiles)})")
    pipeline = FeaturePipeline.fit([profiles[t] for t in train])
    prov = ProfileProvider(profiles.get, pipeline, what=f"job in the simulated catalogue of {node.name}")
    _SIM_PROVIDERS[key] = prov
    return prov


def provider_for(node: NodeSpec, pipeline: FeaturePipeline | None = None) -> JobInfoProvider:
    """Job information for planning on ``node``: a simulated node's catalogue, the local node's profile store.
    ``pipeline``: a model's own feature pipeline (features scaled as in its training), else the baselines' (the
    catalogue's training jobs; the local store's profiles)."""
    if node.simulated:
        return sim_provider(node) if pipeline is None else _sim_with_pipeline(node, pipeline)
    return local_provider(node, pipeline)


@lru_cache(maxsize=16)
def _sim_with_pipeline(node: NodeSpec, pipeline: FeaturePipeline) -> JobInfoProvider:
    """The simulated catalogue scaled by a model's own pipeline (as in its training; no refit, so no scikit-learn on
    the serving path). Pipelines live as long as their model: the cache keys on the object."""
    from env.sim.profiles import simulated_profiles

    profiles = simulated_profiles(node)
    return ProfileProvider(profiles.get, pipeline, what=f"job in the simulated catalogue of {node.name}")


def local_provider(node: NodeSpec, pipeline: FeaturePipeline | None = None) -> JobInfoProvider:
    """This node's stored profiles as job information."""
    from env.node.discover import node_id
    from profiler.store import ProfileStore

    store, nid = ProfileStore(), node_id(node)
    if pipeline is None:
        pipeline = _fitted_on_store(str(store.path), nid, _store_stamp(store.path))
        if pipeline is None:
            return ProfileProvider(lambda name: None, None, what=f"profile on this node ({nid})")  # type: ignore[arg-type]
    return ProfileProvider(lambda name: store.get(name, nid), pipeline, what=f"profile on this node ({nid})")


def _store_stamp(path: "os.PathLike[str] | str") -> tuple[int, ...]:
    """Changes whenever the store is written (the database or its write-ahead log)."""
    stamps = []
    for suffix in ("", "-wal"):
        try:
            st = os.stat(f"{path}{suffix}")
            stamps += [st.st_mtime_ns, st.st_size]
        except OSError:
            stamps += [0, 0]
    return tuple(stamps)


@lru_cache(maxsize=8)
def _fitted_on_store(store_path: str, nid: str, _stamp: tuple[int, ...]) -> FeaturePipeline | None:
    """The pipeline fitted on the node's stored profiles, refitted only when the store changed."""
    from profiler.store import ProfileStore

    stored = ProfileStore(store_path).list(nid)
    return FeaturePipeline.fit(stored) if stored else None

