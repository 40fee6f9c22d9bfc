"""The ``agent-search`` policy: the trained actor guiding ``env.search`` on the node model (numpy only, no torch).

The actor is used through its existing interface (``training.policies``: the loaded model, its chooser's logits);
the search itself lives in ``env.search``. Without a node model to score on (the real node), the agent's own
plan is returned and says so (``Plan.no_prediction``). ``env.baselines`` imports this module lazily.
"""

from __future__ import annotations

import os
from typing import Any

from env.episode import Episode, layout_for_size, plan_window
from env.errors import InputError
from env.models import ModelRef, Plan, SearchInfo, Window
from env.search import DEFAULT_BUDGET, ReplayChooser, check_budget, node_scorer, no_prediction_reason, search_chunk
from training.policies import ActorChooser, AgentPolicy


class AgentSearchPolicy(AgentPolicy):
    name = "agent-search"

    def __init__(self, model: str | os.PathLike[str] | Any | None = None, budget: int = DEFAULT_BUDGET) -> None:
        super().__init__(model)
        self.budget = check_budget(budget)

    def plan(self, window: Window, ctx: Any) -> Plan:
        scorer = node_scorer(ctx.node)
        if scorer is None:  # nothing to score candidates on: the agent's plan, saying why it was not searched
            plan = AgentPolicy.plan(self, window, ctx)
            plan.policy = "agent"
            plan.requested_policy = self.name
            plan.fallback_reason = f"agent-search scores plans on a node model; {no_prediction_reason(ctx.node)}"
            plan.no_prediction = no_prediction_reason(ctx.node)
            return plan
        m = self.model_for(ctx.node)
        meta = m.meta
        if window.max_concurrency > meta.max_concurrency:
            raise InputError(f"max_concurrency {window.max_concurrency} is above the limit of the model "
                             f"({meta.max_concurrency}, trained for {meta.trained_for.name}): lower it or train a model with --cmax")
        layout = layout_for_size(meta.obs_size, meta.window_size, ctx.provider.n_features)
        if layout is None:
            raise InputError(f"the model takes {meta.obs_size} observation values, this planner makes another size: "
                             "retrain the model with this cosched")
        chooser = self._choosers.get(id(m))
        if chooser is None:
            chooser = self._choosers[id(m)] = ActorChooser(m.layers, members=m.actors)
        forward = chooser.forward
        results = []
        budget = self.budget

        def scores(obs: Any, mask: Any, ep: Episode) -> Any:
            return forward(obs)

        class _Searched:
            """Searches its chunk on first use (on a fresh episode of the same jobs), then replays the best."""

            replay: ReplayChooser | None = None

            def __call__(self, obs: Any, mask: Any, ep: Episode) -> int:
                if self.replay is None:
                    def fresh() -> Episode:
                        return Episode(ep.node, ep.jobs, ep.infos, max_concurrency=ep.max_concurrency,
                                       window_size=ep.window_size, n_features=ep.n_features, reward=ep.reward,
                                       step_limit=ep.step_limit, obs_layout=ep.obs_layout)

                    res = search_chunk(fresh, scores, scorer, budget)
                    results.append(res)
                    self.replay = ReplayChooser(res.actions)
                return self.replay(obs, mask, ep)

        planned = plan_window(window, ctx.node, ctx.provider, lambda ci: _Searched(), policy=self.name,
                              window_size=meta.window_size, chooser_per_chunk=True, pin_runtime=ctx.pin_runtime,
                              obs_layout=layout, model=ModelRef(id=meta.model_id, trained_for=meta.trained_for.name))
        plan = planned.plan
        if results:
            solo = sum(ep.solo_total_s() for ep in planned.episodes)
            makespans = [t for r in results for t in r.makespans]
            for g, t in zip(plan.groups, makespans):
                g.predicted_makespan_s = t
            plan.predicted_throughput_vs_timeshare = solo / sum(makespans)
            plan.predictions_source = f"simulated: {ctx.node.name}"
            plan.search = SearchInfo(budget=budget, rollouts=sum(r.rollouts for r in results), chunks=len(results),
                                     agent_predicted_throughput_vs_timeshare=solo / sum(r.agent_total_s for r in results))
        return plan


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
    from env.baselines import register_policy

    register_policy("agent-search", AgentSearchPolicy)


_register()

__all__ = ["AgentSearchPolicy", "agent_search_policy"]
