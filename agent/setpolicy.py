"""The set-encoder actor as an episode chooser, numpy only (the service's path; no torch).

``SetPolicy(model)(obs, mask, episode) -> action`` and ``probs(obs, mask, episode)``: the chooser interface of
``env.episode.window`` (``obs`` is not used: the network reads ``episode.set_observation()``, a set of job tokens that
any window size gives). Greedy by default (argmax of the logits over the valid actions); ``deterministic=False``
samples with ``agent.policy.sample_valid`` and the policy's own seeded generator. ``fifo``: skip is never chosen
while another action is open (the paper's "RL - FIFO").

A model with a group-cost head (``agent.groupnet``) plans greedily with it (``agent.grouping.GroupChooser``: the
grouping, the core options and the schedule), the actor's argmax answering where the head's plan does not apply;
``group=False`` (and ``fifo``) plan with the actor alone. ``search_scores`` are the actor's logits with the
head's action raised just above the best, so a search guided by them rolls out the agent's own plan first.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

import numpy as np

from agent.grouping import GroupChooser, GroupPlanner
from agent.modelfile import LoadedSetModel, NodeShape, load_set_model
from agent.policy import masked_probs, sample_valid
from agent.setnet import SetNetShape, set_logits, set_logits_many


class SetPolicy:
    reads_obs = False  # it reads the episode (env.episode.planning.run_episode then skips the vector observation)

    def __init__(self, model: LoadedSetModel, *, deterministic: bool = True, seed: int | None = 0,
                 fifo: bool = False, group: bool = True) -> None:
        self.model = model
        self.meta = model.meta
        self.shape = SetNetShape.from_dict(model.meta.net)
        self.params = model.params
        self.deterministic = deterministic
        self.fifo = fifo
        self.rng = np.random.default_rng(seed)
        self.group: GroupChooser | None = None
        if group and not fifo and deterministic and model.group_params and model.meta.group_head is not None:
            self.group = GroupChooser(GroupPlanner(model.meta.group_head, model.group_params), self._actor_choice)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], *, expect_node_shape: NodeShape | Mapping[str, Any] | None = None,
                  expect_feature_set: str | None = None, **kw: Any) -> "SetPolicy":
        return cls(load_set_model(path, expect_node_shape=expect_node_shape, expect_feature_set=expect_feature_set), **kw)

    def logits(self, episode: Any) -> np.ndarray:
        s = episode.set_observation()
        return set_logits(self.shape, self.params, s.tokens, s.context, s.current)

    def _mask(self, mask: np.ndarray) -> np.ndarray:
        m = np.asarray(mask).astype(np.bool_)
        if self.fifo and m[-1] and m[:-1].any():  # skip is the last action (env.plan.actions.SKIP)
            m = m.copy()
            m[-1] = False
        return m

    def probs(self, obs: Any, mask: np.ndarray, episode: Any) -> np.ndarray:
        """Probabilities over all actions (exactly 0 where masked) in the episode's state."""
        return masked_probs(self.logits(episode), self._mask(mask))

    def search_scores(self, mask: np.ndarray, episode: Any) -> np.ndarray:
        """What a search ranks actions by: the logits, the agent's own action on top."""
        logits = self.logits(episode)
        if self.group is not None:
            logits = _on_top(logits.copy(), mask, self(None, mask, episode))
        return logits

    def search_scores_many(self, observations: Sequence[Any], masks: Sequence[np.ndarray],
                           chosen: Sequence[int]) -> np.ndarray:
        """``search_scores`` of several states at once (rows), from their ``episode.set_observation()``s and the
        actions the agent chose there (one batched pass of the network: a search records the agent's whole
        rollout, then scores it)."""
        logits = set_logits_many(self.shape, self.params, [(o.tokens, o.context, o.current) for o in observations])
        for row, mask, a in zip(logits, masks, chosen):
            _on_top(row, mask, a)
        return logits

    def _actor_choice(self, obs: Any, mask: np.ndarray, episode: Any) -> int:
        m = self._mask(mask)
        return int(np.argmax(np.where(m, self.logits(episode), -np.inf)))

    def __call__(self, obs: Any, mask: np.ndarray, episode: Any) -> int:
        m = self._mask(mask)
        if not m.any():
            raise ValueError("no valid action in this state (the mask is all zeros)")
        if self.group is not None:
            return self.group(obs, m, episode)
        logits = self.logits(episode)
        if self.deterministic:
            return int(np.argmax(np.where(m, logits, -np.inf)))
        return sample_valid(masked_probs(logits, m), m, self.rng)


def _on_top(logits: np.ndarray, mask: np.ndarray, a: int) -> np.ndarray:
    """``logits`` (changed in place) with action ``a`` just above the best valid one."""
    logits[a] = np.max(np.where(np.asarray(mask).astype(np.bool_), logits, -np.inf)) + np.float32(0.01)
    return logits


__all__ = ["SetPolicy"]
