"""Learning from every run: a run's groups beside the node model's predictions, kept in the calibration data.

``cosched run`` calls ``predict_and_record(report, node_key)`` after executing a plan: when the node has a node
model (``cosched calibrate`` wrote it at ``model_path(node_key)``) and the model knows a group's jobs, the group's
predicted makespan goes into the run report beside the measured one, and the group (its placements, every
job's measured time, the prediction) into the calibration data (source ``run``), which ``cosched calibrate
--update`` refits from and ``--report`` shows the drift of. A group whose job failed, and a job run alone while
profiled, is measured but not kept (its time says nothing about co-running).
"""

from __future__ import annotations

from pathlib import Path

from env.calibration.calibrate import makespan, predict_times
from env.calibration.store import CalibrationStore, model_path
from env.plan.models import Plan, PlanGroup, RunReport
from env.measure.probing import Placement
from profiler.interference import PlacementRecord, RunRecord


def group_record(group: PlanGroup, times: dict[str, float], simulated: bool, l3_ways: int | None = None,
                 enforced: tuple[bool, bool] = (True, True)) -> RunRecord:
    """A plan group as placements (memory: first-touch and local-alloc place pages locally; its L3 ways and MBA
    cap as counts: the model gives partitions their own ways in order, as the allocator does). A job given every
    way of the L3 (``l3_ways``, the node's) shares the cache unpartitioned: no ways of its own (a node without CAT
    gives every job the whole mask). ``enforced``: whether the plan's (cache ways, bandwidth caps) are enforced on
    its node (``Plan.enforcement``); those that are not leave the cache shared and the bandwidth uncapped, as they
    run."""
    placements = []
    for j in group.jobs:
        ways = next(iter(j.l3.values())).ways if j.l3 and enforced[0] else None
        if ways is not None and l3_ways is not None and ways >= l3_ways:
            ways = None
        caps = [p for p in j.mem_bw_percent.values() if p < 100] if enforced[1] else []
        placements.append(PlacementRecord(job=j.profile, cpus=list(j.cpus),
                                          memory="interleave" if j.memory == "interleave" else "local",
                                          l3_ways=ways, mba_percent=min(caps) if caps else None))
    return RunRecord(kind="corun", group=placements, times_s=[times[j.id] for j in group.jobs],
                     node_seconds=max(times.values()), simulated=simulated)


def predict_plan(plan: Plan, node_key: str) -> Plan | None:
    """``plan`` (made for this node) with the calibrated node model's predictions, labelled with the model's held-out
    error: each group's makespan and the throughput vs time sharing (every job alone on the whole node, predicted
    by the same model); None when the node has no calibrated model or the model does not know a job of the plan
    (``service.planning`` would call it for plans on a real node; ``cosched run`` predicts the same way)."""
    from env.calibration.learned import planning_model

    got = planning_model(node_key) if plan.groups else None  # the calibrated model and the programs learned since
    if got is None:
        return None
    path, model, learned = got
    ways = min((d.ways for d in model.node.l3), default=None)
    enforced = (plan.enforcement.l3, plan.enforcement.mem_bw)
    records = [group_record(g, {j.id: 0.0 for j in g.jobs}, False, ways, enforced) for g in plan.groups]
    alone = [RunRecord(kind="solo", group=[PlacementRecord(job=j.profile, cpus=list(model.node.cpus))], times_s=[0.0],
                       node_seconds=0.0) for g in plan.groups for j in g.jobs]
    times = predict_times(model, records + alone)
    if any(t is None for t in times):
        return None
    spans = [makespan(t, [Placement(p.job, tuple(p.cpus)) for p in r.group]) for t, r in zip(times, records)]  # type: ignore[arg-type]
    solo = sum(t[0] for t in times[len(records):])  # type: ignore[index]
    h = model.provenance.heldout
    error = (f"held-out median abs error {h.median_abs_error_pct:.1f} %, p90 {h.p90_abs_error_pct:.1f} % (n {h.n})"
             + (f", noise floor {h.noise_floor:.1f} %" if h.noise_floor is not None else "")
             if h is not None and h.n else "no held-out error measured")
    used = {j.profile for g in plan.groups for j in g.jobs}
    new = [lj for lj in learned if lj.name in used]
    if new:  # programs learned from production runs: their own uncertainty
        error += "; " + ", ".join(f"{lj.name}: {lj.coruns} co-run{'s' if lj.coruns != 1 else ''}"
                                  + (f", {lj.error_pct:.1f} % on them" if lj.error_pct is not None else "")
                                  + ("" if lj.known else ", cautious") for lj in new)
    groups = [g.model_copy(update={"predicted_makespan_s": round(t, 4)}) for g, t in zip(plan.groups, spans)]
    return plan.model_copy(update={
        "groups": groups, "predicted_throughput_vs_timeshare": round(solo / sum(spans), 4) if sum(spans) > 0 else None,
        "predictions_source": f"node model {path} (calibrated on this node; {error})", "no_prediction": None})


def predict_and_record(report: RunReport, node_key: str, store: CalibrationStore | None = None) -> RunReport:
    """The report with each group's predicted makespan (where the node model can say) and where predictions came
    from; the groups stored in the calibration data. No node model: the report says so, nothing is stored."""
    from env.calibration.learned import planning_model

    path = model_path(node_key)
    got = planning_model(node_key)  # the calibrated model and the programs learned since: their co-runs are kept too
    if got is None:
        return report.model_copy(update={"predictions_source": f"none: no node model for {node_key} "
                                                                f"(cosched calibrate writes {path})"})
    model = got[1]
    records, keep = [], []
    by_index = {g.index: g for g in report.plan.groups}
    for g in report.groups:
        pg = by_index.get(g.index)
        if pg is None or g.solo_profile or any(j.exit_code != 0 for j in g.jobs):
            continue
        records.append(group_record(pg, {j.id: j.wall_s for j in g.jobs}, report.simulated,
                                    min((d.ways for d in model.node.l3), default=None),
                                    (report.plan.enforcement.l3, report.plan.enforcement.mem_bw)))
        keep.append(g.index)
    predicted = predict_times(model, records)  # type: ignore[arg-type]
    ms: dict[int, float] = {}
    stored = []
    for idx, rec, pred in zip(keep, records, predicted):
        if pred is None:
            continue
        rec.predicted_s = pred
        ms[idx] = makespan(pred, [Placement(p.job, tuple(p.cpus)) for p in rec.group])
        stored.append(rec)
    if stored:
        (store or CalibrationStore()).add(node_key, stored, "run", str(path.resolve()))
    groups = [g.model_copy(update={"predicted_makespan_s": ms.get(g.index)}) for g in report.groups]
    return report.model_copy(update={"groups": groups, "predictions_source": f"node model {path}"})
