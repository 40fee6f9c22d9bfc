"""Inference from a model file in numpy alone: no torch anywhere in this module's import chain, so the
service and ``cosched schedule`` load in a fraction of a second and need no training stack.

The forward pass is the actor's MLP (Linear → ReLU ×3 → Linear) in float32; the masked softmax and the
sampling rule here are the same ones training uses (``agent.sac`` imports ``sample_valid`` from this
module), so a served policy chooses as the trained one did.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

import numpy as np

from agent.modelfile import LoadedModel, NodeShape, load_model


def forward_logits(layers: Sequence[tuple[np.ndarray, np.ndarray]], obs: np.ndarray) -> np.ndarray:
    """Logits of the MLP for one observation (obs_dim,) or a batch (B, obs_dim). ``layers`` holds
    (weight_t (in, out), bias (out,)): weights are kept transposed so ``h @ W`` reads memory in order."""
    h = np.asarray(obs, dtype=np.float32)
    last = len(layers) - 1
    for i, (w_t, b) in enumerate(layers):
        h = h @ w_t
        h += b
        if i < last:
            np.maximum(h, 0.0, out=h)
    return h


class MeanLogits:
    """The logits of an actor, or the mean logits of an ensemble of same-shaped actors, for one observation or a
    batch. ``members``: each a list of (weight (out, in), bias (out,)) as in the model file. (Stacking the members
    into wide or batched matrices measured no faster than one pass each: the weights, not the calls, cost.)"""

    def __init__(self, members: Sequence[Sequence[tuple[np.ndarray, np.ndarray]]]) -> None:
        if not members:
            raise ValueError("an actor ensemble needs at least one member")
        self.members = [[(np.ascontiguousarray(np.asarray(w, dtype=np.float32).T), np.ascontiguousarray(b, dtype=np.float32))
                         for w, b in m] for m in members]
        self.layers = self.members[0]  # the first actor (transposed), what forward_logits takes

    @property
    def weight_bytes(self) -> int:
        return int(sum(w.nbytes + b.nbytes for m in self.members for w, b in m))

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        out = forward_logits(self.layers, obs)
        if len(self.members) > 1:
            for m in self.members[1:]:
                out += forward_logits(m, obs)
            out /= len(self.members)
        return out


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


class ActorPolicy:
    """The trained actor as a chooser: ``act(obs, mask) -> action``. Greedy (argmax over the valid actions)
    by default; ``deterministic=False`` samples with its own RNG seeded by ``seed``."""

    def __init__(self, model: LoadedModel, *, deterministic: bool = True, seed: int | None = 0) -> None:
        self.model = model
        self.meta = model.meta
        self.deterministic = deterministic
        self.rng = np.random.default_rng(seed)
        self.forward = MeanLogits(model.actors)  # the actor, or the mean of an ensemble's actors
        self.layers = self.forward.layers
        self.obs_size = model.meta.obs_size
        self.n_actions = model.meta.n_actions

    @classmethod
    def from_file(
        cls,
        path: str | os.PathLike[str],
        *,
        expect_node_shape: NodeShape | Mapping[str, Any] | None = None,
        expect_feature_set: str | None = None,
        deterministic: bool = True,
        seed: int | None = 0,
    ) -> "ActorPolicy":
        model = load_model(path, expect_node_shape=expect_node_shape, expect_feature_set=expect_feature_set)
        return cls(model, deterministic=deterministic, seed=seed)

    @property
    def weight_bytes(self) -> int:
        return self.forward.weight_bytes

    def _check(self, obs: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        o = np.asarray(obs, dtype=np.float32)
        m = np.asarray(mask).astype(np.bool_)
        if o.shape[-1] != self.obs_size:
            raise ValueError(f"observation has {o.shape[-1]} values; this model takes {self.obs_size}")
        if m.shape[-1] != self.n_actions:
            raise ValueError(f"action mask has {m.shape[-1]} entries; this model has {self.n_actions} actions")
        return o, m

    def probs(self, obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Probabilities over all actions (0 where masked), for one observation or a batch."""
        o, m = self._check(obs, mask)
        return masked_probs(self.forward(o), m)

    def act(self, obs: np.ndarray, mask: np.ndarray) -> int:
        o, m = self._check(obs, mask)
        logits = self.forward(o)
        if self.deterministic:
            if not m.any():
                raise ValueError("no valid action in this state (the mask is all zeros)")
            return int(np.argmax(np.where(m, logits, -np.inf)))
        return sample_valid(masked_probs(logits, m), m, self.rng)

    __call__ = act

class ActorChooser:
    """The actor as an episode chooser (obs, mask, episode) -> action: argmax of the logits over the valid
    actions. ``fifo``: skip is never chosen while any other action is open (it always is, see env.episode)."""

    def __init__(self, layers: list[tuple[np.ndarray, np.ndarray]], *, fifo: bool = False,
                 members: Sequence[list[tuple[np.ndarray, np.ndarray]]] | None = None) -> None:
        # (weight (out, in), bias) -> transposed contiguous copies (MeanLogits); an ensemble's logits are averaged
        self.forward = MeanLogits(members if members else [layers])
        self.layers = self.forward.layers
        self.fifo = fifo

    def probs(self, obs: np.ndarray, mask: np.ndarray, episode: Any = None) -> np.ndarray:
        """Probabilities over all actions (exactly 0 where masked, and on skip for fifo while another is open): the
        chooser interface the planning-time search reads, as ``agent.setpolicy.SetPolicy.probs``."""
        m = np.asarray(mask).astype(np.bool_)
        if self.fifo and m[-1] and m[:-1].any():
            m = m.copy()
            m[-1] = False
        return masked_probs(self.forward(obs), m)

    def __call__(self, obs: np.ndarray, mask: np.ndarray, episode: Any = None) -> int:
        logits = self.forward(obs)
        # The argmax over the valid actions only (a few hundred at most, often 6): the first maximal valid index,
        # as np.argmax(np.where(mask, logits, -inf)) picks it, without a bool copy and a 257-wide where per step.
        valid = np.asarray(mask).ravel().nonzero()[0]  # np.flatnonzero, without its wrappers
        skip = len(logits) - 1  # the last action is skip (env.actions.SKIP)
        if self.fifo and valid.size > 1 and valid[-1] == skip:
            valid = valid[:-1]  # skip is closed to fifo while any other action is open
        if valid.size:
            best = int(valid[logits[valid].argmax()])
            if logits[best] != -np.inf:
                return best
        # Degenerate (no valid action, or every valid logit -inf): the full masked argmax, for the same answer.
        m = np.asarray(mask).astype(np.bool_)
        if self.fifo and m[skip] and m[:skip].any():
            m[skip] = False
        return int(np.argmax(np.where(m, logits, -np.inf)))


__all__ = ["ActorPolicy", "ActorChooser", "MeanLogits", "forward_logits", "masked_probs", "sample_valid"]
