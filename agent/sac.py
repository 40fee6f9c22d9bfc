"""The masked softmax of masked discrete Soft Actor-Critic (Christodoulou 2019), in torch: every loss of the
training driver (``training.set_sac``) goes through it; serving uses its numpy twin (``agent.policy``).

Masking, the one subtle part (docs/design/coscheduler.md §7): an invalid action's logit is replaced by a finite value far
below the best valid one (not -inf: -inf - -inf is NaN when a row is fully masked), the log-softmax is taken, then
the probability and the log-probability of masked actions are multiplied by the (float) mask, so they are exactly
0. Every ``p·Q`` and ``p·log p`` sum therefore gets exactly 0 from a masked action and no NaN can appear, even
with a single valid action or none (a terminal state whose mask is all zeros).
"""

from __future__ import annotations

import torch

BIG = 1.0e9  # larger than any logit gap: used to find the best valid logit
MASK_GAP = 80.0  # masked logits sit this far below the best valid one (e^-80 ≈ 1.8e-35: a normal float32)


# ------------------------------------------------------------------------------------ masked softmax
def masked_policy(logits: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(probabilities, log-probabilities) over the valid actions; both exactly 0 where ``mask`` is False."""
    m = mask.to(logits.dtype)
    # Masked logits are put MASK_GAP below the best valid logit (a constant: no gradient reaches them). Their
    # softmax weight e^-80 each is invisible next to 1 in float32, yet stays a normal number: exp() of a far more
    # negative value (-1e9, -inf) is correct but takes a ~50x slower path in torch's CPU kernels, and
    # torch.where on a bool mask is slow too, hence the arithmetic with a float mask.
    with torch.no_grad():
        top = (logits + (m - 1.0) * BIG).amax(dim=-1, keepdim=True)
    shifted = logits * m + (1.0 - m) * (top - MASK_GAP)
    log_p = torch.log_softmax(shifted, dim=-1)
    # Multiplying by the mask makes masked p and log p exactly 0 (all values are finite, so 0·x = 0, never NaN).
    return log_p.exp() * m, log_p * m


__all__ = ["masked_policy"]
