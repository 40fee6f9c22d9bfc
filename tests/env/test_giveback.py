"""Giving CPUs back on one node (``env.planners.streams.RolloutGiveBack``, ``StreamNode.apply``, ``check_decision``),
simulated: a job alone on every CPU whose program adapts (``StreamJob.adapts``) keeps a dealt half when a job waits,
where the node model predicts that better than waiting; a job that does not adapt is never asked."""

from __future__ import annotations

import pytest

from env.episode.stream import Decision, StreamView, check_decision, run_stream, sim_stream
from env.errors import InputError
from env.plan.allocate import plain_allocation
from env.plan.models import WindowJob
from env.planners.continuous import Rollout
from env.planners.streams import RolloutGiveBack
from env.sim.nodes import load_node
from env.sim.stream import StreamNode
from env.sim.world import world_for

NODE = load_node("sim:reference")
WORLD = world_for(NODE)


def _lone_and_waiting() -> tuple[StreamView, RolloutGiveBack]:
    """EP alone on all 24 CPUs since 0, nearly all its work left; MG arrived at 5 s and waits (a stream with arrivals:
    the objective is the jobs' turnaround)."""
    jobs = sim_stream(NODE, [WindowJob(id="long", profile="EP", submit_s=0.0, adapts=True),
                             WindowJob(id="short", profile="MG", submit_s=5.0)])
    sim = StreamNode(NODE, WORLD.params)
    sim.start("long", "EP", jobs[0].params, plain_allocation(NODE, NODE.cpus), factor=20.0)
    sim.advance(5.0)
    pol = RolloutGiveBack(8, guard=False)
    pol.reset(NODE, jobs, 2)
    return StreamView(sim, [jobs[1]], 2, 0), pol


def test_a_lone_job_gives_back_a_dealt_half_when_that_is_predicted_better_than_waiting() -> None:
    view, pol = _lone_and_waiting()
    assert Rollout.search(pol, view).starts == ()  # rollout alone can only wait: no CPU is free
    d = pol.search(view)
    check_decision(view, d)
    (jid, kept), = d.changes
    assert jid == "long" and sorted(kept.cpus) == sorted(c for dom in NODE.numa for c in dom.cpus[:6])
    (sid, alloc), = d.starts
    assert sid == "short" and not set(alloc.cpus) & set(kept.cpus)
    # the node model's own verdict, played forward from here both ways
    assert pol._value(view.sim, list(view.queue), None) > _value_after(pol, view, d)


def _value_after(pol: RolloutGiveBack, view: StreamView, d: Decision) -> float:
    sim = view.sim.fork()
    for jid, a in d.changes:
        sim.apply(jid, a)
    return pol._value(sim, list(view.queue), (view.queue[0], d.starts[0][1]))


def _stream(adapts: bool) -> list:
    return sim_stream(NODE, [WindowJob(id="long", profile="EP", submit_s=0.0, adapts=adapts),
                             *(WindowJob(id=f"s{k}", profile=p, submit_s=30.0 + 40 * k)
                               for k, p in enumerate(["MG", "cholesky", "FT", "DC"]))])


def test_a_stream_with_give_backs_runs_each_job_once_on_cpus_no_one_else_holds() -> None:
    jobs = _stream(adapts=True)
    factors = {"long": 20.0}
    run = run_stream(NODE, jobs, 2, RolloutGiveBack(8), factors=factors)
    plain = run_stream(NODE, jobs, 2, Rollout(8), factors=factors)
    assert [j.id for j in run.jobs] == [j.id for j in jobs]
    assert run.changes and all(len(a.cpus) == 12 for _, _, a in run.changes)
    given = {jid: (t, set(a.cpus)) for t, jid, a in run.changes}
    for a in run.jobs:  # at every start, the CPUs held then (a job that gave back holds what it kept) are disjoint
        at = [b for b in run.jobs if b.start_s <= a.start_s < b.end_s]
        assert len(at) <= 2
        held = [c for b in at for c in (given[b.id][1] if b.id in given and given[b.id][0] <= a.start_s else b.cpus)]
        assert len(held) == len(set(held)), f"a CPU held twice at {a.start_s}"
    assert run.metrics()["mean_turnaround_s"] < plain.metrics()["mean_turnaround_s"]


def test_a_job_that_does_not_adapt_is_never_asked_to_give_back() -> None:
    """The same stream with the long job's program not adapting: rollout-giveback decides exactly as rollout."""
    jobs, factors = _stream(adapts=False), {"long": 20.0}
    run = run_stream(NODE, jobs, 2, RolloutGiveBack(8), factors=factors)
    plain = run_stream(NODE, jobs, 2, Rollout(8), factors=factors)
    assert not run.changes
    assert [(j.id, j.start_s, j.end_s, j.cpus) for j in run.jobs] == [(j.id, j.start_s, j.end_s, j.cpus) for j in plain.jobs]
    view, pol = _lone_and_waiting()
    pol.adapts = set()  # the same state, its job not adapting: rollout's own decision (wait)
    assert pol.search(view) == Rollout.search(pol, view)


def test_the_stream_run_refuses_taking_cpus_from_a_job_that_does_not_adapt() -> None:
    class Taker:
        """Starts the first job on every CPU, then takes half of them back when the next job arrives."""

        name = "taker"

        def reset(self, node, jobs, max_concurrency) -> None:  # noqa: ANN001
            pass

        def decide(self, view: StreamView) -> Decision:
            if not view.sim.running:
                return Decision(starts=((view.queue[0].id, plain_allocation(NODE, NODE.cpus)),))
            jid = next(iter(view.sim.running))
            return Decision(changes=((jid, plain_allocation(NODE, NODE.cpus[:12])),))

    with pytest.raises(ValueError, match="does not adapt to fewer CPUs while it runs"):
        run_stream(NODE, _stream(adapts=False), 2, Taker())


def test_a_change_may_only_give_back_cpus_the_job_holds() -> None:
    view, _ = _lone_and_waiting()
    with pytest.raises(ValueError, match="does not hold"):
        other = StreamNode(NODE, WORLD.params)
        other.start("long", "EP", WORLD.entries["EP"].params, plain_allocation(NODE, NODE.cpus[:12]))
        check_decision(StreamView(other, view.queue, 2, 0),
                       Decision(changes=(("long", plain_allocation(NODE, NODE.cpus[6:18])),)))
    with pytest.raises(ValueError, match="taken"):  # a start on CPUs the change did not give back
        check_decision(view, Decision(starts=((view.queue[0].id, plain_allocation(NODE, NODE.cpus[:12])),),
                                      changes=(("long", plain_allocation(NODE, NODE.cpus[:12])),)))
    with pytest.raises(ValueError, match="can give back CPUs, not take new ones"):
        view.sim.give_back("long", plain_allocation(NODE, NODE.cpus))


def test_refused_on_a_real_node_in_one_line() -> None:
    real = NODE.model_copy(update={"name": "node01"})
    assert not real.simulated
    with pytest.raises(InputError, match="decides on a node model, and node node01 is none"):
        RolloutGiveBack().reset(real, [], 2)


def test_chosen_by_name_only_where_the_node_model_runs_the_decisions() -> None:
    from env.planners.streams import stream_registry
    from service.slurm.tracesim_policies import trace_policy

    assert isinstance(stream_registry(give_back=True).get("rollout-giveback"), RolloutGiveBack)
    for ask in (lambda: stream_registry().get("rollout-giveback"), lambda: trace_policy("cosched:rollout-giveback")):
        with pytest.raises(InputError, match="the Slurm controller and the trace's cluster policy cannot carry out yet"):
            ask()
