"""POST /decide and ``service.decide.decide_state`` (the same code in process for the Slurm controller): a node's
state in, a decision within Cmax and the free CPUs and its predicted effect out; bad state refused with one 422 line
naming what is wrong and how to fix it. All figures simulated (sim:reference)."""

from __future__ import annotations

import random

import pytest
from svc_support import Server

from env.errors import InputError
from env.sim.nodes import load_node
from env.sim.stream import StreamNode
from env.sim.world import world_for
from service.decide import DecideError, decide_state

NODE = load_node("sim:reference")  # 24 CPUs, two NUMA domains of 12 (0-11, 12-23), 11 ways per L3


def state(**over):
    body = {"running": [{"id": "a", "profile": "MG", "seconds_run": 40.0, "allocation": {"cpus": list(range(6))}},
                        {"id": "b", "profile": "EP", "seconds_run": 5.0, "allocation": {"cpus": list(range(12, 18))}}],
            "queue": [{"id": "c", "profile": "FT"}, {"id": "d", "profile": "cholesky"}, {"id": "e", "profile": "IS"}],
            "max_concurrency": 4}
    body.update(over)
    return body


def test_a_decision_never_oversubscribes_and_keeps_within_cmax(server: Server) -> None:
    r = server.client.post("/decide", json=state())
    assert r.status_code == 200, r.text
    doc = r.json()
    held = set(range(6)) | set(range(12, 18))
    starts = doc["starts"]
    assert 1 <= len(starts) <= 2  # Cmax 4 with two running
    given: set[int] = set()
    for s in starts:
        cpus = set(s["allocation"]["cpus"])
        assert cpus and not cpus & held and not cpus & given
        given |= cpus
    assert {s["id"] for s in starts} <= {"c", "d", "e"}
    p = doc["predicted"]
    assert p["kind"] == "simulated" and "sim:reference" in p["source"]
    ends = {j["id"]: j for j in p["jobs"]}
    assert set(ends) == {"a", "b", "c", "d", "e"}
    assert ends["a"]["state"] == "running" and ends["a"]["start_s"] == -40.0
    assert all(j["end_s"] > 0 for j in p["jobs"])
    assert p["makespan_s"] == pytest.approx(max(j["end_s"] for j in p["jobs"]) + 40.0)


@pytest.mark.parametrize("policy", ["rollout", "greedy-continuous", "packing", "timeshare", "agent", "agent-search"])
def test_random_states_are_decided_within_cmax_and_the_free_cpus(policy: str) -> None:
    rng = random.Random(7)
    programs = list(world_for(NODE).entries)[:19]
    for _ in range(6):
        cmax = rng.randint(1, 4)
        cpus = list(NODE.cpus)
        rng.shuffle(cpus)
        running = []
        for i in range(rng.randint(0, cmax)):
            n = rng.randint(1, 4)
            running.append({"id": f"r{i}", "profile": rng.choice(programs), "seconds_run": rng.uniform(0, 300),
                            "allocation": {"cpus": cpus[:n], "memory": rng.choice(["first-touch", "interleave"])}})
            cpus = cpus[n:]
        queue = [{"id": f"q{i}", "profile": rng.choice(programs)} for i in range(rng.randint(0, 6))]
        doc = decide_state(NODE, {"running": running, "queue": queue, "max_concurrency": cmax, "policy": policy})
        assert len(running) + len(doc.starts) <= cmax
        taken = {c for r in running for c in r["allocation"]["cpus"]}
        for s in doc.starts:
            assert not set(s.allocation.cpus) & taken
            taken |= set(s.allocation.cpus)
        assert doc.policy == policy


def test_starts_nothing_when_cmax_is_reached_and_predicts_the_queue() -> None:
    doc = decide_state(NODE, state(max_concurrency=2, policy="packing"))
    assert doc.starts == [] and doc.changes == []
    queued = [j for j in doc.predicted.jobs if j.state == "queued"]
    assert {j.id for j in queued} == {"c", "d", "e"} and all(j.start_s > 0 for j in queued)


BAD = [
    ("an unknown profile", {"queue": [{"id": "c", "profile": "nosuchprogram"}]}, "queue[0].profile",
     "does not know program 'nosuchprogram'"),
    ("a CPU used twice", {"running": [
        {"id": "a", "profile": "MG", "seconds_run": 1, "allocation": {"cpus": [0, 1]}},
        {"id": "b", "profile": "EP", "seconds_run": 1, "allocation": {"cpus": [1, 2]}}]},
     "running[1].allocation.cpus", "CPU 1 is also held by running[0] ('a')"),
    ("more running than Cmax", {"max_concurrency": 1}, "running", "2 jobs run, above max_concurrency 1"),
    ("CPUs not on the node", {"running": [{"id": "a", "profile": "MG", "seconds_run": 1,
                                           "allocation": {"cpus": [3, 99]}}]},
     "running[0].allocation.cpus", "CPUs [99] are not on node sim:reference"),
    ("negative seconds", {"running": [{"id": "a", "profile": "MG", "seconds_run": -2,
                                       "allocation": {"cpus": [3]}}]},
     "running.0.seconds_run", "-2.0 is negative: send the seconds the job has run so far"),
    ("a job twice", {"queue": [{"id": "a", "profile": "EP"}]}, "queue[0].id", "'a' is also running[0]"),
    ("a policy that does not decide online", {"policy": "groups"}, "policy", "choose rollout"),
    ("ways of an L3 domain the job is not in", {"running": [{"id": "a", "profile": "MG", "seconds_run": 1,
                                                             "allocation": {"cpus": [0], "l3": {"1": {"ways": 2, "mask": "0x3"}}}}]},
     "running[0].allocation.l3", "L3 domain 1 holds none of the job's CPUs"),
    ("a time alone of 0", {"queue": [{"id": "c", "profile": "FT", "solo_s": 0}]}, "queue.0.solo_s",
     "0.0 is not a time alone: send the job's seconds alone on the whole node"),
    ("a time alone too long", {"running": [{"id": "a", "profile": "MG", "seconds_run": 1, "solo_s": 2e9,
                                            "allocation": {"cpus": [0]}}]}, "running.0.solo_s", "at most 1e9"),
    ("a queued job submitted after now", {"now_s": 1.0, "queue": [{"id": "c", "profile": "FT", "submit_s": 5}]},
     "queue[0].submit_s", "is after now_s 1.0"),
]


@pytest.mark.parametrize("what, over, field, words", BAD, ids=[b[0] for b in BAD])
def test_bad_state_is_one_422_line(server: Server, what: str, over: dict, field: str, words: str) -> None:
    r = server.client.post("/decide", json=state(**over))
    assert r.status_code == 422, r.text
    doc = r.json()
    assert "\n" not in doc["message"] and "Traceback" not in r.text
    assert doc["message"].startswith(f"{field}: ") and words in doc["message"], doc["message"]
    assert [d["field"] for d in doc["detail"]] == [field]


def test_rollout_giveback_takes_cpus_only_from_a_job_that_adapts(server: Server) -> None:
    """EP alone on every CPU, MG waiting: a job that adapts keeps a dealt half and MG starts on the rest, with the
    prediction played through the change; the same job not adapting keeps its CPUs and MG waits."""
    def body(adapts: bool) -> dict:
        return {"running": [{"id": "long", "profile": "EP", "seconds_run": 5.0, "adapts": adapts,
                             "allocation": {"cpus": list(NODE.cpus)}}],
                "queue": [{"id": "short", "profile": "MG", "submit_s": 5.0}], "max_concurrency": 2,
                "policy": "rollout-giveback", "now_s": 5.0}

    r = server.client.post("/decide", json=body(True))
    assert r.status_code == 200, r.text
    doc = r.json()
    (change,) = doc["changes"]
    kept = set(change["allocation"]["cpus"])
    assert change["id"] == "long" and kept < set(NODE.cpus) and len(kept) == 12
    assert {c for d in NODE.numa for c in d.cpus} & kept == kept and all(len(kept & set(d.cpus)) == 6 for d in NODE.numa)
    (start,) = doc["starts"]
    assert start["id"] == "short" and not set(start["allocation"]["cpus"]) & kept
    assert doc["note"] == "long gives back 12 CPUs for short"
    assert {j["id"]: j["state"] for j in doc["predicted"]["jobs"]} == {"long": "running", "short": "started"}
    fixed = server.client.post("/decide", json=body(False)).json()
    assert fixed["changes"] == [] and fixed["starts"] == []


def test_the_same_refusal_in_process_names_the_field() -> None:
    with pytest.raises(DecideError) as err:
        decide_state(NODE, state(max_concurrency=1))
    assert err.value.field == "running" and "send the jobs running now" in str(err.value)
    with pytest.raises(InputError, match="seconds_run"):
        decide_state(NODE, state(running=[{"id": "a", "profile": "MG", "seconds_run": -1, "allocation": {"cpus": [0]}}]))


def test_a_running_job_carries_the_work_the_model_says_is_left() -> None:
    params = world_for(NODE).params
    from env.plan.allocate import plain_allocation

    mg = world_for(NODE).entries["MG"].params
    alloc = plain_allocation(NODE, tuple(range(6)))
    fresh = StreamNode(NODE, params)
    fresh.start("a", "MG", mg, alloc)
    t = 1.0 / fresh.rates()["a"]  # its whole time alone on these CPUs
    sim = StreamNode.from_running(NODE, params, [("a", "MG", mg, alloc, t / 4)], now=100.0)
    assert sim.running["a"].left == pytest.approx(0.75)
    assert sim.running["a"].start_s == pytest.approx(100.0 - t / 4)
    assert sim.next_end() == pytest.approx(100.0 + 0.75 * t)
    late = StreamNode.from_running(NODE, params, [("a", "MG", mg, alloc, 10 * t)])
    assert late.running["a"].left == pytest.approx(0.01)  # past the model's end: taken to end soon


def test_a_jobs_time_alone_from_the_caller_scales_its_program_on_the_node_model() -> None:
    # FT alone on an empty node: the caller says it runs twice its profile's time alone; the node model plays it
    # twice as long, a running job with a solo_s is as far through its work as that says, and the answer says
    # which time alone each start was decided with
    from env.sim.catalogue import catalogue

    solo = catalogue(NODE)["FT"].solo_s
    base = decide_state(NODE, {"queue": [{"id": "c", "profile": "FT"}], "max_concurrency": 1})
    long_ = decide_state(NODE, {"queue": [{"id": "c", "profile": "FT", "solo_s": 2 * solo}], "max_concurrency": 1})
    assert [s.allocation.cpus for s in long_.starts] == [s.allocation.cpus for s in base.starts]
    assert base.starts[0].solo_s == pytest.approx(solo) and long_.starts[0].solo_s == pytest.approx(2 * solo)
    assert long_.predicted.jobs[0].end_s == pytest.approx(2 * base.predicted.jobs[0].end_s)
    alloc = base.starts[0].allocation.model_dump()
    t = base.predicted.jobs[0].end_s
    run = {"id": "c", "profile": "FT", "allocation": alloc, "seconds_run": t / 2}
    half = decide_state(NODE, {"running": [run], "max_concurrency": 1})
    slow = decide_state(NODE, {"running": [{**run, "solo_s": 2 * solo}], "max_concurrency": 1})
    assert half.predicted.jobs[0].end_s == pytest.approx(t / 2)  # halfway through its profile's work
    assert slow.predicted.jobs[0].end_s == pytest.approx(1.5 * t)  # a quarter through twice that work
    with pytest.raises(InputError, match=r"queue\.0\.solo_s: 0\.0 is not a time alone"):
        decide_state(NODE, {"queue": [{"id": "c", "profile": "FT", "solo_s": 0}], "max_concurrency": 1})


def test_the_controllers_fast_path_decides_the_same_without_predicting() -> None:
    full, fast = decide_state(NODE, state()), decide_state(NODE, state(predict=False))
    assert fast.predicted is None and "predict: false" in fast.no_prediction
    assert [(s.id, s.allocation.cpus) for s in fast.starts] == [(s.id, s.allocation.cpus) for s in full.starts]


def test_the_agents_decide_with_the_nodes_stream_model_and_say_when_there_is_none() -> None:
    doc = decide_state(NODE, state(policy="agent-search"))
    assert doc.policy == "agent-search" and doc.starts and doc.predicted is not None
    with pytest.raises(DecideError) as e:  # no stream model ships for this node
        decide_state(load_node("sim:variant-a"), state(policy="agent"))
    assert e.value.field == "policy" and "needs a stream model for sim:variant-a" in str(e.value)
    assert "training.stream.sac" in str(e.value)


def test_a_stream_model_for_a_policy_without_one_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from service.decide import Decider

    with pytest.raises(DecideError) as e:
        Decider(NODE, "rollout", model=tmp_path / "m.npz")
    assert e.value.field == "model" and "for the agent policies" in str(e.value)
    with pytest.raises(DecideError) as e:
        Decider(NODE, "agent", model=tmp_path / "missing.npz")
    assert e.value.field == "policy" and "missing.npz" in str(e.value)


def test_a_policy_that_takes_cpus_from_a_job_that_does_not_adapt_is_stopped_in_one_line() -> None:
    from env.episode.stream import Decision
    from env.errors import RunError
    from env.plan.allocate import plain_allocation
    from service.decide import Decider

    decider = Decider(NODE, "rollout-giveback", give_back=True)
    long = decider.stream_job("long", "EP")
    decider.reset([long], 2)
    view = decider.view([(long, plain_allocation(NODE, NODE.cpus), 5.0)], [], 5.0)
    decider.policy.decide = lambda v: Decision(changes=(("long", plain_allocation(NODE, NODE.cpus[:12])),))
    with pytest.raises(RunError, match="takes CPUs from long, whose program does not adapt") as exc:
        decider.decide(view)
    assert "\n" not in str(exc.value)
