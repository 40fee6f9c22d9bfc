"""The real MeasuringBackend (env/real/probes.py): the exact argv of bubble/probe/stream/latency placements on
fake two-domain and RDT nodes (never run there), and real measurements on this machine at a small budget."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import env.real.executor as execute
from env.node.discover import discover
from env.errors import InputError, RunError
from env.real.executor import Executor
from env.measure.probing import BUBBLE, LATENCY, PROBE, STREAM, Placement
from env.real.probes import NATIVE_BUILD, ProbeSizes, RealMeasuringBackend
from env.node.resctrl import exec_helper

SMALL = ProbeSizes(probe_rounds=3, probe_ws_mb=8, bubble_max_mb=16, stream_mb=8, stream_reps=2, latency_mb=8, latency_loads=100_000)
B = str(NATIVE_BUILD)
SB = ["sysbench", "cpu", "--threads=1", "--events=200", "--time=0", "run"]


def _argv(backend: RealMeasuringBackend, group: list[Placement]) -> list[list[str]]:
    return [j.launch for j in backend.plan(group).groups[0].jobs]


# -- fake nodes: argv only ---------------------------------------------------------------------------


def test_two_domain_node_binds_local_and_remote(fake_sysroot, which_all) -> None:
    node = discover(fake_sysroot(resctrl=False, mba=False, cores_per_socket=4), which=which_all)
    be = RealMeasuringBackend(node, {"sb": SB}, sizes=SMALL, perf=None)
    local, remote, lat, probe, bubble, job = _argv(be, [
        Placement(STREAM, (0, 1), memory_domain=0),
        Placement(STREAM, (2,), memory_domain=1),
        Placement(LATENCY, (3,), memory="bind", memory_domain=1),
        Placement(PROBE, (4,), memory="interleave"),
        Placement(BUBBLE, (5, 6), level=0.25),
        Placement("sb", (7,)),
    ])
    assert local == ["numactl", "--physcpubind=0-1", "--membind=0", "--", f"{B}/cosched-membench", "stream", "--threads", "2", "--reps", "2", "--mb", "8"]
    assert remote == ["numactl", "--physcpubind=2", "--membind=1", "--", f"{B}/cosched-membench", "stream", "--threads", "1", "--reps", "2", "--mb", "8"]
    assert lat == ["numactl", "--physcpubind=3", "--membind=1", "--", f"{B}/cosched-membench", "latency", "--loads", "100000", "--mb", "8"]
    assert probe == ["numactl", "--physcpubind=4", "--interleave=0-1", "--", f"{B}/cosched-probe", "--rounds", "3", "--ws-mb", "8"]
    assert bubble == ["numactl", "--physcpubind=5-6", "--", f"{B}/cosched-bubble", "--level", "0.25", "--threads", "2", "--max-mb", "16"]
    assert job == ["numactl", "--physcpubind=7", "--", *SB]


def test_two_domain_node_refuses_cache_partitioning_with_the_reason(fake_sysroot, which_all) -> None:
    node = discover(fake_sysroot(resctrl=False, mba=False, cores_per_socket=2), which=which_all)
    be = RealMeasuringBackend(node, sizes=SMALL, perf=None)
    with pytest.raises(InputError, match="cannot partition its L3: .*no resctrl"):
        be.plan([Placement(PROBE, (0,), l3_ways=2)])
    with pytest.raises(InputError, match="cannot cap bandwidth"):
        be.plan([Placement(PROBE, (0,), mba_percent=50)])


def test_rdt_node_puts_each_placement_in_a_resctrl_group(fake_sysroot, which_all, tmp_path: Path, monkeypatch) -> None:
    node = discover(fake_sysroot(cores_per_socket=4), which=which_all)
    fake_resctrl = tmp_path / "resctrl"
    fake_resctrl.mkdir()
    node = node.model_copy(update={"resctrl_path": str(fake_resctrl)})
    be = RealMeasuringBackend(node, sizes=SMALL, perf=None)
    group = [Placement(PROBE, (0,), l3_ways=3), Placement(BUBBLE, (1,), level=1.0, l3_ways=2, mba_percent=40), Placement(STREAM, (4,), memory_domain=1)]
    plan = be.plan(group)
    probe, bubble, stream = (j.launch for j in plan.groups[0].jobs)
    assert probe == ["numactl", "--physcpubind=0", "--", exec_helper(), f"{fake_resctrl}/cosched-g0-p0-probe", "--", f"{B}/cosched-probe", "--rounds", "3", "--ws-mb", "8"]
    assert bubble[:5] == ["numactl", "--physcpubind=1", "--", exec_helper(), f"{fake_resctrl}/cosched-g0-p1-bubble"]
    assert stream[:4] == ["numactl", "--physcpubind=4", "--membind=1", "--"] and stream[4] == exec_helper()
    made: list[tuple[str, str]] = []
    real_create = execute.create_group
    monkeypatch.setattr(execute, "create_group", lambda path, text: (made.append((path, text)), real_create(path, text)))
    groups = Executor(plan, node, tmp_path)._resctrl_groups(0, plan.groups[0].jobs)  # what measure() makes before starting
    assert made == [
        (f"{fake_resctrl}/cosched-g0-p0-probe", "L3:0=7\nMB:0=100\n"),  # three ways, packed from the bottom
        (f"{fake_resctrl}/cosched-g0-p1-bubble", "L3:0=18\nMB:0=40\n"),  # the next two ways, capped at 40 %
        (f"{fake_resctrl}/cosched-g0-p2-stream", "L3:1=7ff\nMB:1=100\n"),  # no ways asked: shares the whole L3
    ]
    assert sorted(p.name for p in fake_resctrl.iterdir()) == ["cosched-g0-p0-probe", "cosched-g0-p1-bubble", "cosched-g0-p2-stream"]
    for g in groups:
        execute.remove_group(g)
    with pytest.raises(InputError, match="l3_ways must be from 1 to 11"):
        be.plan([Placement(PROBE, (0,), l3_ways=12)])


def test_no_partitioning_asked_makes_no_resctrl_group(fake_sysroot, which_all) -> None:
    node = discover(fake_sysroot(cores_per_socket=2), which=which_all)
    plan = RealMeasuringBackend(node, sizes=SMALL, perf=None).plan([Placement(PROBE, (0,)), Placement(BUBBLE, (1,), level=0.5)])
    assert not plan.enforcement.l3 and not plan.enforcement.mem_bw
    assert all(exec_helper() not in j.launch for j in plan.groups[0].jobs)


@pytest.mark.parametrize(
    "group, message",
    [
        ([Placement(PROBE, (99,))], "CPUs \\[99\\], which this node does not have"),
        ([Placement(PROBE, ())], "has no CPUs"),
        ([Placement(BUBBLE, (0,), level=0.5)], "besides the bubble"),
        ([Placement(BUBBLE, (0,)), Placement(PROBE, (1,))], "pressure level in \\[0, 1\\]"),
        ([Placement(PROBE, (0,), level=0.3)], "only the bubble"),
        ([Placement("nope", (0,))], "no profiled job 'nope'.*cosched profile --name nope"),
        ([Placement(LATENCY, (0,), memory="bind")], "needs memory_domain"),
        ([Placement(LATENCY, (0,), memory_domain=7)], "memory domain 7 does not exist"),
        ([], "at least one placement"),
    ],
)
def test_bad_placements_are_one_message(group: list[Placement], message: str) -> None:
    with pytest.raises(InputError, match=message):
        RealMeasuringBackend(discover(), sizes=SMALL).plan(group)


# -- this machine, for real, briefly ---------------------------------------------------------------


@pytest.fixture
def here(tmp_path: Path) -> RealMeasuringBackend:
    # "false" fails after a moment, not at once: perf 6.1 loses the exit status of a workload that ends within its
    # first microseconds (measured here: `perf stat -- false` exits 0 now and then)
    failing = ["sh", "-c", "sleep 0.2; exit 1"]
    return RealMeasuringBackend(discover(), {"sb": SB, "false": failing}, sizes=SMALL, work_dir=tmp_path / "work")


def test_probe_next_to_the_bubble_for_real(here: RealMeasuringBackend) -> None:
    cpus = here.node.cpus
    alone = here.measure([Placement(PROBE, (cpus[0],))])
    assert alone.times_s[0] is not None and alone.times_s[0] > 0 and alone.node_seconds >= alone.times_s[0]
    assert alone.counters[0] is not None and alone.counters[0]["task-clock"] > 0  # software events count here
    both = here.measure([Placement(PROBE, (cpus[0],)), Placement(BUBBLE, (cpus[-1],), level=1.0)])
    assert both.times_s[1] is None and both.counters[1] is None and both.times_s[0] > 0
    assert here.measurements == 2 and here.node_seconds >= alone.node_seconds + both.node_seconds - 1e-9
    assert not any((here.work_dir or Path()).iterdir())  # nothing left behind after a good measurement


def test_profiled_job_and_microbenchmarks_for_real(here: RealMeasuringBackend) -> None:
    cpu = here.node.cpus[0]
    m = here.measure([Placement("sb", (cpu,)), Placement(BUBBLE, (here.node.cpus[-1],), level=0.5)])
    assert m.times_s[0] > 0 and m.counters[0]["duration_time"] is not None
    s = here.measure([Placement(STREAM, (cpu,), memory_domain=0)])
    lat = here.measure([Placement(LATENCY, (cpu,), memory="bind", memory_domain=0)])
    assert s.metric[0] > 0 and lat.metric[0] > 0 and s.metric[0] != lat.metric[0]


def test_a_failing_program_is_one_error_and_its_files_are_kept(here: RealMeasuringBackend) -> None:
    with pytest.raises(RunError, match="false .*failed with exit status 1") as exc:
        here.measure([Placement("false", (here.node.cpus[0],)), Placement(BUBBLE, (here.node.cpus[-1],), level=0.2)])
    kept = [p for p in (here.work_dir or Path()).iterdir()]
    assert len(kept) == 1 and (kept[0] / "journal.jsonl").exists() and str(kept[0]) in str(exc.value)
    shutil.rmtree(kept[0])


def test_this_node_refuses_cache_partitioning_with_its_reason(here: RealMeasuringBackend) -> None:
    if here.node.capabilities.l3_cat.available:
        pytest.skip("this node has L3 CAT: the refusal is tested on the fake node")
    with pytest.raises(InputError, match=f"cannot partition its L3: {here.node.capabilities.l3_cat.reason[:20]}"):
        here.measure([Placement(PROBE, (here.node.cpus[0],), l3_ways=1)])
