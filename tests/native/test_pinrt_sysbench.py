"""sysbench cpu --threads=4 under the runtime: same work done (events,
settings) and exit status, threads re-pinned inside the given CPUs."""
import re

import pytest

from pinrt_helpers import allowed_cpus, clean_env, have, numactl_cmd, require_build, run_sampled, runtime_env

pytestmark = pytest.mark.skipif(not have("sysbench"), reason="sysbench not installed")

CMD = ["sysbench", "cpu", "--threads=4", "--events=1000", "--time=0", "--cpu-max-prime=10000", "run"]


def stable(out):
    """The parts of sysbench's report that do not depend on timing."""
    keep = []
    for line in out.splitlines():
        line = " ".join(line.split())
        if re.match(r"(Number of threads|Prime numbers limit|total number of events|events \(avg/stddev\))", line):
            keep.append(re.sub(r"\(avg/stddev\): ([\d.]+)/.*", r"(avg): \1", line))
    return keep


@pytest.fixture(scope="module")
def baseline():
    require_build()
    r = run_sampled(CMD, clean_env())
    assert r.rc == 0
    assert any("total number of events: 1000" in l for l in stable(r.out))
    return r


def test_sysbench_repinned_same_work(baseline):
    allowed = allowed_cpus()
    r = run_sampled(CMD, runtime_env(period=0.05))
    assert r.rc == 0
    assert stable(r.out) == stable(baseline.out)
    assert all(c <= allowed for _, c in r.masks(include_manager=True))
    if len(allowed) > 1:
        assert r.repinned(allowed)
    # sysbench's 4 workers (and its main thread) were all seen
    assert max(len(s) for s in r.samples) >= 5


@pytest.mark.skipif(not have("numactl"), reason="numactl not installed")
def test_sysbench_numactl_one_cpu(baseline):
    cpu = max(allowed_cpus())
    r = run_sampled(numactl_cmd(cpu, CMD), runtime_env(period=0.05), comm="sysbench")
    assert r.rc == 0 and stable(r.out) == stable(baseline.out)
    masks = list(r.masks(include_manager=True))
    assert masks and all(c == frozenset({cpu}) for _, c in masks)
