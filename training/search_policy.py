"""The ``agent-search`` policy: the trained actor guiding the search on the node model (numpy only, no torch).

The planner is ``env.planners.agent_search.search_plan``; this module gives it the agent (the loaded model's set
policy, through the search's ``ActionScores`` interface) and the model's checks (``training.policies.AgentPolicy``).
Without a node model to score on (a real node without one), the agent's own plan is returned and says so
(``Plan.no_prediction``, ``fallback_reason``).
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any, Sequence

import numpy as np

from agent.setpolicy import SetPolicy
from env.episode.window import Episode
from env.plan.models import Plan, Window
from env.planners.agent_search import search_plan
from env.planners.scoring import no_prediction_reason, node_scorer
from env.planners.search import DEFAULT_BUDGET, ActionScores, check_budget
from training.policies import AgentPolicy


class SetPolicyScores(ActionScores):
    """The set policy as the search sees it: its search scores (the logits, its own choice on top), its chooser as
    the cheap greedy choice, and, with a group head, its rollout's states scored in one batched pass."""

    cheap_choice = True

    def __init__(self, policy: SetPolicy) -> None:
        self.policy = policy
        self.batched = policy.group is not None  # the head chooses: the rollout's states are scored afterwards

    def scores(self, mask: np.ndarray, ep: Episode) -> np.ndarray:
        return self.policy.search_scores(mask, ep)

    def choose(self, mask: np.ndarray, ep: Episode) -> int:
        return self.policy(None, mask, ep)

    def observe(self, ep: Episode) -> object:
        return ep.set_observation()

    def scores_many(self, observed: Sequence[Any], masks: Sequence[np.ndarray], chosen: Sequence[int]) -> np.ndarray:
        return self.policy.search_scores_many(observed, masks, chosen)


class AgentSearchPolicy(AgentPolicy):
    name = "agent-search"

    def __init__(self, model: str | os.PathLike[str] | Any | None = None, budget: int = DEFAULT_BUDGET) -> None:
        super().__init__(model)
        self.budget = check_budget(budget)

    def plan(self, window: Window, ctx: Any, **notes: Any) -> Plan:
        scorer = node_scorer(ctx.node)
        if scorer is None:  # nothing to score candidates on: the agent's plan, saying why it was not searched
            reason = no_prediction_reason(ctx.node)
            return AgentPolicy.plan(self, window, ctx, policy="agent", requested_policy=self.name, no_prediction=reason,
                                    fallback_reason=f"agent-search scores plans on a node model; {reason}")
        m, window, ref, window_size = self.prepare(window, ctx.node)
        scores = SetPolicyScores(self.agent_chooser(m))
        return search_plan(window, ctx, scores, scorer, budget=self.budget, window_size=window_size, model=ref)


def agent_search_policy(model: Any = None, budget: int = DEFAULT_BUDGET) -> AgentSearchPolicy:
    """One policy object per (model, budget): it caches its loaded model and chooser. A model file is keyed by its
    path and modification time, so a rewritten file is loaded again."""
    if model is None or isinstance(model, (str, os.PathLike)):
        return _by_path(None if model is None else os.fspath(model), _mtime(model), budget)
    return _by_object(model, budget)


@lru_cache(maxsize=32)
def _by_path(path: str | None, _mtime: int, budget: int) -> AgentSearchPolicy:
    return AgentSearchPolicy(path, budget)


@lru_cache(maxsize=32)
def _by_object(model: Any, budget: int) -> AgentSearchPolicy:
    return AgentSearchPolicy(model, budget)  # a loaded model (the service's): hashed by identity


def _mtime(path: Any) -> int:
    try:
        return os.stat(path).st_mtime_ns if path is not None else -1
    except OSError:
        return -1


__all__ = ["AgentSearchPolicy", "SetPolicyScores", "agent_search_policy"]
