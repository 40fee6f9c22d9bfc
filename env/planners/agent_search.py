"""``agent-search`` as a planner: the agent's plan improved by a search on the node model (``env.planners.search``).

The agent comes in through ``ActionScores`` (``env`` does not import ``agent/`` or ``training/``). The window is
planned as the set-encoder agent plans it (its jobs in canonical order, chunks of up to ``window_size``); each
chunk is searched on fresh episodes of its jobs, the best action sequence found is replayed into the plan's
episode, and the plan is built once, with the node model's predictions and what the search did (``SearchInfo``).
"""

from __future__ import annotations

from env.episode.window import Episode

from env.episode.planning import plan_window, set_episode
from env.plan.models import ModelRef, Plan, SearchInfo, Window
from env.planners.baselines import PlanContext
from env.planners.scoring import Scorer
from env.planners.search import ActionScores, ReplayChooser, SearchResult, search_chunk


def search_plan(window: Window, ctx: PlanContext, scores: ActionScores, scorer: Scorer, *, budget: int,
                window_size: int, model: ModelRef | None = None, policy: str = "agent-search") -> Plan:
    results: list[SearchResult] = []

    def searched(ep: Episode) -> ReplayChooser:
        def fresh() -> Episode:  # the set episodes' one factory (ep's jobs are already canonical)
            return set_episode(ep.node, ep.jobs, ep.infos, ep.max_concurrency, n_features=ep.n_features)

        result = search_chunk(fresh, scores, scorer, budget)
        results.append(result)
        return ReplayChooser(result.actions)

    def predictions(episodes: list[Episode]) -> dict:
        if not results:
            return {}
        solo = sum(ep.solo_total_s() for ep in episodes)
        makespans = [t for r in results for t in r.makespans]
        info = SearchInfo(budget=budget, rollouts=sum(r.rollouts for r in results),
                          local_calls=sum(r.local_calls for r in results), chunks=len(results),
                          agent_predicted_throughput_vs_timeshare=solo / sum(r.agent_total_s for r in results))
        return {"predicted_makespans": makespans, "predicted_throughput": solo / sum(makespans),
                "predictions_source": f"simulated: {ctx.node.name}", "search": info}

    return plan_window(window, ctx.node, ctx.provider, searched, policy=policy, window_size=window_size,
                       chooser_per_chunk=True, pin_runtime=ctx.pin_runtime, canonical=True, model=model,
                       finish=predictions).plan


__all__ = ["search_plan"]
