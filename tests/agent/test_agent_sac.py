"""The masked softmax (torch, for the losses) and sampler: masked actions get exactly 0 and are never sampled; no NaN."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from agent.policy import sample_valid
from agent.sac import masked_policy

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)


@pytest.mark.parametrize("case", ["one_valid", "all_valid", "none_valid", "huge_logits"])
def test_no_nan_with_extreme_masks(case: str) -> None:
    n = 257
    logits = torch.randn(4, n, requires_grad=True)
    mask = torch.zeros(4, n, dtype=torch.bool)
    if case == "one_valid":
        mask[:, 42] = True
    elif case == "all_valid":
        mask[:] = True
    elif case == "huge_logits":
        mask[:, ::3] = True
        logits = (torch.randn(4, n) * 1e6).requires_grad_(True)
    probs, logp = masked_policy(logits, mask)
    q = torch.randn(4, n) * 100
    loss = (probs * (0.2 * logp - q)).sum(-1).mean() + (probs * logp).sum()
    loss.backward()
    assert torch.isfinite(probs).all() and torch.isfinite(logp).all() and torch.isfinite(loss)
    assert logits.grad is not None and torch.isfinite(logits.grad).all()
    assert (probs[~mask] == 0).all() and (logp[~mask] == 0).all()
    if case == "one_valid":
        assert (probs[:, 42] == 1).all() and (logp[:, 42] == 0).all()
        assert (logits.grad == 0).all()  # a forced choice teaches the actor nothing
    if case == "none_valid":
        assert (probs == 0).all()
    else:
        assert torch.allclose(probs.sum(-1), torch.ones(4))


def test_sample_valid_never_returns_a_masked_action_even_with_bad_probabilities() -> None:
    rng = np.random.default_rng(1)
    mask = np.zeros(257, bool)
    mask[[10, 20]] = True
    bogus = np.ones(257, np.float32)  # probabilities that ignore the mask
    assert {sample_valid(bogus, mask, rng) for _ in range(10_000)} == {10, 20}
    zeros = np.zeros(257, np.float32)  # every valid probability underflowed
    assert {sample_valid(zeros, mask, rng) for _ in range(1_000)} == {10, 20}
    with pytest.raises(ValueError):
        sample_valid(bogus, np.zeros(257, bool), rng)
