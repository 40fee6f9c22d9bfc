"""Whether a trained model knows a window's programs: the range of the programs' features it was trained on
(``training["feature_range"]`` in the model file, written by ``cosched train``: ``training.validation.trained_range``), else its feature pipeline's spread
(a model written before the range was kept, on a real node: more than ``STALE_Z`` standard deviations from the training
mean; on a simulated node such a model is its shipped one, trained on that node's programs, and nothing is said).

A program outside that range (a margin of a quarter of the range on either side) is one the agent never saw the
like of: its plan for it is a guess. The plan says so in one line (``Plan.stale_model``) with the one command that
refreshes the model: ``cosched train --node local --refresh`` on this node (a few minutes: the calibrated node
model with every program profiled since, ``env.calibration.learned``), ``cosched train --node NODE`` on a simulated
one.
"""

from __future__ import annotations

import math
from typing import Any

from env.node.spec import NodeSpec
from profiler.features import VALUE_FEATURES, raw_features
from profiler.models import Profile

STALE_Z = 4.0
MARGIN = 0.25  # of the trained range, on either side


def outside(meta: Any, profile: Profile, spread: bool = True) -> str | None:
    """The first feature of ``profile`` outside what the model (``meta``: its SetModelMeta) was trained on, as
    'NAME VALUE (trained LO..HI)', or None. ``spread``: for a model without its kept range, judge by its feature
    pipeline's spread (else say nothing)."""
    raw = raw_features(profile)
    rng = (meta.training or {}).get("feature_range")
    if rng and rng.get("features") == list(VALUE_FEATURES):
        for name, v, lo, hi in zip(VALUE_FEATURES, raw, rng["lo"], rng["hi"]):
            if lo is None or hi is None or not math.isfinite(v):
                continue
            pad = max(MARGIN * (hi - lo), 0.05 * max(abs(lo), abs(hi)), 1e-3)
            if v < lo - pad or v > hi + pad:
                return f"{name} {v:.3g} (trained {lo:.3g}..{hi:.3g})"
        return None
    pipe = meta.feature_pipeline or {}
    if not spread or pipe.get("value_features") != list(VALUE_FEATURES):
        return None
    for name, v, mean, scale in zip(VALUE_FEATURES, raw, pipe["mean"], pipe["scale"]):
        if math.isfinite(v) and abs(v - mean) / scale > STALE_Z:
            return f"{name} {v:.3g} (trained mean {mean:.3g}, sd {scale:.3g})"
    return None


def stale_note(meta: Any, node: NodeSpec, profiles: dict[str, Profile]) -> str | None:
    """One line naming the window's programs the model was not trained on the like of, and the refresh command."""
    # A simulated node's shipped model was trained on that node's programs: without a kept range, its spread
    # (long-tailed features such as instruction-cache misses) would flag the node's own catalogue.
    spread = not node.simulated
    bad = [(name, why) for name, prof in sorted(profiles.items()) if (why := outside(meta, prof, spread)) is not None]
    if not bad:
        return None
    command = "cosched train --node local --refresh" if not node.simulated else f"cosched train --node {node.name}"
    first, why = bad[0]
    more = f" and {len(bad) - 1} more" if len(bad) > 1 else ""
    return (f"the model was not trained on programs like {first} ({why}){more}: its plan for them is a guess; "
            f"refresh it with `{command}`")


__all__ = ["outside", "stale_note"]
