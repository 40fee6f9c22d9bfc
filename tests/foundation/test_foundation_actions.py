"""The 257-action encoding: every index round-trips, and the layout is the spec's."""

from __future__ import annotations

from fractions import Fraction

import pytest

from env.plan import actions as A


def test_round_trip_all_257() -> None:
    seen = set()
    for i in range(A.N_ACTIONS):
        a = A.decode(i)
        assert A.encode(a) == i
        seen.add(a)
    assert len(seen) == 257 == A.N_ACTIONS


def test_layout() -> None:
    assert [A.decode(i) for i in range(6)] == [
        A.ScheduleAction(aff, mem) for aff in ("compact", "distributed") for mem in ("first-touch", "interleave", "local-alloc")
    ]
    assert A.decode(256) == A.SkipAction()
    job = [A.decode(i) for i in range(6, 256)]
    assert all(isinstance(j, A.JobAction) for j in job)
    assert {j.cores for j in job} == {Fraction(1, 8), Fraction(1, 4), Fraction(1, 2), Fraction(3, 4), Fraction(7, 8)}
    assert {j.ways * 22 for j in job} == {4, 8, 12, 16, 22}
    assert {j.bw_percent for j in job} == {20, 40, 60, 80, 100}
    assert {j.split for j in job} == {"balanced", "proportional"}
    assert A.is_schedule(5) and not A.is_schedule(6) and A.is_job(6) and A.is_job(255) and not A.is_job(256)


@pytest.mark.parametrize("bad", [-1, 257, 10_000])
def test_out_of_range(bad: int) -> None:
    with pytest.raises(ValueError, match="outside"):
        A.decode(bad)


def test_encode_refuses_values_outside_the_lists() -> None:
    with pytest.raises(ValueError, match="not in the action encoding"):
        A.encode(A.JobAction(Fraction(1, 3), Fraction(4, 22), 20, "balanced"))
