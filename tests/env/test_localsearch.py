"""The local search that ends agent-search (env.planners.localsearch), on the simulated reference node."""

from __future__ import annotations

import random

from env.plan import actions
from env.plan.allocate import core_count
from env.planners.partitions import best_partition
from env.planners.scoring import GroupEvaluator
from env.planners.localsearch import LocalSearch, maximal_core_splits, regroup, tune
from env.sim.nodes import load_node
from env.sim.catalogue import ALL_JOBS

NODE = load_node("sim:reference")
NAMES = ["MG", "EP", "CG", "FT", "fmm", "water_spatial"]


def test_maximal_core_splits_fit_and_cannot_grow() -> None:
    n = len(NODE.cpus)
    assert n == 24
    counts = {k: len(maximal_core_splits(NODE, k)) for k in (1, 2, 3, 4)}
    assert counts == {1: 1, 2: 5, 3: 6, 4: 13}
    for k in (2, 3, 4):
        for split in maximal_core_splits(NODE, k):
            used = sum(core_count(NODE, c) for c in split)
            assert used <= n
            for i, c in enumerate(split):  # no member can take the next larger fraction
                for d in actions.CORE_FRACTIONS:
                    if d > c:
                        assert used - core_count(NODE, c) + core_count(NODE, d) > n


def test_the_pruning_bound_holds_on_the_simulated_node() -> None:
    """The climb skips a move, and a group skips a core split, when the members' times alone already exceed the
    best known: that needs a group's makespan >= its slowest member alone on the same cores. Seeded random groups."""
    ev = GroupEvaluator(NODE)
    rng = random.Random(7)
    jobs = list(ALL_JOBS)
    for _ in range(60):
        k = rng.choice((2, 3, 4))
        names = rng.sample(jobs, k)
        schedule = rng.randrange(actions.N_SCHEDULE)
        ls = LocalSearch(NODE, names, 4, schedule, ev.makespan, {}, calls=10_000)
        for split in ls.splits[k]:
            t = ev.makespan(schedule, list(zip(names, split)))
            assert t >= ls.bound(list(range(k)), split) - 1e-9, (names, schedule, split)


def test_the_climb_ends_where_no_single_move_helps() -> None:
    ev = GroupEvaluator(NODE)
    ls = LocalSearch(NODE, NAMES, 3, 0, ev.makespan, {}, calls=100_000)
    start = [1 << i for i in range(len(NAMES))]  # every job alone
    final = ls.climb(start)
    assert sorted(b for m in final for b in range(6) if m >> b & 1) == list(range(6))  # a partition
    assert all(bin(m).count("1") <= 3 for m in final)
    total = sum(ls.cost(m)[0] for m in final)
    assert total < sum(ls.cost(m)[0] for m in start)
    for removed, added in ls._moves(final):  # every move from the end is no better (costs by the same rule)
        assert sum(ls.cost(m)[0] for m in added) >= sum(ls.cost(m)[0] for m in removed) - 1e-9


def test_regroup_and_tune_keep_to_their_budget_and_gives_the_same_result_cold_or_warm() -> None:
    ev = GroupEvaluator(NODE)
    full_mask = (1 << len(NAMES)) - 1
    a = actions.encode(actions.JobAction(actions.CORE_FRACTIONS[0], max(actions.WAY_FRACTIONS), 100, "balanced"))
    start = [[(i, a)] for i in range(len(NAMES))]  # every job alone on an eighth of the node
    runs = []
    for budget in (25, 25, 400):
        calls = [0]

        def counting(schedule, members, calls=calls):  # noqa: ANN001, ANN202
            calls[0] += 1
            return ev.makespan(schedule, members)

        seen: dict = {}
        made = regroup(NODE, NAMES, 3, 0, [start], counting, seen, budget // 2)
        total, choice = best_partition({m: t for m, (t, _) in seen.items()}, full_mask)
        groups, m = [], full_mask
        while m:
            groups.append(seen[choice[m]][1])
            m ^= choice[m]
        made += tune(NODE, NAMES, 0, groups, counting, seen, budget - made)
        assert made == calls[0] <= budget
        total, _ = best_partition({m: t for m, (t, _) in seen.items()}, full_mask)
        runs.append((sorted((m, round(t, 9)) for m, (t, _) in seen.items()), total))
    assert runs[0] == runs[1]  # the second run found the evaluator warm: the same groups, the same costs
    start_total = sum(ev.makespan(0, [(n, a)]) for n in NAMES)
    assert runs[2][1] <= runs[0][1] < start_total  # more budget is never worse; a little already helps
