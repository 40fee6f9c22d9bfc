"""The perf CSV parser on recorded output (this machine), hand-written full-counter output, and garbage."""

from __future__ import annotations

import pytest

from profiler.errors import PerfOutputError
from profiler.events import HARDWARE_EVENTS, PERF_EVENTS, SOFTWARE_EVENTS
from profiler.perfcsv import parse_perf_csv
from profiler_helpers import fixture_text


def test_recorded_software_only() -> None:
    stat = parse_perf_csv(fixture_text("recorded_kvm_sysbench_cpu_t1.csv"))
    counters = stat.counters(PERF_EVENTS)
    assert list(counters) == list(PERF_EVENTS)
    for event in SOFTWARE_EVENTS:
        assert counters[event] is not None and counters[event] >= 0
    for event in HARDWARE_EVENTS:
        assert counters[event] is None  # missing, never zero
        assert stat.status(event) == "not supported"
    assert counters["duration_time"] == 1070836568.0  # ns
    assert counters["task-clock"] == pytest.approx(1069.55)  # ms
    assert counters["context-switches"] == 7
    assert counters["page-faults"] == 786


def test_recorded_two_threads_whole_process() -> None:
    stat = parse_perf_csv(fixture_text("recorded_kvm_sysbench_cpu_t2.csv"))
    assert stat.value("task-clock") == pytest.approx(2133.01)
    assert stat.threads() == []


def test_recorded_per_thread_is_aggregated() -> None:
    stat = parse_perf_csv(fixture_text("recorded_kvm_sysbench_cpu_t2_per_thread.csv"))
    assert len(stat.threads()) == 3 and all(t.startswith("sysbench-") for t in stat.threads())
    per_thread = [ln.value for ln in stat.lines if ln.event == "task-clock"]
    assert len(per_thread) == 3
    assert stat.value("task-clock") == pytest.approx(sum(v for v in per_thread if v is not None))
    # duration_time is one wall clock seen by every thread: max, not sum
    durations = {ln.value for ln in stat.lines if ln.event == "duration_time"}
    assert stat.value("duration_time") == max(v for v in durations if v is not None)
    assert stat.value("cpu-cycles") is None and stat.status("cpu-cycles") == "not supported"


def test_recorded_decimal_comma_matches_c_locale_structure() -> None:
    stat = parse_perf_csv(fixture_text("recorded_kvm_de_DE_decimal_comma.csv"))
    assert stat.value("task-clock") == pytest.approx(527.09)
    assert stat.value("duration_time") == 533682113.0
    assert stat.value("context-switches") == 18
    assert stat.value("page-faults") == 785
    task = next(ln for ln in stat.lines if ln.event == "task-clock")
    assert task.percent_running == pytest.approx(100.0)
    assert task.runtime_ns == 527093383
    assert all(stat.value(e) is None for e in HARDWARE_EVENTS)


def test_recorded_failing_command_still_has_counters() -> None:
    stat = parse_perf_csv(fixture_text("recorded_kvm_exit7.csv"))
    assert stat.value("task-clock") == pytest.approx(0.75)


def test_handwritten_full_counter_intel() -> None:
    stat = parse_perf_csv(fixture_text("handwritten_intel_full_counters.csv"))
    counters = stat.counters(PERF_EVENTS)
    assert all(counters[e] is not None for e in PERF_EVENTS)
    assert counters["instructions"] == 915617893826
    assert counters["LLC-load-misses"] == 4567890123
    llc = next(ln for ln in stat.lines if ln.event == "LLC-load-misses")
    assert llc.percent_running == pytest.approx(70.0)


def test_handwritten_full_counter_decimal_comma_equals_c_locale() -> None:
    c_locale = parse_perf_csv(fixture_text("handwritten_intel_full_counters.csv")).counters(PERF_EVENTS)
    de = parse_perf_csv(fixture_text("handwritten_intel_full_counters_de_DE.csv"))
    assert de.counters(PERF_EVENTS) == pytest.approx(c_locale)
    cycles = next(ln for ln in de.lines if ln.event == "cpu-cycles")
    assert cycles.percent_running == pytest.approx(80.0)


def test_handwritten_per_thread_partial_not_counted() -> None:
    stat = parse_perf_csv(fixture_text("handwritten_intel_full_counters_per_thread.csv"))
    assert stat.threads() == ["mg.B.x-4242", "mg.B.x-4243"]
    assert stat.value("instructions") == 13_500_000_000
    assert stat.value("duration_time") == 5_000_000_000
    # one thread <not counted>: the value is what was counted, and the event counts as counted
    assert stat.value("iTLB-load-misses") == 100000
    assert stat.status("iTLB-load-misses") == "counted"


def test_not_counted_alone_is_missing() -> None:
    stat = parse_perf_csv("<not counted>,,instructions,0,0.00,,\n12,,page-faults,5,100.00,,\n")
    assert stat.value("instructions") is None
    assert stat.status("instructions") == "not counted"
    assert stat.status("cpu-cycles") == "absent" and stat.value("cpu-cycles") is None


def test_time_units_are_normalised() -> None:
    stat = parse_perf_csv("1.5,sec,duration_time,1,100.00,,\n2000000,ns,task-clock,1,100.00,,\n")
    assert stat.value("duration_time") == pytest.approx(1.5e9)
    assert stat.value("task-clock") == pytest.approx(2.0)


def test_other_separator() -> None:
    stat = parse_perf_csv("116,34;msec;task-clock;116338061;100,00;0,998;CPUs utilized\n", sep=";")
    assert stat.value("task-clock") == pytest.approx(116.34)
    assert stat.lines[0].percent_running == pytest.approx(100.0)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "# started on Fri Nov 20 23:28:10 2026\n\n",
        "hello world\n",
        "event syntax error: '..clock,bogus-event'\n",
        '{"task-clock": 12}\n',
        "12.5\n",
        "abc,msec,task-clock,1,100.00,,\n",
        "12,msec,task clock,1,100.00,,\n",
        "12,m$ec,task-clock,1,100.00,,\n",
        "12,msec,task-clock,notanumber,100.00,,\n",
        "12,msec,task-clock,1,lots,,\n",
        "12,parsec,task-clock,1,100.00,,\n",
        "1216.84,msec,task-clock,1216837959,100.00,0.982,CPUs utilized\ngarbage line here\n",
    ],
)
def test_garbage_is_refused_with_a_clear_error(text: str) -> None:
    with pytest.raises(PerfOutputError) as err:
        parse_perf_csv(text, source="test output")
    message = str(err.value)
    assert "test output" in message
    assert "\n" not in message
