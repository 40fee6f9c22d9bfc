"""The masked softmax and the sampler, in numpy alone (no torch in this module's import chain): the service and the
planners choose with them, and training's behaviour policy samples with them, so a served policy chooses as the
trained one did.
"""

from __future__ import annotations

import numpy as np


def masked_probs(logits: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Softmax over the valid actions only; exactly 0 where ``mask`` is False. Works on one row or a batch.
    Every row must have at least one valid action."""
    m = np.asarray(mask).astype(np.bool_)
    if not m.any(axis=-1).all():
        raise ValueError("no valid action in this state (the mask is all zeros)")
    z = np.where(m, logits, -np.inf)
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)  # exp(-inf) = 0 exactly: masked actions get probability 0
    return (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)


def sample_valid(probs: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> int:
    """Draw one action from ``probs`` restricted to the valid actions. The draw runs over the valid indices
    only (inverse CDF, float64), so a masked action cannot come out whatever the rounding of ``probs``."""
    valid = np.flatnonzero(np.asarray(mask).astype(np.bool_))
    if valid.size == 0:
        raise ValueError("no valid action in this state (the mask is all zeros)")
    cdf = np.cumsum(np.asarray(probs, dtype=np.float64)[valid])
    if not cdf[-1] > 0.0:  # every valid probability underflowed: fall back to uniform over the valid ones
        return int(valid[rng.integers(valid.size)])
    i = int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"))
    return int(valid[min(i, valid.size - 1)])


__all__ = ["masked_probs", "sample_valid"]
