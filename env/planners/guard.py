"""The guard every plan passes: a plan predicted below time sharing (throughput < 1 on the node model) is replaced by
the best baseline's plan (predicted), which says which policy asked, which made it, and why. The guard plans its
fallbacks itself, with the baselines' own job information (``PlanContext.baseline_provider``, else the plan's)."""

from __future__ import annotations

from dataclasses import replace
from functools import cache

from env.plan.models import Plan, Window
from env.planners.baselines import PlanContext, Policy
from env.planners.registry import BASELINES
from env.planners.scoring import model_node, no_prediction_reason, predicted_throughput

#: The baselines a plan predicted below time sharing is replaced by (the best of them, predicted).
FALLBACKS = ("pairs", "greedy", "timeshare")
#: On a real node, a baseline replaces a plan it is predicted to beat by more than this share.
REAL_MARGIN = 0.01


@cache
def _baseline(name: str) -> Policy:
    """One object a baseline: the searches keep their evaluator's memo between plans."""
    return BASELINES.get(name)


def guard_plan(plan: Plan, window: Window, ctx: PlanContext) -> Plan:
    """``plan`` with its prediction, or, when it is predicted below time sharing (on a real node: below a baseline), the
    best baseline's plan saying why.
    Either is a new Plan: the one given is not changed."""
    node = ctx.node
    if plan.policy == "timeshare":
        return plan
    if not node.simulated and model_node(node) is None:  # a real node without a node model: nothing to predict with
        if plan.predicted_throughput_vs_timeshare is None and plan.no_prediction is None:
            return plan.model_copy(update={"no_prediction": no_prediction_reason(node)})
        return plan
    solo = sum(info.solo_s for g in plan.groups for j in g.jobs if (info := ctx.provider.get(j.profile)) is not None)
    if plan.predicted_throughput_vs_timeshare is not None and (plan.predictions_source or "").startswith("simulated"):
        pred: tuple[float, list[float] | None] | None = (plan.predicted_throughput_vs_timeshare, None)  # the search's own
    else:
        pred = predicted_throughput(plan, node, solo)
    if pred is None:
        return plan
    thr, makespans = pred
    if makespans is not None and plan.predicted_throughput_vs_timeshare is None:
        plan = with_predictions(plan, thr, makespans, node.name)
    # a real node's plans are scored on a model fitted to it, which its agent was not trained on: no plan is kept there
    # that the model predicts below a baseline's (on a simulated node only below time sharing)
    real = not node.simulated
    if thr >= 1.0 - 1e-9 and not real:
        return plan
    base_ctx = replace(ctx, provider=ctx.baseline_provider or ctx.provider, baseline_provider=None)
    best = None
    for name in FALLBACKS:
        try:
            alt = _baseline(name).plan(window, base_ctx)
        except Exception:  # noqa: BLE001 - a baseline that cannot plan here (e.g. a search's grid) is skipped
            continue
        alt_pred = predicted_throughput(alt, node, solo) if name != "timeshare" else (1.0, None)
        if alt_pred is None:
            continue
        if best is None or alt_pred[0] > best[1] + 1e-9:
            best = (alt, alt_pred[0], alt_pred[1])
    if best is None or (thr >= 1.0 - 1e-9 and best[1] <= thr * (1 + REAL_MARGIN)):
        return plan
    alt, alt_thr, alt_ms = best
    if alt.predicted_throughput_vs_timeshare is None and alt_ms is not None:
        alt = with_predictions(alt, alt_thr, alt_ms, node.name)
    below = "time sharing" if thr < 1.0 - 1e-9 else f"{alt.policy!r}'s plan"
    why = (f"policy {plan.policy!r} planned {thr:.3f} x time sharing (predicted, {node.name}), below "
           f"{below}: replaced by {alt.policy!r}, the best baseline ({alt_thr:.3f}, predicted)")
    return alt.model_copy(update={"requested_policy": plan.policy, "fallback_reason": why, "model": plan.model})


def with_predictions(plan: Plan, throughput: float, makespans: list[float], node_name: str) -> Plan:
    """A copy of ``plan`` carrying the node model's predictions (its throughput and each group's makespan)."""
    groups = [g.model_copy(update={"predicted_makespan_s": t}) for g, t in zip(plan.groups, makespans)]
    groups += plan.groups[len(groups):]
    return plan.model_copy(update={"predicted_throughput_vs_timeshare": throughput,
                                   "predictions_source": f"simulated: {node_name}", "groups": groups})


__all__ = ["FALLBACKS", "guard_plan", "with_predictions"]
