"""The C group run (env.sim.kernel, native/src/simkernel/simgroup.c) gives the Python model's doubles, bit for bit, on random
groups of random placements, on the reference node and on a four-domain node with eight L3s whose jobs hold
overlapping way masks, MBA caps and every memory policy; and the model falls back to Python, saying why."""

from __future__ import annotations

import random

import pytest

from env.node.spec import NodeSpec
from env.sim.nodes import load_node
from env.sim import kernel, model
from env.sim.catalogue import ENTRIES


def test_the_kernel_is_built_and_used() -> None:
    # make test builds native/ first: a missing library here is a build regression, not a reason to skip
    assert kernel.status().startswith("C kernel"), kernel.status()


def _four_domains() -> NodeSpec:
    """A 32-CPU node: 4 NUMA domains of 8 CPUs, each with two L3s of 4 CPUs and 12 ways (an EPYC-like shape)."""
    numa = [{"id": d, "cpus": list(range(8 * d, 8 * d + 8)), "memory_bytes": 2**34, "memory_bandwidth_gbs": 40.0 + d}
            for d in range(4)]
    l3 = [{"id": i, "cpus": list(range(4 * i, 4 * i + 4)), "size_bytes": 16 * 2**20, "ways": 12} for i in range(8)]
    doc = load_node("sim:reference").model_dump()
    doc.update(name="sim:test-four-domains", cpus=list(range(32)), numa=numa, l3=l3)
    doc["cat"]["cbm_mask"] = "fff"
    return NodeSpec.model_validate(doc)


def _random_group(g: model.Geometry, rng: random.Random, k: int) -> list[model.SimJob]:
    """k jobs on random CPUs (possibly overlapping: the model does not care), random way masks, caps and policies."""
    params = [e.params for e in ENTRIES]
    jobs = []
    for _ in range(k):
        cpus = sorted(rng.sample(g.cpus, rng.randint(1, len(g.cpus) // 2)))
        memory = rng.choice(["first-touch", "local-alloc", "interleave", f"bind:{rng.randrange(g.n_numa)}"])
        masks = {li: rng.randint(1, g.full_mask[li]) for li in range(g.n_l3)} if rng.random() < 0.7 else None
        mba = {d: rng.choice([10, 30, 50, 100]) for d in range(g.n_numa)} if rng.random() < 0.4 else None
        jobs.append(model.SimJob(g, rng.choice(params), cpus, memory, masks, mba))
    return jobs


@pytest.mark.parametrize("node", ["reference", "four-domains"])
def test_the_kernel_gives_the_python_models_doubles(node: str) -> None:
    spec = load_node("sim:reference") if node == "reference" else _four_domains()
    g = model.Geometry(spec)
    rng = random.Random(11)
    for trial in range(400):
        jobs = _random_group(g, rng, rng.randint(1, 4))
        factors = [rng.lognormvariate(0.0, 0.1) for _ in jobs] if trial % 3 == 0 else None
        fast = kernel.run_group(g, jobs, factors)
        assert fast is not None
        assert fast == model.run_group_py(g, jobs, factors), (trial, [j.params.name for j in jobs])


@pytest.mark.parametrize("node", ["reference", "four-domains"])
def test_the_kernels_solve_gives_the_python_models_doubles(node: str) -> None:
    """The streams' one solve per event (env.sim.stream) goes through the kernel too: the same doubles."""
    spec = load_node("sim:reference") if node == "reference" else _four_domains()
    g = model.Geometry(spec)
    rng = random.Random(12)
    for trial in range(400):
        jobs = _random_group(g, rng, rng.randint(1, 4))
        fast = kernel.solve(g, jobs)
        assert fast is not None
        assert fast == model.solve_py(g, jobs) == model.solve(g, jobs), (trial, [j.params.name for j in jobs])


def test_what_the_kernel_cannot_take_runs_in_python(monkeypatch) -> None:
    g = model.Geometry(load_node("sim:reference"))
    rng = random.Random(3)
    nine = _random_group(g, rng, kernel.MAX_JOBS + 1)
    assert kernel.run_group(g, nine) is None  # over the kernel's group size
    assert kernel.solve(g, nine) is None
    assert model.run_group(g, nine) == model.run_group_py(g, nine)
    two = _random_group(g, rng, 2)
    kernel.job_record(two[0])
    two[0].record = two[0].record[:-8]  # a malformed record: refused by the kernel, not read past its end
    assert kernel.run_group(g, two) is None
    assert model.run_group(g, two) == model.run_group_py(g, two)
    monkeypatch.setattr(kernel, "_lib", None)
    monkeypatch.setattr(kernel, "_why", "")
    monkeypatch.setenv("COSCHED_SIM_KERNEL", "python")
    assert kernel.status() == "Python (COSCHED_SIM_KERNEL=python)"
    assert kernel.run_group(g, _random_group(g, rng, 2)) is None
    assert kernel.solve(g, _random_group(g, rng, 2)) is None


def test_the_shared_allocation_table_gives_what_a_fresh_one_gives() -> None:
    """Evaluators of a node share its allocation table (allocations depend on the node and the group's state, never
    on the jobs): a second evaluator reading a warm table gives the makespans of one that built its own."""
    from env.planners import scoring
    from env.planners.localsearch import _split_actions

    node = load_node("sim:reference")
    rng = random.Random(7)
    names = [e.params.name for e in ENTRIES][:8]
    groups = []
    for _ in range(150):
        combo = rng.choice(_split_actions(len(node.cpus), rng.randint(1, 4)))
        groups.append((rng.randrange(6), [(rng.choice(names), a) for a in combo]))
    first = scoring.GroupEvaluator(node)
    warm = [first.makespan(s, m) for s, m in groups]
    assert scoring.GroupEvaluator(node).allocations is first.allocations
    scoring._ALLOCATIONS.clear()
    fresh = scoring.GroupEvaluator(node)
    assert fresh.allocations is not first.allocations
    assert [fresh.makespan(s, m) for s, m in groups] == warm
    assert [scoring.GroupEvaluator(node).makespan(s, m) for s, m in reversed(groups)] == warm[::-1]


class _PythonFill:
    """The same Fill, seen by ``play_out`` as another base: it plays in Python."""

    def __init__(self, fill) -> None:  # noqa: ANN001 - continuous.Fill
        self.fill = fill

    def next_start(self, sim, queue, places):  # noqa: ANN001, ANN201
        return self.fill.next_start(sim, queue, places)


@pytest.mark.parametrize("node", ["reference", "four-domains"])
def test_the_play_out_in_c_gives_the_python_play_outs_values(node: str, monkeypatch) -> None:
    """Every play-out of rollout's searches (saturated streams: the makespan; arrivals: the sum of ends and the
    node-seconds held), from the states the searches meet, is played both ways: the same value to the bit, and the
    node and queue it was given are left as they were."""
    from env.episode.stream import StreamJob, run_stream
    from env.planners import continuous
    from env.sim.world import world_for
    from training.stream.streams import saturated

    spec = load_node("sim:reference") if node == "reference" else _four_domains()
    c_play = continuous.Fill.play_c
    seen = {"c": 0, "python": 0}

    def both(self, sim, queue, cmax, objective, ends, held):  # noqa: ANN001, ANN202
        before = (sim.now, {k: (r.left, r.alloc) for k, r in sim.running.items()}, list(queue), list(ends))
        fast = c_play(self, sim, queue, cmax, objective, ends, held)
        assert before == (sim.now, {k: (r.left, r.alloc) for k, r in sim.running.items()}, list(queue), list(ends))
        slow = continuous.play_out(sim.fork(), list(queue), cmax, _PythonFill(self), objective, list(ends), held)
        assert fast is not None
        assert fast == slow, (objective, cmax, len(queue), len(sim.running))
        seen["c" if fast is not None else "python"] += 1
        return fast

    monkeypatch.setattr(continuous.Fill, "play_c", both)
    programs = world_for(spec).all_jobs
    for cmax, seed in [(2, 5), (3, 6), (4, 7)]:
        jobs = saturated(spec, 16, seed)
        run_stream(spec, jobs, cmax, continuous.Rollout(window=6, candidates=4))
        rng = random.Random(seed)  # arrivals: the turnaround objective
        t = 0.0
        arriving = []
        for k, j in enumerate(jobs[:12]):
            t += rng.expovariate(1 / 40.0)
            arriving.append(StreamJob(f"a{k}", j.name, j.params, j.solo_s, submit_s=t))
        run_stream(spec, arriving, cmax, continuous.Rollout(window=6, candidates=4))
    assert seen["c"] > 200 and len(programs) > 0


def test_the_play_out_runs_in_python_without_the_kernel(monkeypatch) -> None:
    """Without the library (or with COSCHED_SIM_KERNEL=python) the play-out is Python's, with the same value."""
    from env.planners import continuous
    from env.sim.stream import StreamNode
    from env.sim.world import world_for
    from training.stream.streams import saturated

    spec = load_node("sim:reference")
    jobs = saturated(spec, 10, 3)
    fill = continuous.Fill(8)
    fill.reset(spec, jobs, 2)
    sim = StreamNode(spec, world_for(spec).params)
    fast = continuous.play_out(sim.fork(), list(jobs), 2, fill, "makespan")
    monkeypatch.setattr(kernel, "_lib", None)
    monkeypatch.setattr(kernel, "_pl", None)
    monkeypatch.setattr(kernel, "_why", "")
    monkeypatch.setenv("COSCHED_SIM_KERNEL", "python")
    fresh = StreamNode(spec, world_for(spec).params)
    assert fill.play_c(fresh, list(jobs), 2, "makespan", [], 0.0) is None
    assert continuous.play_out(fresh.fork(), list(jobs), 2, fill, "makespan") == fast


def test_a_play_out_context_started_afresh_gives_the_same_plays(monkeypatch) -> None:
    """Past its bound on job records a node's play-out context starts afresh (records and solves met again): the
    search's decisions stay the same."""
    from env.episode.stream import run_stream
    from env.planners.continuous import Rollout
    from training.stream.streams import saturated

    spec = load_node("sim:reference")
    jobs = saturated(spec, 12, 9)
    kept = run_stream(spec, jobs, 3, Rollout(window=6, candidates=4))
    monkeypatch.setattr(kernel, "_MAX_RECORDS", 5)
    fresh = run_stream(spec, jobs, 3, Rollout(window=6, candidates=4))
    assert fresh.jobs == kept.jobs and fresh.makespan_s == kept.makespan_s
