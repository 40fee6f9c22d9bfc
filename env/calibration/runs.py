"""Learning from every run: a run's groups beside the node model's predictions, kept in the calibration data.

``cosched run`` calls ``predict_and_record(report, node_key)`` after executing a plan: when the node has a node
model (``cosched calibrate`` wrote it at ``model_path(node_key)``) and the model knows a group's jobs, the group's
predicted makespan goes into the run report beside the measured one, and the group (its placements, every
job's measured time, the prediction) into the calibration data (source ``run``), which ``cosched calibrate
--update`` refits from and ``--report`` shows the drift of. A group whose job failed, and a job run alone while
profiled, is measured but not kept (its time says nothing about co-running).

A continuous run (``cosched run --mode continuous``, decided online) is kept too (``record_online_run``): each set of
its jobs that overlapped in time is one record with each job's start (``RunRecord.start_s``), from which the
programs learned from production runs are fitted (``env.calibration.learned``); the refit of the calibrated model
takes groups only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

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


def online_records(jobs: Sequence[tuple[str, list[int], str | None, float, float]], simulated: bool) -> list[RunRecord]:
    """A continuous run's jobs (program, CPUs, memory policy, start, end: seconds) as calibration records: each set of
    jobs that overlapped in time, chained (a job that overlapped one of the set is in it), is one record with each
    job's start (``RunRecord.start_s``, from the set's first) and measured time; a job that overlapped none is a
    record of its own, alone on its CPUs, as a group plan's lone job is."""
    order = sorted(jobs, key=lambda j: (j[3], j[4]))
    sets: list[list[tuple[str, list[int], str | None, float, float]]] = []
    reach = -1.0
    for j in order:
        if sets and j[3] < reach:  # starts before the set's last end: it overlaps the set
            sets[-1].append(j)
        else:
            sets.append([j])
            reach = -1.0
        reach = max(reach, j[4])
    out = []
    for s in sets:
        t0 = s[0][3]
        placements = [PlacementRecord(job=p, cpus=list(c), memory="interleave" if m == "interleave" else "local")
                      for p, c, m, _, _ in s]
        out.append(RunRecord(kind="corun", group=placements, times_s=[round(e - b, 4) for _, _, _, b, e in s],
                             start_s=[round(b - t0, 4) for _, _, _, b, _ in s] if len(s) > 1 else None,
                             node_seconds=round(max(e for *_, e in s) - t0, 4), simulated=simulated))
    return out


def record_online_run(jobs: Sequence[tuple[str, list[int], str | None, float, float]], node_key: str, simulated: bool,
                      store: CalibrationStore | None = None) -> tuple[int, str]:
    """Keep a continuous run's jobs in the calibration data (source ``run``; ``online_records``) with the node model's
    predictions, so that the programs learned from production runs learn from continuous runs as from groups.
    Returns (records kept, why none where 0): none without a node model, or for records holding a program the model
    does not know."""
    from env.calibration.learned import planning_model

    got = planning_model(node_key)
    if got is None:
        return 0, f"no node model for {node_key} (cosched calibrate writes {model_path(node_key)})"
    path, model, _ = got
    records = online_records(jobs, simulated)
    stored = []
    for rec, pred in zip(records, predict_times(model, records)):
        if pred is not None:
            rec.predicted_s = pred
            stored.append(rec)
    if stored:
        (store or CalibrationStore()).add(node_key, stored, "run", str(path.resolve()))
    return len(stored), "" if stored else "the node model knows none of its sets of jobs"
