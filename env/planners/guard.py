"""The guard every plan passes: a plan predicted below time sharing (throughput < 1 on the node model) is replaced by
the best baseline's plan (predicted), which says which policy asked, which made it, and why. On a real node, whose
model is a fit with an error, a plan is also replaced when a baseline is predicted better, and a plan searched on the
model (agent, agent-search) when it is not predicted better than the best baseline by more than that error. The guard plans its
fallbacks itself, with the baselines' own job information (``PlanContext.baseline_provider``, else the plan's)."""

from __future__ import annotations

from dataclasses import replace
from functools import cache

from env.calibration.learned import model_uncertainty
from env.plan.models import Plan, Window
from env.planners.baselines import PlanContext, Policy
from env.planners.registry import BASELINES
from env.planners.scoring import model_node, no_prediction_reason, predicted_throughput

#: The baselines a plan predicted below time sharing is replaced by (the best of them, predicted).
FALLBACKS = ("pairs", "greedy", "timeshare")
#: On a real node, a baseline replaces a plan it is predicted to beat by more than this share; a plan searched on the
#: node's model (any policy but the fallbacks) is kept only when predicted better than the best of them by more than
#: the model's error (``env.calibration.learned.model_uncertainty``: measured on this node, the default's searched
#: plans predicted 1-5 % over greedy's lost 7 % to it, docs/real-node.md).
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
    if best is None or (thr >= 1.0 - 1e-9 and _groups(best[0]) == _groups(plan)):  # the baseline's own plan
        return plan
    # a plan searched on the model must beat the simple rule by more than the model's error to be trusted over it
    error = model_uncertainty(model_node(node)) if real and plan.policy not in FALLBACKS else 0.0
    if thr >= 1.0 - 1e-9 and (thr > best[1] * (1 + error) if error > 0 else best[1] <= thr * (1 + REAL_MARGIN)):
        return plan
    alt, alt_thr, alt_ms = best
    if alt.predicted_throughput_vs_timeshare is None and alt_ms is not None:
        alt = with_predictions(alt, alt_thr, alt_ms, node.name)
    if thr < 1.0 - 1e-9:
        below = "below time sharing"
    elif alt_thr > thr * (1 + 1e-9):
        below = f"below {alt.policy!r}'s plan"
    else:
        below = (f"within the node model's error ({error:.1%}: the p90 of its held-out errors) of {alt.policy!r}'s "
                 "plan, which is not searched on the model")
    why = (f"policy {plan.policy!r} planned {thr:.3f} x time sharing (predicted, {node.name}), {below}: "
           f"replaced by {alt.policy!r}, the best baseline ({alt_thr:.3f}, predicted)")
    return alt.model_copy(update={"requested_policy": plan.policy, "fallback_reason": why, "model": plan.model})


def _groups(plan: Plan) -> list[frozenset]:
    """The plan's groups as what decides their times: each job's id and allocation, in any order."""
    def job(j) -> tuple:  # noqa: ANN001 - PlanJob
        return (j.id, tuple(j.cpus), j.memory, repr(sorted(j.l3.items())), repr(sorted(j.mem_bw_percent.items())))
    return sorted((frozenset(job(j) for j in g.jobs) for g in plan.groups), key=lambda g: sorted(map(repr, g)))


def with_predictions(plan: Plan, throughput: float, makespans: list[float], node_name: str) -> Plan:
    """A copy of ``plan`` carrying the node model's predictions (its throughput and each group's makespan)."""
    groups = [g.model_copy(update={"predicted_makespan_s": t}) for g, t in zip(plan.groups, makespans)]
    groups += plan.groups[len(groups):]
    return plan.model_copy(update={"predicted_throughput_vs_timeshare": throughput,
                                   "predictions_source": f"simulated: {node_name}", "groups": groups})


__all__ = ["FALLBACKS", "guard_plan", "with_predictions"]
