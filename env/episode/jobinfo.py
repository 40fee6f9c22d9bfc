"""What the episode knows about a job: its figures for the reward and its feature vector for the state.

A ``JobInfoProvider`` answers ``get(profile_name) -> JobInfo | None`` (None: no profile, the job is excluded).
Two providers:

* ``ProfileProvider(lookup, pipeline)``: any source of ``profiler.models.Profile`` (the real node's profile
  store: ``lambda name: store.get(name, node_id)``) plus a fitted ``profiler.features.FeaturePipeline``.
* ``sim_provider(node, train_jobs)``: the simulated catalogue's profiles, with a pipeline fitted on the
  training jobs' simulated profiles (so held-out jobs are scaled like unseen jobs on a real node).
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
