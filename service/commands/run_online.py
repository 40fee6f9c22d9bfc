"""``cosched run WINDOW.json --mode continuous`` and its ``--resume``: the online runner's entry. Decisions come from
``service.decide.Decider`` at every event (simulated on the sim backend; real job ends on this node, where
``env.real.online`` runs the jobs, journaled and resumable)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from env.episode.stream import Decision
from env.errors import InputError
from service.decide import MODEL_FREE, Decider, _span


def run_online_command(args: Any) -> int:
    """``cosched run WINDOW.json --mode continuous [--policy P] [--backend sim|real]`` and ``--resume`` of such a
    run: the sim backend decides at every simulated event on the node model; the real backend runs the jobs on this
    node, deciding at every real event (``env.real.online``). Exit 1 when a job failed."""
    from env.episode.stream import run_stream
    from env.plan.models import Window
    from env.real.online import OnlineJob, OnlineRunner, read_stream, write_stream
    from env.real.run import new_run_dir
    from env.sim.nodes import load_node
    from service.documents import read_window
    from service.output import emit

    resume = Path(args.resume) if getattr(args, "resume", None) else None
    for flag in ("dry_run", "fail_fast"):
        if getattr(args, flag, False):
            raise InputError(f"--{flag.replace('_', '-')} is not for online runs (--mode continuous): the decisions "
                             "come at real events; 'cosched schedule --mode continuous' shows a plan beforehand")
    if resume is not None:
        rec = read_stream(resume)
        window, policy, w, backend = Window.model_validate(rec["window"]), rec["policy"], rec["window_size"], "real"
        model, learn = rec.get("model"), rec.get("learn_lengths", True)
    else:
        window, policy, w, backend = read_window(args.document), args.policy, getattr(args, "window_size", None), args.backend
        model, learn = getattr(args, "model", None), getattr(args, "learn_lengths", True)
    node = load_node(args.node or "sim:reference") if backend == "sim" else load_node("local")
    decider = Decider(node, policy, w, model, give_back=True)  # both backends carry out give-backs (re-pinned here)
    jobs = {j.id: decider.stream_job(j.id, j.profile_name, j.submit_s or 0.0, f"jobs[{i}]", j.adapts, j.solo_s)
            for i, j in enumerate(window.jobs)}
    given = {j.id for j in window.jobs if j.solo_s is not None}  # their own lengths: neither learned nor teaching
    decider.reset(list(jobs.values()), window.max_concurrency)
    decided_on = decider.model.source if decider.model else "which CPUs are held (no node model of this node)"
    if backend == "sim":
        run = run_stream(decider.dnode, list(jobs.values()), window.max_concurrency, decider.policy)  # type: ignore[arg-type]
        doc = {"run_dir": None, "backend": "sim", "mode": "continuous", "simulated": True, "node": node.name,
               "policy": decider.name, "max_concurrency": window.max_concurrency, "decided_on": decided_on,
               "decisions": run.decisions, "jobs": [{"id": j.id, "profile": j.name, "submit_s": j.submit_s, "start_s":
                                                     j.start_s, "end_s": j.end_s, "cpus": list(j.cpus)} for j in run.jobs],
               "metrics": run.metrics(), "failed": [], "notes": []}
        emit(doc, args.json, lambda: render_online(doc))
        return 0
    window.require_commands()
    _preflight(window)
    resume_dir, run_dir = resume, resume or new_run_dir(Path(args.runs))
    if resume is None:
        write_stream(run_dir, {"window": window.model_dump(mode="json"), "policy": decider.name, "window_size": w,
                               "model": decider.model_file, "learn_lengths": learn})
    # each program's length learned from its jobs that ended (service/lengths.py), where a node model decides
    learner = None
    if learn and decider.model is not None and decider.name not in MODEL_FREE:  # packing and timeshare take no lengths
        from env.real.online import read_online_journal
        from service.lengths import RunLengths, expectations

        ends = read_online_journal(run_dir / "journal.jsonl")["job_end"] if resume_dir is not None else None
        learner = RunLengths(node, run_dir, {k: v.get("result", {}) for k, v in ends.items()} if ends else ends)

    def decide(held: list, queue: list, pending: int, now: float) -> Decision:
        if learner is not None:
            _relength(decider, window, jobs, learner)
        view = decider.view([(jobs[h.id], h.alloc, h.seconds_run) for h in held], [jobs[q.id] for q in queue], now, pending)
        d = decider.decide(view)
        if learner is not None and d.starts:
            pred = decider.predict(view, d, list(jobs.values()))
            end_at = {p.id: p.end_s for p in pred.jobs} if pred is not None else {}
            taught = [(jid, jobs[jid].solo_s) for jid, _ in d.starts if jid not in given]  # a given length is not learned
            for jid, expected in expectations(taught, end_at, view.now).items():
                learner.started(jid, jobs[jid].name, expected)
        return d

    progress = OnlineProgress()

    def on_event(kind: str, info: dict[str, Any]) -> None:
        progress(kind, info)
        if kind == "job_end" and learner is not None and (line := learner.ended(info["job"], info.get("result", {}))):
            progress.console.print(line)

    from env.plan.launch import PINRT_LIB

    online = [OnlineJob(j.id, j.profile_name, list(j.command or []), dict(j.env), j.submit_s or 0.0, jobs[j.id].adapts)
              for j in window.jobs]
    result = OnlineRunner(online, node, run_dir, window.max_concurrency, decide, timeout_s=args.timeout, progress=on_event,
                          pin_runtime=PINRT_LIB if getattr(args, "pin_runtime", False) else None).run(resume=resume_dir is not None)
    solo, source = _solo(decider, window)
    doc = result.report(node=node.name, policy=decider.name, max_concurrency=window.max_concurrency, solo=solo,
                        solo_source=source, decided_on=decided_on)
    if getattr(args, "mode_reason", None):
        doc["notes"].insert(0, f"mode {args.mode_reason}")
    doc["notes"].append(_learn(result, node))
    if learner is not None and (line := learner.summary()):
        doc["notes"].append(line)
    doc.update(_timeshare(window, node, run_dir, doc, args))
    (run_dir / "report.json").write_text(__import__("json").dumps(doc, indent=1))
    try:
        from service.chart import launches_chart

        bars = [bar for j in doc["jobs"] if j["start_s"] is not None and j["end_s"] is not None for bar in _bars(j)]
        launches_chart(bars, f"online run on {node.name} ({decider.name}, Cmax {window.max_concurrency}, measured)",
                       run_dir / "schedule.png", node.cpus, "measured", f"decided on {decided_on}")
    except Exception as exc:  # noqa: BLE001 - the picture is a convenience; the report is written
        doc["notes"].append(f"no picture: {exc}")
    emit(doc, args.json, lambda: render_online(doc))
    return 1 if doc["failed"] else 0


RELENGTH_TOL = 0.05  # a program's learned length that moved less than this leaves the policy's plan as it is


def _relength(decider: Decider, window: Any, jobs: dict[str, Any], learner: Any) -> None:
    """The jobs as the policy sees them with each program's learned time alone (running ones too: what is left of
    them); the policy plans afresh from this event where any moved by RELENGTH_TOL or more (a search that plays the
    whole queue, rollout's guard, then runs again: seconds for a long queue on a large node)."""
    solo = learner.lengths.solo_s({j.profile_name for j in window.jobs})
    changed = False
    for i, j in enumerate(window.jobs):
        s = solo.get(j.profile_name) if j.solo_s is None else None  # a job's own solo_s stands
        if s is not None and not math.isclose(s, jobs[j.id].solo_s, rel_tol=RELENGTH_TOL):
            jobs[j.id] = decider.stream_job(j.id, j.profile_name, j.submit_s or 0.0, f"jobs[{i}]", jobs[j.id].adapts,
                                            solo_s=s)
            changed = True
    if changed:
        decider.reset(list(jobs.values()), window.max_concurrency)


def _bars(job: dict[str, Any]) -> list[tuple[str, list[int], float, float, bool]]:
    """A job's bars in the picture: one per stretch on the same CPUs (a job that gave CPUs back has two or more)."""
    cuts = [(job["start_s"], job["cpus"])] + [(g["at_s"], g["cpus"]) for g in job.get("gave_back", [])]
    ends = [t for t, _ in cuts[1:]] + [job["end_s"]]
    return [(job["id"], cpus, t, end, job["exit_code"] == 0) for (t, cpus), end in zip(cuts, ends)]


def _learn(result: Any, node: Any) -> str:
    """The run's jobs kept in the calibration data, as a groups run's groups are (``env.calibration.runs``), so that
    the node model learns the window's programs from continuous runs too; one line saying what was kept, or why not."""
    from env.calibration.runs import record_online_run
    from env.plan.launch import enforcement
    from env.node.discover import local_node_id

    enf = enforcement(node)
    if enf.method == "resctrl" and (enf.l3 or enf.mem_bw):
        return ("calibration data: not kept (ways and bandwidth caps can change while a continuous run's jobs run; "
                "its records hold CPUs and memory policy only)")
    ok = [j for j in result.jobs if j.start_s is not None and j.end_s is not None and j.exit_code == 0 and j.end_seen
          and j.note is None]
    if len(ok) < len(result.jobs):
        return "calibration data: not kept (a job failed or was not seen to end, so the others' times are not clean)"
    if any(j.gave_back for j in result.jobs):
        return "calibration data: not kept (a job gave CPUs back, so its time is not that of one allocation)"
    kept, why = record_online_run([(j.profile, j.cpus, j.memory, j.start_s, j.end_s) for j in ok], local_node_id(),
                                  simulated=False)
    return (f"calibration data: {kept} set{'s' if kept != 1 else ''} of jobs kept (the node model learns the programs "
            "from them)" if kept else f"calibration data: not kept ({why})")


def _timeshare(window: Any, node: Any, run_dir: Path, doc: dict[str, Any], args: Any) -> dict[str, Any]:
    """Time sharing beside the run, as the groups runner reports it: with ``--measure-timeshare`` every job alone on
    the whole node after the stream, in this run (``timeshare/`` of the run directory); else none measured (the
    metrics' throughput then rests on the stored profiles' solo times)."""
    total = doc["metrics"]["makespan_s"]
    out: dict[str, Any] = {"total_s": total, "timeshare_s": None, "timeshare_source": None,
                           "throughput_vs_timeshare": doc["metrics"]["throughput_vs_timeshare"]}
    if not getattr(args, "measure_timeshare", False) or doc["failed"]:
        return out
    from types import SimpleNamespace

    from env.real.run import measure_timeshare

    ts, source = measure_timeshare(SimpleNamespace(groups=[SimpleNamespace(jobs=window.jobs)]), node, run_dir,  # type: ignore[arg-type]
                                   args.timeout)
    out.update(timeshare_s=round(ts, 4) if ts else None, timeshare_source=source,
               throughput_vs_timeshare=round(ts / total, 4) if ts and total else None)
    return out


def _preflight(window: Any) -> None:
    import os

    from env.real.executor import _resolvable  # the executor's own check

    for j in window.jobs:
        if not _resolvable(j.command[0], {**os.environ, **j.env}):
            raise InputError(f"job {j.id}: {j.command[0]!r} is not an executable file or a program on PATH")


def _solo(decider: Decider, window: Any) -> tuple[dict[str, float], str]:
    """Each job's solo time on the whole node: measured (its stored profile) where every job has one, else the node
    model's prediction."""
    measured = {j.id: decider._profile_solo(j.profile_name) for j in window.jobs}
    if all(not math.isnan(v) for v in measured.values()):
        return measured, "measured: the stored profiles' solo runs on this node"
    if decider.model is not None:
        return ({j.id: decider.stream_job(j.id, j.profile_name).solo_s for j in window.jobs},
                f"predicted: {decider.model.source}")
    return measured, "unknown: not every job has a profile on this node"


class OnlineProgress:
    """Progress lines on stderr as the online run goes (``env.real.online``'s events)."""

    def __init__(self) -> None:
        self.console = __import__("rich.console").console.Console(stderr=True, highlight=False, soft_wrap=True)

    def __call__(self, kind: str, info: dict[str, Any]) -> None:
        say = self.console.print
        if kind == "online_start":
            say(f"online run: {info['jobs']} jobs" + (f", resumed ({info['done']} done)" if info["resumed"] else ""))
        elif kind == "resumed_job":
            say(info["line"])
        elif kind == "decision" and info["starts"]:
            starts = ", ".join(f"{k} on CPUs {_span(c)}" for k, c in info["starts"])
            say(f"{info['at_s']:.2f} s: decision {info['n']}: start {starts} ({info['running']} running, "
                f"{info['queue']} queued)")
        elif kind == "give_back":
            say(f"{info['at_s']:.2f} s: {info['job']} gives CPUs back, keeps CPUs {_span(info['cpus'])} (re-pinned)")
        elif kind == "job_end":
            what = info["note"] or f"exit {info['exit_code']}"
            say(f"{info['at_s']:.2f} s: {info['job']} ended ({what}) after {info['wall_s']:.2f} s")


def render_online(doc: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    kind = "simulated" if doc["simulated"] else "measured"
    table = Table(title=f"online run on {doc['node']} ({doc['policy']}, Cmax {doc['max_concurrency']}, times {kind})")
    for col in ("job", "profile", "submit s", "start s", "end s", "cpus", "exit"):
        table.add_column(col)
    for j in doc["jobs"]:
        f = lambda v: "-" if v is None else f"{v:.2f}"
        table.add_row(j["id"], j["profile"], f(j["submit_s"]), f(j["start_s"]), f(j["end_s"]), _span(j["cpus"]),
                      str(j.get("exit_code", "-")) if not j.get("note") else "?")
    console.print(table)
    m = doc["metrics"]
    for k, v in m.items():
        console.print(f"{k.replace('_', ' ')}: {'unknown' if v is None else f'{v:.3f}'} ({kind})")
    console.print(f"decisions: {doc['decisions']}, decided on {doc['decided_on']}; solo times: "
                  f"{doc.get('solo_source') or 'the node model'}")
    if doc.get("timeshare_s"):
        console.print(f"time sharing {doc['timeshare_s']:.2f} s ({doc['timeshare_source']}): throughput vs time sharing "
                      f"{doc['throughput_vs_timeshare']:.3f} (measured)")
    elif doc.get("timeshare_source"):
        console.print(f"time sharing {doc['timeshare_source']}")
    for n in doc["notes"]:
        console.print(n)
    if doc["failed"]:
        console.print(f"[red]failed: {', '.join(doc['failed'])}[/]")
    if doc["run_dir"]:
        console.print(f"run directory: {doc['run_dir']}")
