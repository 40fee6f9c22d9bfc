"""Bad configuration: one clear line on stderr, the runtime off, the program
runs to the same output and exit status."""
import os
import sys

import pytest

from pinrt_helpers import (ACO, RUN, SPIN, allowed_cpus, clean_env, have, numactl_cmd, pinrt_lines, require_build,
                           run_sampled, runtime_env)

ACO_CMD = [str(ACO), "-t", "3", "-i", "300", "-n", "60", "-s", "5"]
BAD = [
    {"core_method": "XX"},
    {"domain_method": "GA"},
    {"period": "-1"},
    {"period": "abc"},
    {"topology": "garbage"},
    {"topology": "0:0;0:1"},
    {"cpus": "4000"},
    {"objective": "O3"},
    {"gamma": "-0.5"},
    {"zeta": "1.5"},
]


@pytest.fixture(scope="module")
def baseline():
    require_build()
    r = run_sampled(ACO_CMD, clean_env())
    assert r.rc == 0
    return r


@pytest.mark.parametrize("bad", BAD, ids=lambda b: "-".join(f"{k}={v}" for k, v in b.items()))
def test_bad_config_one_line_same_result(baseline, bad):
    r = run_sampled(ACO_CMD, runtime_env(**bad))
    assert r.rc == baseline.rc
    assert r.out == baseline.out
    lines = pinrt_lines(r.err)
    assert len(lines) == 1, r.err
    var = "PINRT_" + next(iter(bad)).upper()
    assert var in lines[0] and "runtime disabled" in lines[0]
    # nothing was pinned
    allowed = allowed_cpus()
    assert all(c == allowed for _, c in r.masks(include_manager=True))


def test_cpu_outside_allowed_set_one_line():
    require_build()
    cpu = max(allowed_cpus())
    outside = cpu + 1
    r = run_sampled([str(SPIN), "-t", "2", "-w", "3000000", "-x", "5"], runtime_env(cpus=f"{cpu},{outside}"))
    assert r.rc == 5
    lines = pinrt_lines(r.err)
    assert len(lines) == 1 and f"CPU {outside}" in lines[0] and "outside the allowed set" in lines[0]


@pytest.mark.skipif(not have("numactl") or len(os.sched_getaffinity(0)) < 2, reason="needs numactl and 2 CPUs")
def test_topology_outside_numactl_set_one_line(baseline):
    a, b = sorted(allowed_cpus())[:2]
    r = run_sampled(numactl_cmd(b, ACO_CMD), runtime_env(topology=f"0:{a};1:{b}"), comm="aco")
    assert r.rc == 0 and r.out == baseline.out
    lines = pinrt_lines(r.err)
    assert len(lines) == 1 and "PINRT_TOPOLOGY" in lines[0]


def test_bad_config_through_launcher_and_shell_reported_once(baseline):
    # sh and the program both load the runtime: still one line in all
    cmd = [str(RUN), "--period", "-1", "--", "sh", "-c", " ".join(ACO_CMD) + "; exit 4"]
    r = run_sampled(cmd, clean_env())
    assert r.rc == 4 and r.out == baseline.out
    assert len(pinrt_lines(r.err)) == 1


def test_exit_status_kept_with_good_config():
    require_build()
    base = run_sampled([str(SPIN), "-t", "3", "-w", "2000000", "-x", "9"], clean_env())
    r = run_sampled([str(SPIN), "-t", "3", "-w", "2000000", "-x", "9"], runtime_env(period=0.02, summary="none"))
    assert base.rc == r.rc == 9 and base.out == r.out and r.err == ""


def test_disabled_runtime_is_silent():
    require_build()
    r = run_sampled([sys.executable, "-c", "print('hi')"], runtime_env(enable=0, period=-5))
    assert r.rc == 0 and r.out == "hi\n" and r.err == ""
