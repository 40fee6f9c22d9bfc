"""Continuous plans: `cosched schedule --mode continuous`, POST /schedule's mode, the default mode and why, the plan's
checks, and `cosched run PLAN.json --backend sim` (every launch after its `after` jobs, never above Cmax)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from env.plan.allocate import plain_allocation
from env.plan.models import Plan, Window, WindowJob
from env.plan.stream_plan import (
    ContinuousPlan,
    GroupsPlan,
    LaunchOrder,
    after_sets,
    build_continuous_plan,
    parse_plan,
    plan_job_fields,
)
from env.sim.nodes import load_node

ROOT = Path(__file__).resolve().parents[2]
COSCHED = [sys.executable, "-m", "service.cli"]
SIM = "sim:reference"
JOBS = ["MG", "EP", "CG", "FT", "lu_cb", "fft", "ocean_cp", "IS"]


def cosched(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*COSCHED, *args], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "COSCHED_HOME": str(home)})


def window(names: list[str] = JOBS, cmax: int = 4) -> Window:
    return Window(jobs=[WindowJob(id=f"j{i}-{n}", profile=n) for i, n in enumerate(names)], max_concurrency=cmax)


def overlaps(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] - 1e-9 and b[0] < a[1] - 1e-9


def check_schedule(plan: ContinuousPlan, times: dict[str, tuple[float, float]]) -> None:
    """Every launch starts once its after jobs have ended; never more than Cmax at once; never a CPU twice."""
    for j in plan.launches:
        for a in j.after:
            assert times[a][1] <= times[j.id][0] + 1e-9, f"{j.id} started before {a} ended"
    ids = list(times)
    for t, _ in times.values():
        running = [k for k in ids if times[k][0] <= t + 1e-9 < times[k][1] - 1e-9]
        assert len(running) <= plan.max_concurrency
    cpus = {j.id: set(j.cpus) for j in plan.launches}
    for x in ids:
        for y in ids:
            if x < y and overlaps(times[x], times[y]):
                assert not cpus[x] & cpus[y], f"{x} and {y} share CPUs at once"


@pytest.mark.parametrize("cmax", [2, 4])
def test_a_continuous_plan_is_the_stream_policys_run_on_the_node_model(cmax: int) -> None:
    from service.planning import plan_document

    plan = plan_document(window(cmax=cmax), load_node(SIM), mode="continuous")
    assert isinstance(plan, ContinuousPlan) and plan.mode == "continuous" and plan.policy == "rollout"
    assert sorted(j.id for j in plan.launches) == sorted(j.id for j in window().jobs)
    assert plan.predictions_source and "simulated" in plan.predictions_source and plan.mode_reason
    times = {j.id: (j.predicted_start_s, j.predicted_end_s) for j in plan.launches}
    check_schedule(plan, times)  # type: ignore[arg-type]
    starts = [j.predicted_start_s for j in plan.launches]
    assert starts == sorted(starts) and plan.predicted_makespan_s == pytest.approx(max(t[1] for t in times.values()), abs=1e-3)
    assert all(j.launch[:1] == ["numactl"] or not plan.enforcement.cpus for j in plan.launches)
    # the document round-trips and replays on the node model exactly as predicted
    again = ContinuousPlan.model_validate_json(plan.model_dump_json())
    from env.real.launches import simulate_launches

    report = simulate_launches(again)
    assert report.simulated and report.max_running <= cmax and not report.failed
    ran = {j.id: (j.start_s, j.end_s) for j in report.jobs}
    check_schedule(plan, ran)
    for j in plan.launches:
        assert ran[j.id] == pytest.approx(times[j.id], abs=1e-3)


@pytest.mark.parametrize("policy", ["agent", "agent-search"])
def test_the_stream_agents_plan_continuously_with_a_stream_model(policy: str, tmp_path: Path) -> None:
    from env.errors import InputError
    from service.planning import plan_document

    node = load_node(SIM)
    plan = plan_document(window(), node, mode="continuous", policy=policy)  # the node's shipped stream model
    assert isinstance(plan, ContinuousPlan) and plan.policy == policy
    check_schedule(plan, {j.id: (j.predicted_start_s, j.predicted_end_s) for j in plan.launches})  # type: ignore[misc]
    given = plan_document(window(), node, mode="continuous", policy=policy,
                          model=str(ROOT / "training" / "models" / "stream-sim-reference.npz"))
    assert [(j.id, j.cpus) for j in given.launches] == [(j.id, j.cpus) for j in plan.launches]  # type: ignore[union-attr]
    with pytest.raises(InputError, match="missing.npz"):
        plan_document(window(), node, mode="continuous", policy=policy, model=str(tmp_path / "missing.npz"))
    with pytest.raises(InputError, match="--model is for the agent policies"):
        plan_document(window(), node, mode="continuous", policy="rollout", model=str(tmp_path / "m.npz"))


def test_an_online_run_decides_with_the_stream_agent(tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    path.write_text(window(JOBS[:6], 3).model_dump_json())
    out = cosched("run", str(path), "--mode", "continuous", "--backend", "sim", "--node", SIM, "--policy",
                  "agent-search", "--json", home=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["policy"] == "agent-search" and sorted(j["id"] for j in doc["jobs"]) == sorted(j.id for j in window(JOBS[:6]).jobs)
    assert all(j["end_s"] is not None for j in doc["jobs"])


def test_the_default_mode_is_the_one_the_node_model_predicts_better() -> None:
    from service.planning import plan_document

    node = load_node(SIM)
    for names, cmax in ((JOBS, 4), (JOBS[:4], 2), (["EP", "MG"], 4)):
        w = window(names, cmax)
        groups = plan_document(w, node, mode="groups")
        cont = plan_document(w, node, mode="continuous")
        chosen = plan_document(w, node)
        g_s = sum(g.predicted_makespan_s for g in groups.groups)  # type: ignore[union-attr,misc]
        c_s = cont.predicted_makespan_s  # type: ignore[union-attr]
        assert chosen.mode == ("continuous" if c_s < g_s else "groups"), (names, cmax, g_s, c_s)  # type: ignore[operator]
        assert f"{g_s:.1f} s" in chosen.mode_reason and f"{c_s:.1f}" in chosen.mode_reason  # type: ignore[operator]
    one = plan_document(window(JOBS[:3], 1), node)
    assert one.mode == "groups" and "Cmax 1" in one.mode_reason  # type: ignore[operator]


@pytest.mark.parametrize("error,ratio,mode", [(None, 1.05, "groups"), (None, 0.95, "continuous"),
                                               (0.10, 1.05, "continuous"), (0.10, 1.15, "groups"),
                                               (0.0, 1.0, "continuous")])
def test_on_a_real_node_groups_must_be_predicted_shorter_by_more_than_the_models_error(
        error: float | None, ratio: float, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A simulated node (error None) takes the mode predicted shorter (ties: groups); a real node (its model's error)
    takes continuous, which falls back to packing there, unless groups are predicted shorter by more than the error."""
    import service.planning as planning

    node = load_node(SIM)
    w = window(JOBS[:4], 2)
    groups = planning.plan_window(w, node)
    g_s = sum(g.predicted_makespan_s for g in groups.groups)  # type: ignore[misc]
    cont = planning.plan_continuous(w, node)
    monkeypatch.setattr(planning, "plan_continuous",
                        lambda *a, **k: cont.model_copy(update={"predicted_makespan_s": g_s * ratio}))
    monkeypatch.setattr(planning, "_real_error", lambda n: error)
    chosen = planning.choose_mode(w, node, groups)
    assert chosen.mode == mode, chosen.mode_reason
    if error:
        assert ("within the node model's error" if mode == "continuous" else "by more than the node model's error") \
            in chosen.mode_reason


@pytest.mark.parametrize(("names", "cmax", "mode"), [(JOBS[:4], 2, "continuous"), (JOBS[4:], 4, "groups")])
def test_run_of_a_window_takes_the_mode_schedule_gives(names: list[str], cmax: int, mode: str, tmp_path: Path) -> None:
    """``cosched run WINDOW.json`` without --mode runs the plan ``cosched schedule WINDOW.json`` shows: the same mode
    (here continuous for the first window, groups for the second) and the same plan."""
    path = tmp_path / "w.json"
    path.write_text(window(names, cmax).model_dump_json())
    shown = cosched("schedule", str(path), "--node", SIM, "--json", home=tmp_path)
    ran = cosched("run", str(path), "--backend", "sim", "--node", SIM, "--json", home=tmp_path)
    assert shown.returncode == 0 and ran.returncode == 0, shown.stderr + ran.stderr
    plan, report = json.loads(shown.stdout), json.loads(ran.stdout)
    assert plan["mode"] == mode, plan["mode_reason"]
    if plan["mode"] == "continuous":
        assert report["mode"] == "continuous" and report["plan"]["launches"] == plan["launches"]
    else:
        assert [[j["id"] for j in g["jobs"]] for g in report["plan"]["groups"]] == \
            [[j["id"] for j in g["jobs"]] for g in plan["groups"]]


def test_a_policy_of_one_mode_chooses_it() -> None:
    from service.planning import plan_document

    node = load_node(SIM)
    packed = plan_document(window(JOBS[:5], 2), node, policy="packing")
    assert isinstance(packed, ContinuousPlan) and packed.policy == "packing" and "packing" in packed.mode_reason
    assert [j.cpus for j in packed.launches[:2]] == [list(range(12)), list(range(12, 24))]
    greedy = plan_document(window(JOBS[:5], 2), node, policy="greedy")
    assert isinstance(greedy, GroupsPlan) and greedy.policy in ("greedy", "pairs", "timeshare")


def test_groups_mode_is_the_window_plan_unchanged() -> None:
    """--mode groups is today's plan, field for field, plus the mode and why (bench/plan_hashes.py hashes plan_window)."""
    from service.planning import plan_document, plan_window

    node = load_node(SIM)
    w = window(JOBS[:6], 3)
    plain = plan_window(w, node)
    doc = json.loads(plan_document(w, node, mode="groups").model_dump_json())
    assert doc.pop("mode") == "groups" and doc.pop("mode_reason") == "groups: asked for"
    assert doc.pop("continuous_predicted_makespan_s") is None
    assert doc == json.loads(plain.model_dump_json())
    assert Plan.model_validate(doc) == plain


def test_schedule_command_and_service_agree_on_each_mode(tmp_path: Path) -> None:
    from svc_support import running_app

    doc = {"jobs": [{"id": j.id, "profile": j.profile} for j in window(JOBS[:6], 3).jobs] + [{"id": "nope"}],
           "max_concurrency": 3}
    path = tmp_path / "w.json"
    path.write_text(json.dumps(doc))
    printed = {}
    for mode in ("continuous", "groups"):
        out = cosched("schedule", str(path), "--node", SIM, "--mode", mode, "--json", home=tmp_path)
        assert out.returncode == 0, out.stderr
        printed[mode] = json.loads(out.stdout)
    assert printed["continuous"]["excluded"][0]["id"] == "nope"
    with running_app(SIM, home=tmp_path) as s:
        for mode, want in printed.items():
            r = s.client.post("/schedule", json={**doc, "mode": mode})
            assert r.status_code == 200, r.text
            assert r.json() == want
        default = s.client.post("/schedule", json=doc).json()
        assert default["mode"] in ("groups", "continuous") and default["mode_reason"]
        assert s.client.post("/schedule", json={**doc, "mode": "barriers"}).status_code == 422


def test_schedule_draws_a_continuous_plan(tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    path.write_text(window(JOBS[:5], 2).model_dump_json())
    png = tmp_path / "plan.png"
    out = cosched("schedule", str(path), "--node", SIM, "--mode", "continuous", "--plot", str(png), home=tmp_path)
    assert out.returncode == 0, out.stderr
    assert png.stat().st_size > 5000 and "after" in out.stdout and "predicted makespan" in out.stdout
    bad = cosched("schedule", str(path), "--node", SIM, "--mode", "groups", "--plot", str(png), home=tmp_path)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_this_node_without_a_node_model_has_no_continuous_plan(tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"jobs": [{"id": "a", "command": ["true"]}, {"id": "b", "command": ["true"]}]}))
    out = cosched("schedule", str(path), "--mode", "continuous", home=tmp_path / "empty-home")
    assert out.returncode == 2 and "no node model" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    default = cosched("schedule", str(path), "--json", home=tmp_path / "empty-home")
    assert default.returncode == 0, default.stderr
    assert json.loads(default.stdout)["mode"] == "groups"


# -- the plan's checks ---------------------------------------------------------------------------------------------


def hand_plan(launches: list[tuple], cmax: int = 2, changes=()) -> dict:
    """A plan document of launches (id, CPUs, after[, program: EP]) on sim:reference, not checked (it may be bad)."""
    node = load_node(SIM)
    first = build_continuous_plan(node, [(WindowJob(id="x", profile="EP"), plain_allocation(node, [0]), [], None, None,
                                          None)], policy="hand", max_concurrency=cmax, window_size=8)
    doc = json.loads(first.model_dump_json())
    doc["launches"] = []
    for k, (i, cpus, after, *program) in enumerate(launches):
        job = WindowJob(id=i, profile=program[0] if program else "EP")
        fields = plan_job_fields(node, job, plain_allocation(node, cpus), first.enforcement, k)
        doc["launches"].append({**fields, "after": after})
    doc["changes"] = list(changes)
    return doc


@pytest.mark.parametrize("launches, words", [
    ([("a", [0], []), ("b", [1], ["zz"])], "waits for 'zz', which is not a launch"),
    ([("a", [0], ["b"]), ("b", [1], ["a"])], "cycle: a -> b -> a"),
    ([("a", [0], ["a"])], "waits for itself"),
    ([("a", [0], ["b"]), ("b", [1], [])], "listed after it"),
    ([("a", [0, 1], []), ("b", [1, 2], [])], "both take CPU 1"),
    ([("a", [0], []), ("b", [1], ["a"]), ("c", [0, 1], ["b"])], None),  # c waits for a through b: valid
    ([("a", [0], []), ("b", [1], []), ("c", [0, 1], ["b"])], "both take CPU 0"),
])
def test_bad_plans_are_refused_in_one_line(tmp_path: Path, launches: list, words: str | None) -> None:
    doc = hand_plan(launches)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    out = cosched("run", str(path), "--backend", "sim", "--json", home=tmp_path)
    if words is None:
        assert out.returncode == 0, out.stderr
        return
    assert out.returncode == 2, out.stdout
    assert words in out.stderr and len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def test_a_change_naming_no_launch_is_refused() -> None:
    doc = hand_plan([("a", [0], []), ("b", [1], [])], changes=[{"at_end_of": "a", "job": "nobody"}])
    with pytest.raises(ValueError, match="'nobody', which is not a launch"):
        parse_plan(doc)


def test_the_sim_run_waits_for_after_and_applies_changes(tmp_path: Path) -> None:
    """A hand-made plan at Cmax 2: b waits for a although its CPUs are free; d (no after) waits for a place under
    Cmax and for b before it (launches start in their order); a change of b's ways at the end of c is applied on the
    node model when b runs then."""
    doc = hand_plan([("a", list(range(6)), [], "IS"), ("c", list(range(12, 18)), []), ("b", list(range(6, 12)), ["a"], "MG"),
                     ("d", list(range(18, 24)), [])],
                    changes=[{"at_end_of": "c", "job": "b", "l3": {"0": {"ways": 2, "mask": "0x003"}},
                              "mem_bw_percent": {"0": 50}}])
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    out = cosched("run", str(path), "--backend", "sim", "--json", home=tmp_path)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    t = {j["id"]: (j["start_s"], j["end_s"]) for j in report["jobs"]}
    assert t["a"][0] == t["c"][0] == 0 and t["b"][0] == pytest.approx(t["a"][1]) and report["max_running"] == 2
    assert t["d"][0] >= t["b"][0] and t["d"][0] == pytest.approx(min(t["c"][1], t["b"][1]))
    check_schedule(ContinuousPlan.model_validate(doc), {k: tuple(v) for k, v in t.items()})  # type: ignore[misc]
    change = report["changes"]
    assert len(change) == 1 and change[0]["job"] == "b" and change[0]["at_end_of"] == "c"
    assert change[0]["applied"] == (t["b"][0] <= t["c"][1] < t["b"][1])
    assert change[0]["applied"] and t["a"][1] < t["c"][1]
    from env.real.launches import simulate_launches

    unchanged = simulate_launches(ContinuousPlan.model_validate({**doc, "changes": []}))
    assert {j.id: j.end_s for j in unchanged.jobs}["b"] < t["b"][1]  # MG capped at half its bandwidth ends later


def test_after_sets_on_hand_made_runs() -> None:
    # CPUs: the last holder of each CPU
    assert after_sets([(0, (0,)), (0, (1,)), (5, (0,)), (7, (1,))], [5, 7, 9, 12], 2) == [[], [], [0], [0, 1]]  # 1 holds its CPU; 0 ended for a place (2 runs)
    assert after_sets([(0, (0,)), (0, (1,)), (7, (0, 1))], [5, 7, 9], 2) == [[], [], [0, 1]]
    # Cmax: a launch on free CPUs waits for the end that made its place
    assert after_sets([(0, (0,)), (0, (1,)), (3, (2,))], [3, 8, 9], 2) == [[], [], [0]]
    # ... but not for one it already waits for through another
    assert after_sets([(0, (0,)), (2, (0,)), (0, (1,)), (4, (2,))], [2, 4, 9, 9], 2)[3] == [1]


def test_launch_order_holds_to_cmax_and_order() -> None:
    plan = ContinuousPlan.model_validate(hand_plan([("a", [0], []), ("b", [1], []), ("c", [2], []), ("d", [0], ["a"])], cmax=2))
    order = LaunchOrder(plan)
    assert [j.id for j in order.startable(0.0)] == ["a", "b"]
    assert order.startable(0.0) == [] and order.end("b") == []
    assert [j.id for j in order.startable(1.0)] == ["c"]  # d is held by a (in order, after c)
    order.end("a")
    assert [j.id for j in order.startable(2.0)] == ["d"]
    order.end("c")
    order.end("d")
    assert order.finished
