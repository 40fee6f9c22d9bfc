"""The planner's per-episode caches (env.episode) change nothing: rewards and observations as computed afresh."""

from __future__ import annotations

import numpy as np

from env.actions import SKIP
from env.episode import Episode, rw_intermediate, window_means
from env.models import WindowJob
from env.nodes import load_node
from service.planning import provider_for


def test_cached_means_and_fractions_match_fresh_ones() -> None:
    node = load_node("sim:reference")
    provider = provider_for(node)
    names = ["MG", "EP", "CG", "FT"]
    infos = [provider.get(n) for n in names]
    for layout in ("slots-v1", "queue-v2"):
        ep = Episode(node, [WindowJob(id=n) for n in names], infos, max_concurrency=2, n_features=provider.n_features,
                     obs_layout=layout)
        while not ep.done:
            first = ep.observation()
            assert np.array_equal(first, ep.observation())  # cached rows are not written into
            choices = [int(a) for a in np.flatnonzero(ep.action_mask()) if a != SKIP] or [SKIP]
            action = choices[len(choices) // 2]
            slot = ep.current
            reward = ep.step(action)
            if slot is not None and ep.alloc[slot] is not None:
                fresh = rw_intermediate(infos[slot], infos, ep.alloc[slot], node)
                assert reward == ep.reward.intermediate_weight * fresh
                assert rw_intermediate(infos[slot], infos, ep.alloc[slot], node, window_means(infos)) == fresh
