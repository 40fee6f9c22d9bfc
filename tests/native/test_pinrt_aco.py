"""The ACO benchmark under the runtime on this machine: same output and exit
status, threads re-pinned, always inside the CPUs the job was given."""
import os

import pytest

from pinrt_helpers import (ACO, RUN, allowed_cpus, clean_env, have, numactl_cmd, pinrt_lines, require_build,
                           run_sampled, runtime_env, tmpfile)

ACO_CMD = [str(ACO), "-t", "4", "-i", "1500", "-n", "100", "-s", "7"]


@pytest.fixture(scope="module")
def baseline():
    require_build()
    r = run_sampled(ACO_CMD, clean_env())
    assert r.rc == 0
    assert "best_tardiness=" in r.out
    return r


def test_result_independent_of_thread_count(baseline):
    r1 = run_sampled([str(ACO), "-t", "1", "-i", "1500", "-n", "100", "-s", "7"], clean_env())
    assert r1.rc == 0 and r1.out == baseline.out


def test_aco_repinned_inside_allowed_set_output_unchanged(baseline):
    allowed = allowed_cpus()
    summary = tmpfile(".txt")
    try:
        r = run_sampled(ACO_CMD, runtime_env(period=0.05, summary=summary, seed=3))
        assert r.rc == baseline.rc
        assert r.out == baseline.out
        assert pinrt_lines(r.err) == []
        assert r.samples, "no samples taken"
        assert all(cpus <= allowed for _, cpus in r.masks(include_manager=True))
        if len(allowed) > 1:
            assert r.repinned(allowed), "no thread was ever pinned"
            # at least one thread moved between CPUs during the run
            assert any(len(m) > 1 for m in r.distinct_masks_per_thread().values())
        text = open(summary).read()
        assert "state=full" in text
        assert "speed_source=cputime" in text or "speed_source=instructions" in text
        epochs = int(text.split("epochs=")[1].split()[0])
        assert epochs >= 5
    finally:
        os.unlink(summary)


@pytest.mark.skipif(not have("numactl"), reason="numactl not installed")
def test_numactl_one_cpu_all_threads_stay_on_it(baseline):
    cpu = max(allowed_cpus())
    r = run_sampled(numactl_cmd(cpu, ACO_CMD), runtime_env(period=0.05), comm="aco")
    assert r.rc == 0 and r.out == baseline.out
    masks = list(r.masks(include_manager=True))
    assert masks and all(cpus == frozenset({cpu}) for _, cpus in masks)


@pytest.mark.skipif(not have("numactl") or len(os.sched_getaffinity(0)) < 2, reason="needs numactl and 2 CPUs")
def test_numactl_two_cpus_pinned_inside(baseline):
    cpus = sorted(allowed_cpus())[:2]
    given = frozenset(cpus)
    r = run_sampled(numactl_cmd(f"{cpus[0]},{cpus[1]}", ACO_CMD), runtime_env(period=0.05), comm="aco")
    assert r.rc == 0 and r.out == baseline.out
    assert all(c <= given for _, c in r.masks(include_manager=True))
    assert r.repinned(given)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs")
def test_forced_topology_exercises_domain_level(baseline):
    a, b = sorted(allowed_cpus())[:2]
    trace = tmpfile(".csv")
    summary = tmpfile(".txt")
    try:
        r = run_sampled(ACO_CMD, runtime_env(period=0.05, topology=f"0:{a};1:{b}", numa_every=1, lambda_a=0.3,
                                             trace=trace, summary=summary))
        assert r.rc == 0 and r.out == baseline.out
        rows = [l.split(",") for l in open(trace).read().splitlines()[1:]]
        assert rows
        domains = {int(row[3]) for row in rows}
        assert {0, 1} <= domains
        # a thread on domain d runs on that domain's CPU only
        dom_cpu = {0: str(a), 1: str(b)}
        assert all(row[4] == dom_cpu[int(row[3])] for row in rows if int(row[3]) >= 0)
        # some thread changed domain during the run
        by_tid = {}
        for row in rows:
            if int(row[3]) >= 0:
                by_tid.setdefault(row[2], set()).add(row[3])
        assert any(len(d) == 2 for d in by_tid.values())
        assert "state=full" in open(summary).read()
    finally:
        os.unlink(trace)
        os.unlink(summary)


def test_launcher_sets_options(baseline):
    summary = tmpfile(".txt")
    trace = tmpfile(".jsonl")
    try:
        r = run_sampled([str(RUN), "--period", "0.05", "--objective", "O1", "--summary", summary, "--trace", trace,
                         "--"] + ACO_CMD, clean_env())
        assert r.rc == 0 and r.out == baseline.out
        assert "epochs=" in open(summary).read()
        first = open(trace).readline()
        assert first.startswith('{"epoch":') and '"cpus":' in first
    finally:
        os.unlink(summary)
        os.unlink(trace)


def test_launcher_unknown_option_is_usage_error():
    require_build()
    r = run_sampled([str(RUN), "--no-such-option", "1", "--", "true"], clean_env())
    assert r.rc == 2 and "unknown option" in r.err
