"""Running a continuous plan (``"mode": "continuous"``): each launch starts at an event, never before its ``after``.

Both runners follow ``env.plan.stream_plan.LaunchOrder``: launches start in their order, each once every job of its
``after`` has ended (the ends that happen, not the predicted ones), its CPUs are free and fewer than Cmax jobs run;
the plan's changes are applied when the job they are tied to ends; a give-back (a change with ``before_launch``) just
before that launch starts: journaled, then every thread of the job re-pinned onto the CPUs it keeps
(``profiler.repin``). A resumed run starts a launch cut off again whole, on its own CPUs.

* ``simulate_launches``: on the node model of the simulated node the plan was made for (``env.sim.stream``); every
  figure simulated.
* ``run_launches``: on this node, each launch in its own process group with its ``launch`` argv (never a shell),
  output in the run directory, the journal (``env.real.journal``: one line per event, flushed) written as it goes:
  ``run_start``, ``job_start``, ``job_cpus``, ``job_end``, ``change``, ``run_end`` (or ``interrupted``). ``--resume``
  keeps the launches whose ``job_end`` is journaled; a launch cut off is stopped (``resume_state``) and runs again
  whole. A resumed run's clock goes on from its last journaled end.
* Changes go through resctrl: a launch's resctrl group (joined by ``cosched-resctrl-exec`` before the job's program
  starts) has its schemata rewritten. Where the plan does not enforce ways or bandwidth (this development machine has
  no resctrl) the change is journaled as not applied, with the reason.
* Jobs without a profile (``excluded``) run alone on the whole node after the launches, while profiled.
"""

from __future__ import annotations

import math
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from env.errors import InputError, RunError
from env.node.resctrl import create_group, group_path, remove_group, schemata
from env.node.spec import NodeSpec
from env.plan.allocate import Allocation, mba_hardware_value
from env.plan.stream_plan import (
    Change,
    ChangeRun,
    ContinuousPlan,
    ContinuousRunReport,
    Launch,
    LaunchOrder,
    LaunchRun,
    allocation_of,
)
from env.real.executor import (
    KILL_GRACE_S,
    Interrupted,
    Progress,
    _Job,
    _kill_group,
    _resolvable,
    allowed_cpus,
    resume_state,
)
from env.real.journal import Journal, JournalState
from profiler.repin import repin

Timeshare = str  # "measure", "profiles" or "none", as env.real.run


def kept_allocation(node: NodeSpec, ch: Change, job: Launch) -> Allocation:
    """A give-back's allocation of ``job`` from then on: the CPUs it keeps, its memory policy, the change's ways and
    caps."""
    return allocation_of(ch, ch.cpus or job.cpus, sorted({node.numa_of(c) for c in ch.cpus or job.cpus}), job.memory)


def max_running(jobs: list[LaunchRun]) -> int:
    """The most jobs that ran at once (an end and a start at the same instant do not overlap)."""
    events = sorted([(j.start_s, 1) for j in jobs] + [(j.end_s, -1) for j in jobs], key=lambda e: (e[0], e[1]))
    most = cur = 0
    for _, d in events:
        cur += d
        most = max(most, cur)
    return most


def _report(plan: ContinuousPlan, jobs: list[LaunchRun], changes: list[ChangeRun], *, backend: str, run_dir: str | None,
            timeshare_s: float | None, timeshare_source: str | None) -> ContinuousRunReport:
    ran = [j for j in jobs if j.id in {x.id for x in plan.launches}]
    total = round(max((j.end_s for j in jobs), default=0.0) - min((j.start_s for j in jobs), default=0.0), 4)
    return ContinuousRunReport(
        run_dir=run_dir, backend=backend, simulated=backend == "sim", plan=plan, jobs=jobs, changes=changes,  # type: ignore[arg-type]
        total_s=total, max_running=max_running(ran), timeshare_s=round(timeshare_s, 4) if timeshare_s else timeshare_s,
        timeshare_source=timeshare_source,
        throughput_vs_timeshare=round(timeshare_s / total, 4) if timeshare_s and total > 0 else None,
        predicted_makespan_s=plan.predicted_makespan_s, failed=[j.id for j in jobs if j.exit_code != 0])


# -- on the node model ---------------------------------------------------------------------------------------------


def simulate_launches(plan: ContinuousPlan) -> ContinuousRunReport:
    """The plan run on the node model of the simulated node it was made for (simulated)."""
    from env.sim.catalogue import catalogue
    from env.sim.nodes import load_node
    from env.sim.stream import StreamNode
    from env.sim.world import world_for

    if not plan.node.name.startswith("sim:"):
        raise InputError(f"the plan is for node {plan.node.name!r}; the sim backend runs plans made for a simulated "
                         "node: plan the window again with --node sim:reference")
    node = load_node(plan.node.name)
    world, cat = world_for(node), catalogue(node)
    unknown = [j.profile for j in plan.launches if not world.is_known(j.profile)]
    if unknown:
        raise InputError(f"{node.name} does not know {', '.join(dict.fromkeys(unknown))} (see 'cosched jobs --backend sim')")
    bad = sorted({c for j in plan.launches for c in j.cpus} - set(node.cpus))
    if bad:
        raise InputError(f"the plan asks for CPUs {bad}, which node {node.name} does not have")
    sim = StreamNode(node, world.params)
    order = LaunchOrder(plan)
    by_id = {j.id: j for j in plan.launches}
    starts: dict[str, float] = {}
    jobs: list[LaunchRun] = []
    changes: list[ChangeRun] = []
    while not order.finished:
        for j in order.startable(sim.now):
            for ch in order.before(j.id):  # a give-back makes room for it first
                sim.give_back(ch.job, kept_allocation(node, ch, by_id[ch.job]))
                changes.append(ChangeRun(before_launch=j.id, job=ch.job, cpus=ch.cpus, at_s=round(sim.now, 4),
                                         applied=True))
            sim.start(j.id, j.profile, world.entries[j.profile].params, allocation_of(j))
            starts[j.id] = sim.now
        wake = order.wake_at()
        if not sim.running:
            if wake is None or wake <= sim.now:
                raise RunError("the plan's launches cannot start and nothing runs (a launch the plan cannot reach)")
            sim.now = wake
            continue
        for jid in sim.advance(wake if wake is not None and wake > sim.now else math.inf):
            j = by_id[jid]
            jobs.append(LaunchRun(id=jid, exit_code=0, wall_s=round(sim.now - starts[jid], 4),
                                  start_s=round(starts[jid], 4), end_s=round(sim.now, 4), cpus=j.cpus,
                                  predicted_start_s=j.predicted_start_s, predicted_end_s=j.predicted_end_s))
            for ch in order.end(jid):
                if ch.job in sim.running:
                    r = by_id[ch.job]
                    sim.change(ch.job, allocation_of(ch, r.cpus, r.numa_nodes, r.memory))
                    changes.append(ChangeRun(at_end_of=jid, job=ch.job, at_s=round(sim.now, 4), applied=True))
                else:
                    changes.append(ChangeRun(at_end_of=jid, job=ch.job, at_s=round(sim.now, 4), applied=False,
                                             reason=f"{ch.job} was not running then"))
    jobs.sort(key=lambda r: (r.start_s, r.end_s))
    solo = sum(cat[j.profile].solo_s for j in plan.launches)
    return _report(plan, jobs, changes, backend="sim", run_dir=None, timeshare_s=solo or None,
                   timeshare_source="the catalogue's solo times (simulated)")


# -- on this node ---------------------------------------------------------------------------------------------------


def preflight_launches(plan: ContinuousPlan, node: NodeSpec) -> None:
    """What can be checked before anything starts (bad input leaves nothing half-run)."""
    if plan.node.name != node.name:
        raise InputError(f"the plan is for node {plan.node.name!r}, not {node.name!r}: plan it again for this node")
    for j in plan.launches:
        bad = sorted(set(j.cpus) - set(node.cpus))
        if bad:
            raise InputError(f"launch {j.id} asks for CPUs {bad}, which node {node.name} does not have (it has {node.cpus})")
        bad = sorted(set(j.numa_nodes) - {d.id for d in node.numa})
        if bad:
            raise InputError(f"launch {j.id} asks for NUMA domains {bad}, which node {node.name} does not have")
        if not j.command or not j.launch:
            raise InputError(f"job {j.id} has no command: the real backend needs \"command\": [\"prog\", ...]")
        env = {**os.environ, **j.env}
        for program in {j.launch[0], j.command[0]}:
            if not _resolvable(program, env):
                raise InputError(f"job {j.id}: {program!r} is not an executable file or a program on PATH")
    for e in plan.excluded:
        if e.command and not _resolvable(e.command[0], {**os.environ, **e.env}):
            raise InputError(f"job {e.id}: {e.command[0]!r} is not an executable file or a program on PATH")
    if plan.launches and plan.enforcement.method == "resctrl" and not node.resctrl_path:
        raise InputError("the plan enforces cache/bandwidth through resctrl, but this node has no resctrl mounted")


def start_launches(plan: ContinuousPlan, node: NodeSpec, runs: Path) -> Path:
    """Preflight, then a new run directory under ``runs`` with the plan in it."""
    from env.real.run import new_run_dir

    preflight_launches(plan, node)
    run_dir = new_run_dir(runs)
    (run_dir / "plan.json").write_text(plan.model_dump_json(indent=2))
    return run_dir


def is_continuous_run(run_dir: Path) -> bool:
    """Does ``run_dir`` hold a continuous plan's run?"""
    import json

    try:
        doc = json.loads((run_dir / "plan.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("mode") == "continuous"


def open_launches(run_dir: Path, node: NodeSpec) -> tuple[ContinuousPlan, JournalState]:
    """An interrupted continuous run to finish: its plan (checked again) and what its journal says is done."""
    state = resume_state(run_dir)
    try:
        plan = ContinuousPlan.model_validate_json((run_dir / "plan.json").read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"{run_dir}/plan.json is missing or unreadable: {exc}") from None
    preflight_launches(plan, node)
    return plan, state


def journaled_changes(run_dir: Path) -> list[ChangeRun]:
    """The changes an interrupted run's journal says were due (``read_journal`` keeps the jobs, not these)."""
    import json

    out = []
    for line in (run_dir / "journal.jsonl").read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by a crash (read_journal has judged the rest)
        if rec.get("event") == "change":
            out.append(ChangeRun.model_validate({k: v for k, v in rec.items() if k not in ("event", "time")}))
    return out


def apply_change(plan: ContinuousPlan, node: NodeSpec, ch: Change, group: str | None) -> tuple[bool, str | None]:
    """Rewrite a running launch's resctrl schemata with the change's ways and caps: (applied, why not)."""
    enf = plan.enforcement
    if not (enf.l3 or enf.mem_bw) or enf.method is None:
        why = "; ".join(f"{k}: {v}" for k, v in enf.reasons.items() if k in ("l3", "mem_bw"))
        return False, f"ways and bandwidth caps are not enforced on this node ({why or 'the plan does not enforce them'})"
    if enf.method != "resctrl":
        return False, f"changes are applied through resctrl; this plan enforces through {enf.method}"
    if group is None:
        return False, f"{ch.job} was not running then"
    l3 = {int(d): int(a.mask, 16) for d, a in ch.l3.items()} if enf.l3 else None
    mb = ({int(d): v for d, pct in ch.mem_bw_percent.items() if (v := mba_hardware_value(node, int(d), pct)) is not None}
          if enf.mem_bw else None)
    try:
        for line in schemata(node, l3, mb).splitlines():
            with open(Path(group) / "schemata", "w") as f:  # one line a write, as the kernel validates them
                f.write(line + "\n")
    except OSError as exc:
        return False, f"resctrl refused the schemata of {group}: {exc.strerror}"
    return True, None


def _resctrl_group(plan: ContinuousPlan, node: NodeSpec, index: int, j: Launch) -> str | None:
    enf = plan.enforcement
    if enf.method != "resctrl" or not (enf.l3 or enf.mem_bw):
        return None
    path = group_path(node, index, j.id)
    l3 = {int(d): int(a.mask, 16) for d, a in j.l3.items()} if enf.l3 else None
    mb = ({int(d): v for d, pct in j.mem_bw_percent.items() if (v := mba_hardware_value(node, int(d), pct)) is not None}
          if enf.mem_bw else None)
    create_group(path, schemata(node, l3, mb))
    return path


def run_launches(plan: ContinuousPlan, node: NodeSpec, run_dir: Path, *, state: JournalState | None = None,
                 timeout_s: float | None = None, fail_fast: bool = False, progress: Progress | None = None,
                 timeshare: Timeshare = "profiles", solo: Callable[..., Any] | None = None) -> ContinuousRunReport:
    """Run a started (or resumed: ``state``) continuous plan in ``run_dir``; its report, written to ``report.json``."""
    say = progress or (lambda kind, info: None)
    index = {j.id: k for k, j in enumerate(plan.launches)}
    jobs: list[LaunchRun] = []
    for recs in (state.jobs.values() if state is not None else ()):
        jobs.extend(LaunchRun.model_validate(r["record"]) for r in recs.values())
    changes = journaled_changes(run_dir) if state is not None else []
    offset = max((j.end_s for j in jobs), default=0.0)
    order = LaunchOrder(plan, [j.id for j in jobs if j.id in index])
    journal = Journal(run_dir / "journal.jsonl")
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

    def on_signal(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, on_signal)
    running: dict[str, tuple[_Job, str | None]] = {}
    stop = False
    t0 = time.monotonic()
    try:
        journal.write("run_start", mode="continuous", resumed=state is not None, launches=len(plan.launches),
                      solo=sum(1 for e in plan.excluded if e.command), offset_s=round(offset, 4))
        say("run_start", {"groups": len(plan.launches), "solo": sum(1 for e in plan.excluded if e.command),
                          "resumed": state is not None, "mode": "continuous"})
        if state is not None and state.stopped:
            say("orphans_stopped", {"jobs": state.stopped})
        while not order.finished:
            now = time.monotonic()
            for j in ([] if stop else order.startable(now - t0 + offset)):
                for ch in order.before(j.id):  # a give-back makes room for it first: journaled, then re-pinned
                    cr = ChangeRun(before_launch=j.id, job=ch.job, cpus=ch.cpus, at_s=round(now - t0 + offset, 4),
                                   applied=True)
                    journal.write("change", **cr.model_dump())
                    try:
                        repin(running[ch.job][0].proc.pid, ch.cpus or [])
                    except OSError as exc:
                        raise RunError(f"{ch.job} could not give CPUs back before {j.id}: {exc}; nothing more starts: "
                                       f"finish with cosched run --resume {run_dir}") from None
                    changes.append(cr)
                    say("change", cr.model_dump())
                group = _resctrl_group(plan, node, index[j.id], j)
                rj = _Job(j, run_dir, t0)
                running[j.id] = (rj, group)
                journal.write("job_start", group=index[j.id], job=j.id, pid=rj.proc.pid, argv=j.launch,
                              after=j.after, at_s=round(rj.start_rel + offset, 4))
                say("job_start", {"job": j.id, "after": j.after, "at_s": rj.start_rel + offset, "cpus": j.cpus})
            for jid, (rj, group) in list(running.items()):
                if rj.cpus is None and not rj.done:
                    rj.cpus = allowed_cpus(rj.proc.pid, rj.job.command, rj.job.launch)
                    if rj.cpus is not None:
                        journal.write("job_cpus", group=index[jid], job=jid, cpus=rj.cpus)
                if not rj.done and timeout_s is not None and now - rj.start > timeout_s and rj.killed_at is None:
                    rj.timed_out, rj.killed_at = True, now
                    _kill_group(rj.proc, signal.SIGTERM)
                if not rj.done and rj.killed_at is not None and now - rj.killed_at > KILL_GRACE_S:
                    _kill_group(rj.proc, signal.SIGKILL)
                if not rj.done:
                    continue
                rec = rj.record()
                j = plan.launches[index[jid]]
                run = LaunchRun(**rec.model_dump(exclude={"start_s"}), start_s=round(rj.start_rel + offset, 4),
                                end_s=round((rj.end or now) - t0 + offset, 4), cpus=j.cpus,
                                predicted_start_s=j.predicted_start_s, predicted_end_s=j.predicted_end_s)
                jobs.append(run)
                del running[jid]
                if group is not None:
                    remove_group(group)
                journal.write("job_end", group=index[jid], job=jid, record=run.model_dump())
                say("job_end", {"group": index[jid], "job": jid, "exit_code": run.exit_code, "wall_s": run.wall_s,
                                "timed_out": run.timed_out})
                for ch in order.end(jid):
                    applied, why = apply_change(plan, node, ch, running[ch.job][1] if ch.job in running else None)
                    cr = ChangeRun(at_end_of=jid, job=ch.job, at_s=run.end_s, applied=applied, reason=why)
                    changes.append(cr)
                    journal.write("change", **cr.model_dump())
                    say("change", cr.model_dump())
                if fail_fast and run.exit_code != 0:
                    stop = True
                    for other, _ in running.values():
                        if other.killed_at is None:
                            other.killed_at = now
                            _kill_group(other.proc, signal.SIGTERM)
            if stop and not running:
                break
            say("tick", {"group": 0, "elapsed": now - t0 + offset, "running": list(running)})
            time.sleep(0.01)
        if not stop:
            jobs.extend(_run_excluded(plan, run_dir, journal, solo, timeout_s, len(plan.launches), {j.id for j in jobs},
                                      max((j.end_s for j in jobs), default=0.0), say))
        journal.write("run_end", stopped_early=stop)
    except KeyboardInterrupt as exc:
        _stop_all(running)
        journal.write("interrupted", reason=str(exc) or "SIGINT")
        raise Interrupted(f"interrupted; finish it with: cosched run --resume {run_dir}") from None
    except BaseException:
        _stop_all(running)
        raise
    finally:
        journal.close()
        for s, h in old.items():
            signal.signal(s, h)
    jobs.sort(key=lambda r: (r.start_s, r.end_s))
    ts_s, source = _timeshare(plan, node, run_dir, jobs, timeshare, timeout_s, progress)
    report = _report(plan, jobs, changes, backend="real", run_dir=str(run_dir), timeshare_s=ts_s, timeshare_source=source)
    (run_dir / "report.json").write_text(report.model_dump_json(indent=2))
    return report


def _stop_all(running: dict[str, tuple[_Job, str | None]]) -> None:
    for rj, _ in running.values():
        if not rj.done:
            _kill_group(rj.proc, signal.SIGTERM)
    deadline = time.monotonic() + KILL_GRACE_S
    while any(not rj.done for rj, _ in running.values()) and time.monotonic() < deadline:
        time.sleep(0.02)
    for rj, group in running.values():
        if not rj.done:
            _kill_group(rj.proc, signal.SIGKILL)
            rj.proc.wait()
        if group is not None:
            remove_group(group)


def _run_excluded(plan: ContinuousPlan, run_dir: Path, journal: Journal, solo: Callable[..., Any] | None,
                  timeout_s: float | None, base: int, done: set[str], at: float, say: Progress) -> list[LaunchRun]:
    """Jobs without a profile, each alone on the whole node after the launches, while profiled."""
    out = []
    for k, e in enumerate(e for e in plan.excluded if e.command):
        if e.id in done:
            continue
        if solo is None:
            raise InputError(f"job {e.id} has no profile and no way to profile it was given")
        o, err = run_dir / f"{e.id}.out", run_dir / f"{e.id}.err"
        journal.write("job_start", group=base + k, job=e.id, solo_profile=True, at_s=round(at, 4))
        say("job_start", {"job": e.id, "after": [], "at_s": at, "cpus": [], "solo_profile": True})
        res = solo(e, o, err, timeout_s)
        run = LaunchRun(id=e.id, exit_code=res.exit_code, signal=res.signal, wall_s=round(res.wall_s, 4),
                        start_s=round(at, 4), end_s=round(at + res.wall_s, 4), stdout=str(o), stderr=str(err),
                        timed_out=res.timed_out)
        at = run.end_s
        journal.write("job_end", group=base + k, job=e.id, record=run.model_dump())
        say("job_end", {"group": base + k, "job": e.id, "exit_code": run.exit_code, "wall_s": run.wall_s,
                        "timed_out": run.timed_out})
        out.append(run)
    return out


def _timeshare(plan: ContinuousPlan, node: NodeSpec, run_dir: Path, jobs: list[LaunchRun], how: Timeshare,
               timeout_s: float | None, progress: Progress | None) -> tuple[float | None, str | None]:
    """Time sharing of the launches: each alone, measured in this run, or the stored profiles' solo times; jobs
    profiled in this run count their solo run."""
    from types import SimpleNamespace

    from env.real.run import measure_timeshare, timeshare_from_profiles

    solo_s = sum(j.wall_s for j in jobs if j.id in {e.id for e in plan.excluded})
    as_groups = SimpleNamespace(groups=[SimpleNamespace(jobs=plan.launches)])  # what the window runner's reads
    if how == "measure":
        ts, source = measure_timeshare(as_groups, node, run_dir, timeout_s, progress)  # type: ignore[arg-type]
        return (ts + solo_s if ts is not None else None), source
    if how == "profiles":
        from env.node.discover import local_node_id

        ts, source = timeshare_from_profiles(as_groups, [], local_node_id())  # type: ignore[arg-type]
        return (ts + solo_s if ts is not None else None), source
    return None, None


__all__ = [
    "apply_change",
    "is_continuous_run",
    "max_running",
    "open_launches",
    "preflight_launches",
    "run_launches",
    "simulate_launches",
    "start_launches",
]
