"""The ``agent-search`` policy: the trained actor guiding ``env.planners.search`` on the node model (numpy only, no torch).

The actor is used through its existing interface (``training.policies``: the loaded model, its chooser's logits);
the search itself lives in ``env.planners.search``. Without a node model to score on (the real node), the agent's own
plan is returned and says so (``Plan.no_prediction``). ``env.planners.baselines`` imports this module lazily.
"""

from __future__ import annotations

import os
from typing import Any

from agent.modelfile import LoadedSetModel
from agent.setpolicy import SetPolicy
from env.episode.window import Episode, set_episode
from env.plan.models import Plan, SearchInfo, Window
from env.planners.search import (DEFAULT_BUDGET, ReplayChooser, SearchResult, check_budget, no_prediction_reason, node_scorer,
                        search_chunk)
from training.policies import AgentPolicy


class AgentSearchPolicy(AgentPolicy):
    name = "agent-search"

    def __init__(self, model: str | os.PathLike[str] | Any | None = None, budget: int = DEFAULT_BUDGET) -> None:
        super().__init__(model)
        self.budget = check_budget(budget)
        self._searchers: dict[int, tuple[Any, SearchingChooser]] = {}  # id(loaded model) -> (it, its searcher)

    def plan(self, window: Window, ctx: Any) -> Plan:
        scorer = node_scorer(ctx.node)
        if scorer is None:  # nothing to score candidates on: the agent's plan, saying why it was not searched
            plan = AgentPolicy.plan(self, window, ctx)
            plan.policy = "agent"
            plan.requested_policy = self.name
            plan.fallback_reason = f"agent-search scores plans on a node model; {no_prediction_reason(ctx.node)}"
            plan.no_prediction = no_prediction_reason(ctx.node)
            return plan
        chooser = self.chooser(self.model_for(ctx.node))
        chooser.start(scorer)
        plan = AgentPolicy.plan(self, window, ctx)  # the model's checks, the chunks, the plan built as the agent's
        results = chooser.results
        if results:
            solo = sum(ep.solo_total_s() for ep in chooser.episodes)
            makespans = [t for r in results for t in r.makespans]
            for g, t in zip(plan.groups, makespans):
                g.predicted_makespan_s = t
            plan.predicted_throughput_vs_timeshare = solo / sum(makespans)
            plan.predictions_source = f"simulated: {ctx.node.name}"
            plan.search = SearchInfo(budget=self.budget, rollouts=sum(r.rollouts for r in results),
                                     local_calls=sum(r.local_calls for r in results), chunks=len(results),
                                     agent_predicted_throughput_vs_timeshare=solo / sum(r.agent_total_s for r in results))
        return plan


    def chooser(self, m: LoadedSetModel) -> "SearchingChooser":
        """The agent's chooser (``AgentPolicy.agent_chooser``: the set policy), wrapped in the search;
        ``AgentPolicy.plan`` plans with it, the set model's window as one canonical chunk."""
        hit = self._searchers.get(id(m))
        if hit is None or hit[0] is not m:
            if len(self._searchers) > 8:
                self._searchers.clear()
            hit = self._searchers[id(m)] = (m, SearchingChooser(self.agent_chooser(m), self.budget))
        return hit[1]


class SearchingChooser:
    """A chooser for ``plan_window``: on the first step of each chunk's episode it searches that chunk (on fresh
    episodes of the same jobs, ``env.planners.search.search_chunk``) guided by the agent's chooser ``inner``, then replays
    the best plan found. ``inner``: the set-encoder's ``SetPolicy`` (its ``logits(episode)`` are the scores; the
    fresh episodes come from ``env.episode.window.set_episode``, as ``plan_window`` makes the set model's)."""

    def __init__(self, inner: SetPolicy, budget: int) -> None:
        self.inner = inner
        self.budget = budget
        self.reads_obs = False  # the set policy reads the episode: run_episode skips the observation vector

        def set_logits(obs: Any, mask: Any, ep: Episode) -> Any:
            return inner.search_scores(mask, ep)

        set_logits.reads_obs = False  # type: ignore[attr-defined]
        set_logits.choose = lambda mask, ep: inner(None, mask, ep)  # type: ignore[attr-defined] # the greedy action
        if inner.group is not None:  # the head chooses: its rollout's states can be scored afterwards, in one pass
            set_logits.observe = lambda ep: ep.set_observation()  # type: ignore[attr-defined]
            set_logits.many = inner.search_scores_many  # type: ignore[attr-defined]
        self.scores = set_logits
        self.scorer: Any = None
        self.results: list[SearchResult] = []
        self.episodes: list[Episode] = []
        self.replay: ReplayChooser | None = None

    def start(self, scorer: Any) -> None:
        """A new window: forget the last one's chunks."""
        self.scorer = scorer
        self.results, self.episodes, self.replay = [], [], None

    def __call__(self, obs: Any, mask: Any, ep: Episode) -> int:
        if not self.episodes or ep is not self.episodes[-1]:  # the first step of a chunk
            def fresh() -> Episode:  # the set episodes' one factory (ep's jobs are already canonical)
                return set_episode(ep.node, ep.jobs, ep.infos, ep.max_concurrency, n_features=ep.n_features)

            result = search_chunk(fresh, self.scores, self.scorer, self.budget)
            self.results.append(result)
            self.episodes.append(ep)
            self.replay = ReplayChooser(result.actions)
        return self.replay(obs, mask, ep)  # type: ignore[misc]


_CACHE: dict[tuple, AgentSearchPolicy] = {}


def agent_search_policy(model: Any = None, budget: int = DEFAULT_BUDGET) -> AgentSearchPolicy:
    """One policy object per (model, budget): it caches its loaded model and chooser."""
    key_model: Any = id(model) if model is not None and not isinstance(model, (str, os.PathLike)) else (
        None if model is None else (os.fspath(model), _mtime(model)))
    key = (key_model, budget)
    hit = _CACHE.get(key)
    if hit is None or (model is not None and not isinstance(model, (str, os.PathLike)) and hit.model_arg is not model):
        if len(_CACHE) > 32:
            _CACHE.clear()
        hit = _CACHE[key] = AgentSearchPolicy(model, budget)
    return hit


def _mtime(path: Any) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


def _register() -> None:
    from env.planners.baselines import register_policy

    register_policy("agent-search", AgentSearchPolicy)


_register()

__all__ = ["AgentSearchPolicy", "agent_search_policy"]
