"""Allocation: CPUs (compact vs distributed), ways and masks, bandwidth and MBA units."""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest

from env.plan import actions as A
from env.plan.allocate import GroupState, allocate, assign_cpus, core_count, mba_hardware_value, place_mask, split_bandwidth, split_ways
from env.node.discover import discover
from env.sim.nodes import load_node

REF = load_node("sim:reference")


def test_core_count_half_up() -> None:
    two = REF.model_copy(update={"cpus": [0, 1]})
    assert [core_count(two, f) for f in A.CORE_FRACTIONS] == [1, 1, 1, 2, 2]
    assert [core_count(REF, f) for f in A.CORE_FRACTIONS] == [3, 6, 12, 18, 21]


def test_compact_stays_in_one_domain_and_distributed_spreads() -> None:
    compact = assign_cpus(REF, 6, "compact", set())
    assert compact == [0, 1, 2, 3, 4, 5]
    dist = assign_cpus(REF, 6, "distributed", set())
    assert dist == [0, 1, 2, 12, 13, 14]
    assert {REF.numa_of(c) for c in compact} == {0} and {REF.numa_of(c) for c in dist} == {0, 1}


def test_compact_best_fit_keeps_later_jobs_whole() -> None:
    taken = set(range(9))  # domain 0 has 3 left, domain 1 has 12
    assert assign_cpus(REF, 3, "compact", taken) == [9, 10, 11]
    assert assign_cpus(REF, 6, "compact", taken) == list(range(12, 18))
    # Larger than any domain: the emptiest domain first, then the rest.
    assert assign_cpus(REF, 14, "compact", taken) == [9, 10] + list(range(12, 24))
    assert assign_cpus(REF, 16, "compact", taken) is None


def test_group_cpus_disjoint_within_node_until_full() -> None:
    for affinity in ("compact", "distributed"):
        state, got = GroupState(), []
        action = A.JobAction(Fraction(1, 4), Fraction(4, 22), 40, "balanced")
        while (alloc := allocate(REF, affinity, "first-touch", action, state)) is not None:
            got.append(alloc.cpus)
        flat = [c for cpus in got for c in cpus]
        assert len(got) == 4 and len(flat) == len(set(flat)) == 24 and set(flat) == set(REF.cpus)


def test_does_not_fit_leaves_state_unchanged() -> None:
    state = GroupState(taken_cpus=set(range(20)))
    assert allocate(REF, "compact", "first-touch", A.JobAction(Fraction(1, 4), Fraction(4, 22), 40, "balanced"), state) is None
    assert state.taken_cpus == set(range(20)) and state.mask_cursor == {}


def test_ways_split_balanced_and_proportional() -> None:
    cpus_one = list(range(6))
    cpus_two = [0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 13, 14]  # 9 in domain 0, 3 in domain 1
    assert split_ways(REF, cpus_one, Fraction(4, 22), "balanced") == {0: 4}
    assert split_ways(REF, cpus_one, Fraction(16, 22), "balanced") == {0: 11}  # capped at the domain's ways
    assert split_ways(REF, cpus_two, Fraction(8, 22), "balanced") == {0: 4, 1: 4}
    assert split_ways(REF, cpus_two, Fraction(8, 22), "proportional") == {0: 6, 1: 2}


def test_min_cbm_bits_respected(fake_sysroot, which_all) -> None:
    node = discover(fake_sysroot(cbm_mask="fffff", min_cbm_bits=2, cores_per_socket=8), which=which_all)
    ways = split_ways(node, [0, 8], Fraction(4, 22), "proportional")  # 20 ways x 4/22 = 4 total, 2 each
    assert all(w >= 2 for w in ways.values())
    ways = split_ways(node, list(range(7)) + [8], Fraction(4, 22), "proportional")
    assert min(ways.values()) >= 2


def _is_contiguous(mask: int) -> bool:
    low = mask & -mask
    return mask != 0 and ((mask + low) & mask) == 0


def test_masks_contiguous_within_cbm_and_overlap_when_oversubscribed() -> None:
    cbm = REF.cat.mask_int if REF.cat else 0
    state = GroupState()
    masks = [place_mask(REF, 0, w, state) for w in (4, 4, 4, 8)]
    for m, w in zip(masks, (4, 4, 4, 8)):
        assert _is_contiguous(m) and (m & ~cbm) == 0 and bin(m).count("1") == w
    assert masks[0] & masks[1] == 0, "packed while the ways last"
    assert masks[2] & masks[1] == 0 or masks[2] & masks[0] == 0
    assert masks[3] & (masks[0] | masks[1] | masks[2]), "oversubscribed: overlap is shared cache"


@pytest.mark.parametrize("cbm, min_bits", [("7ff", 1), ("ff0", 2), ("fffff", 2)])
def test_masks_fuzz(fake_sysroot, which_all, cbm: str, min_bits: int) -> None:
    node = discover(fake_sysroot(cbm_mask=cbm, min_cbm_bits=min_bits, cores_per_socket=6), which=which_all)
    cbm_int = int(cbm, 16)
    for combo in itertools.islice(itertools.product(A.WAY_FRACTIONS, A.SPLITS, ("compact", "distributed")), 50):
        frac, split, aff = combo
        state = GroupState()
        for _ in range(4):
            alloc = allocate(node, aff, "first-touch", A.JobAction(Fraction(1, 8), frac, 100, split), state)
            assert alloc is not None
            for ways, mask in alloc.l3.values():
                assert _is_contiguous(mask) and (mask & ~cbm_int) == 0
                assert bin(mask).count("1") == ways >= min_bits


def test_bandwidth_split_rounded_to_mba_step() -> None:
    # 60 % of the node = 120 domain-percent; a one-domain job is capped at its domain's 100 %.
    assert split_bandwidth(REF, list(range(6)), 20, "balanced") == {0: 40}
    assert split_bandwidth(REF, list(range(6)), 60, "balanced") == {0: 100}
    two = [0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 13, 14]
    assert split_bandwidth(REF, two, 40, "balanced") == {0: 40, 1: 40}
    assert split_bandwidth(REF, two, 40, "proportional") == {0: 60, 1: 20}
    for pct in A.BW_PERCENTS:
        for split in A.SPLITS:
            for v in split_bandwidth(REF, two, pct, split).values():
                assert v % 10 == 0 and 10 <= v <= 100


def test_amd_mba_units(fake_sysroot, which_all) -> None:
    node = discover(fake_sysroot(vendor="AuthenticAMD", cbm_mask="ffff"), which=which_all)
    assert mba_hardware_value(node, 0, 50) is None, "unknown domain bandwidth: cannot convert"
    numa = [d.model_copy(update={"memory_bandwidth_gbs": 100.0}) for d in node.numa]
    node = node.model_copy(update={"numa": numa})
    assert mba_hardware_value(node, 0, 50) == 400  # 50 GB/s in 1/8 GB/s units
    assert mba_hardware_value(node, 0, 100) == 800
    assert mba_hardware_value(REF, 0, 60) == 60  # Intel: percent as is
