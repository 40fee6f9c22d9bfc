"""Every policy by name, built where it is used (the service, the command line, evaluations): the baselines'
registry (``env.planners.registry``) with the policies that plan with a trained model added."""

from __future__ import annotations

import os

from agent.modelfile import LoadedSetModel
from env.planners.registry import BASELINES, Registry
from env.planners.search import DEFAULT_BUDGET
from training.policies import agent_policy
from training.search_policy import agent_search_policy


def policy_registry(model: str | os.PathLike[str] | LoadedSetModel | None = None,
                    search_budget: int | None = None) -> Registry:
    """Every policy by name: the baselines, and the agent policies with ``model`` (None: the node's shipped or user
    model, looked up when planning) and agent-search's budget (None: its default)."""
    budget = DEFAULT_BUDGET if search_budget is None else search_budget
    return BASELINES.extended({"agent": lambda: agent_policy("agent", model),
                               "fifo": lambda: agent_policy("fifo", model),
                               "agent-search": lambda: agent_search_policy(model, budget)})


__all__ = ["policy_registry"]
