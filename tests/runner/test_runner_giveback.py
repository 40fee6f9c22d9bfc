"""Giving CPUs back in the online runner (``env.real.online``), on real processes of this machine: a job that adapts
is re-pinned onto the CPUs it keeps (every thread, as the kernel reports them) after the change is journaled and before
anything starts on the rest; a job that does not adapt is never; and a runner SIGKILLed between the journal's line
and the re-pin, resumed, re-pins the job and starts every job once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from runner_support import LOCAL

from env.errors import RunError

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(len(LOCAL.cpus) < 2 or len(os.sched_getaffinity(0)) < 2,
                                reason="giving CPUs back needs a node of at least two CPUs allowed to the tests")

#: Two threads spinning for SECS s, each printing the CPUs the kernel allows it when it stops.
LONG = """
import os, sys, threading, time
stop = time.time() + float(sys.argv[1])
seen = []
def spin():
    while time.time() < stop:
        pass
    seen.append(sorted(os.sched_getaffinity(0)))
ts = [threading.Thread(target=spin) for _ in range(2)]
for t in ts: t.start()
for t in ts: t.join()
print(seen, flush=True)
"""

#: The runner, run in a process of its own (the crash test kills it); argv: run dir, "adapts" or not, "crash" or
#: "resume". "crash": SIGKILL at the re-pin, after the change is journaled.
RUNNER = """
import os, signal, sys
sys.path.insert(0, {root!r})
from pathlib import Path
import profiler.repin
from env.real.online import OnlineRunner
from tests.runner.test_runner_giveback import decide, jobs
from runner_support import LOCAL
run_dir, adapts, what = Path(sys.argv[1]), sys.argv[2] == "adapts", sys.argv[3]
if what == "crash":
    profiler.repin.repin = lambda sid, cpus: os.kill(os.getpid(), signal.SIGKILL)
OnlineRunner(jobs(adapts), LOCAL, run_dir, 2, decide).run(resume=what == "resume")
"""


def jobs(adapts: bool) -> list:
    from env.real.online import OnlineJob

    return [OnlineJob("long", "EP", [sys.executable, "-c", LONG, "2.5"], adapts=adapts),
            OnlineJob("short", "MG", [sys.executable, "-c", "pass"], submit_s=0.5)]


def decide(held, queue, pending, now):  # noqa: ANN001, ANN202 - the runner's Decide
    """long alone on two CPUs; when short comes, long keeps the first and short starts on the second."""
    from env.episode.stream import Decision
    from env.plan.allocate import plain_allocation

    both, first, second = LOCAL.cpus[:2], LOCAL.cpus[:1], LOCAL.cpus[1:2]
    if not held and queue and queue[0].id == "long":
        return Decision(starts=(("long", plain_allocation(LOCAL, both)),))
    if not queue:
        return Decision()
    if held and len(held[0].alloc.cpus) == 2:
        return Decision(starts=(("short", plain_allocation(LOCAL, second)),),
                        changes=(("long", plain_allocation(LOCAL, first)),))
    return Decision(starts=(("short", plain_allocation(LOCAL, second)),))


def _journal(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "journal.jsonl").read_text().splitlines() if x.strip()]


def _threads_cpus(run_dir: Path) -> list[list[int]]:
    return json.loads((run_dir / "long.out").read_text().strip().splitlines()[-1])


def test_a_job_that_adapts_is_repinned_before_anything_starts_on_what_it_gave(tmp_path: Path) -> None:
    from env.real.online import OnlineRunner

    result = OnlineRunner(jobs(True), LOCAL, tmp_path, 2, decide).run()
    by = {j.id: j for j in result.jobs}
    assert all(j.exit_code == 0 for j in result.jobs)
    assert _threads_cpus(tmp_path) == [LOCAL.cpus[:1]] * 2  # both threads, as the kernel allowed them at the end
    assert [g["cpus"] for g in by["long"].gave_back] == [LOCAL.cpus[:1]] and by["short"].cpus == LOCAL.cpus[1:2]
    events = [(r["event"], r.get("job")) for r in _journal(tmp_path)]
    assert events.index(("change", "long")) < events.index(("launch", "short"))
    assert by["long"].gave_back[0]["at_s"] <= by["short"].start_s
    # the run's picture: long on both CPUs until it gave one back, then on the one it kept
    from dataclasses import asdict

    from service.commands.run_online import _bars, _learn

    at = by["long"].gave_back[0]["at_s"]
    assert _bars(asdict(by["long"])) == [("long", LOCAL.cpus[:2], by["long"].start_s, at, True),
                                         ("long", LOCAL.cpus[:1], at, by["long"].end_s, True)]
    # and its times are not one allocation's: the node model does not learn from this run
    assert _learn(result, LOCAL) == ("calibration data: not kept (a job gave CPUs back, so its time is not that of one "
                                     "allocation)")


def test_a_job_that_does_not_adapt_is_never_asked_and_nothing_starts(tmp_path: Path) -> None:
    from env.real.online import OnlineRunner

    runner = OnlineRunner(jobs(False), LOCAL, tmp_path, 2, decide)
    try:
        with pytest.raises(RunError, match="does not adapt to fewer CPUs") as exc:
            runner.run()
        assert "\n" not in str(exc.value)
        events = [(r["event"], r.get("job")) for r in _journal(tmp_path)]
        assert ("launch", "short") not in events and ("change", "long") not in events
    finally:
        for v in runner.live.values():
            os.killpg(v.pid, signal.SIGKILL)


def test_a_runner_killed_between_the_change_and_the_repin_resumes_with_the_job_repinned(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'tests' / 'runner'}"}
    script = RUNNER.format(root=str(ROOT))
    crash = subprocess.run([sys.executable, "-c", script, str(tmp_path), "adapts", "crash"], env=env, cwd=ROOT,
                           capture_output=True, text=True, timeout=60)
    assert crash.returncode == -signal.SIGKILL, crash.stderr
    events = [(r["event"], r.get("job")) for r in _journal(tmp_path)]
    assert events[-1] == ("change", "long") and ("launch", "short") not in events  # killed before the re-pin
    resumed = subprocess.run([sys.executable, "-c", script, str(tmp_path), "adapts", "resume"], env=env, cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
    assert resumed.returncode == 0, resumed.stderr
    events = [(r["event"], r.get("job")) for r in _journal(tmp_path)]
    assert events.count(("launch", "long")) == 1 and events.count(("launch", "short")) == 1
    assert ("job_adopted", "long") in events
    # long's exit status is not ours after a resume, but its threads said where they ran at the end: the kept CPU
    assert _threads_cpus(tmp_path) == [LOCAL.cpus[:1]] * 2
    short = next(r for r in _journal(tmp_path) if r["event"] == "launch" and r["job"] == "short")
    assert short["alloc"]["cpus"] == LOCAL.cpus[1:2]


# -- a continuous plan that gives CPUs back (cosched schedule --policy rollout-giveback, cosched run PLAN.json) --------


def _plan(adapts: bool = True, keep: list[int] | None = None, before: str = "short"):  # noqa: ANN202
    from env.plan.allocate import plain_allocation
    from env.plan.models import WindowJob
    from env.plan.stream_plan import build_continuous_plan

    both, first, second = LOCAL.cpus[:2], LOCAL.cpus[:1], LOCAL.cpus[1:2]
    return build_continuous_plan(
        LOCAL, [(WindowJob(id="long", command=[sys.executable, "-c", LONG, "2.5"]), plain_allocation(LOCAL, both), [],
                 None, None, None),
                (WindowJob(id="short", command=[sys.executable, "-c", "pass"]), plain_allocation(LOCAL, second), [],
                 None, None, 0.5)],
        policy="hand", max_concurrency=2, window_size=8, adapts=["long"] if adapts else [],
        give_backs=[(before, "long", plain_allocation(LOCAL, keep if keep is not None else first))])


def test_a_plan_gives_cpus_back_just_before_the_launch_it_makes_room_for(tmp_path: Path) -> None:
    from env.real.launches import run_launches

    report = run_launches(_plan(), LOCAL, tmp_path, timeshare="none")
    by = {j.id: j for j in report.jobs}
    assert all(j.exit_code == 0 for j in report.jobs)
    assert _threads_cpus(tmp_path) == [LOCAL.cpus[:1]] * 2  # re-pinned: both threads ended on the CPU it kept
    assert by["short"].start_s < by["long"].end_s  # short did not wait for long's end
    (ch,) = report.changes
    assert ch.before_launch == "short" and ch.job == "long" and ch.cpus == LOCAL.cpus[:1] and ch.applied
    events = [(r["event"], r.get("job")) for r in _journal(tmp_path)]
    assert events.index(("change", "long")) < events.index(("job_start", "short"))


def test_a_plan_refuses_give_backs_it_cannot_carry_out_in_one_line() -> None:
    from pydantic import ValidationError

    for plan, words in ((lambda: _plan(adapts=False), "does not say adapts"),
                        (lambda: _plan(keep=LOCAL.cpus[:2]), "keeps some, not all"),
                        (lambda: _plan(before="long"), "listed before it or waits for its end")):
        with pytest.raises(ValidationError, match=words) as exc:
            plan()
        assert len(str(exc.value.errors()[0]["msg"]).splitlines()) == 1


def test_a_simulated_plan_with_give_backs_runs_as_the_policy_decided() -> None:
    """cosched schedule --mode continuous --policy rollout-giveback on the node model: the plan's launches, run by
    the plan runner, start and end as the policy's own run of the stream."""
    from env.episode.stream import run_stream, sim_stream
    from env.plan.models import Window
    from env.planners.streams import RolloutGiveBack
    from env.real.launches import simulate_launches
    from env.sim.nodes import load_node
    from service.planning import plan_continuous

    node = load_node("sim:reference")
    window = Window.model_validate({"jobs": [{"id": "long", "profile": "EP", "adapts": True},
                                             {"id": "short", "profile": "MG", "submit_s": 5.0},
                                             {"id": "x", "profile": "FT", "submit_s": 10.0}], "max_concurrency": 2})
    plan = plan_continuous(window, node, policy="rollout-giveback")
    (give,) = [c for c in plan.changes if c.cpus is not None]
    assert give.job == "long" and give.before_launch == "short" and "long" not in plan.launches[1].after
    ran = {j.id: (j.start_s, j.end_s) for j in simulate_launches(plan).jobs}
    direct = run_stream(node, sim_stream(node, window.jobs), 2, RolloutGiveBack())
    assert ran == {j.id: (pytest.approx(j.start_s, abs=1e-3), pytest.approx(j.end_s, abs=1e-3)) for j in direct.jobs}
