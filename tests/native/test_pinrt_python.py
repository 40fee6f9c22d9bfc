"""A Python thread pool under the runtime: same output and exit status,
worker threads re-pinned inside the given CPUs; fork works."""
import os
import sys
import textwrap

import pytest

from pinrt_helpers import (allowed_cpus, clean_env, have, numactl_cmd, pinrt_lines, require_build, run_sampled,
                           runtime_env)

POOL = textwrap.dedent("""
    import concurrent.futures, sys
    def work(i):
        x = 0
        for k in range(400000):
            x = (x * 31 + k + i) % 1000003
        return x
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as ex:
        res = list(ex.map(work, range(16)))
    print("results", res)
    sys.exit(3)
""")

FORK = textwrap.dedent("""
    import os, threading, sys
    def spin(n):
        x = 0
        for k in range(n):
            x += k
        return x
    ts = [threading.Thread(target=spin, args=(2000000,)) for _ in range(2)]
    for t in ts: t.start()
    pid = os.fork()
    if pid == 0:
        out = []
        cs = [threading.Thread(target=lambda: out.append(spin(100000))) for _ in range(2)]
        for c in cs: c.start()
        for c in cs: c.join()
        os._exit(0 if out == [spin(100000)] * 2 else 1)
    _, st = os.waitpid(pid, 0)
    for t in ts: t.join()
    print("child", os.waitstatus_to_exitcode(st))
""")


@pytest.fixture(scope="module")
def baseline():
    require_build()
    r = run_sampled([sys.executable, "-c", POOL], clean_env())
    assert r.rc == 3 and r.out.startswith("results")
    return r


def test_pool_output_and_status_unchanged_repinned(baseline):
    allowed = allowed_cpus()
    r = run_sampled([sys.executable, "-c", POOL], runtime_env(period=0.05))
    assert r.rc == baseline.rc == 3
    assert r.out == baseline.out
    assert pinrt_lines(r.err) == [l for l in r.err.splitlines() if "summary" in l]
    assert all(c <= allowed for _, c in r.masks(include_manager=True))
    if len(allowed) > 1:
        assert r.repinned(allowed)


@pytest.mark.skipif(not have("numactl"), reason="numactl not installed")
def test_pool_numactl_one_cpu(baseline):
    cpu = max(allowed_cpus())
    comm = os.path.basename(sys.executable)
    r = run_sampled(numactl_cmd(cpu, [sys.executable, "-c", POOL]), runtime_env(period=0.05), comm=comm)
    assert r.rc == 3 and r.out == baseline.out
    masks = list(r.masks(include_manager=True))
    assert masks and all(c == frozenset({cpu}) for _, c in masks)


def test_fork_with_threads_under_runtime():
    require_build()
    base = run_sampled([sys.executable, "-c", FORK], clean_env())
    r = run_sampled([sys.executable, "-c", FORK], runtime_env(period=0.02))
    assert base.rc == r.rc == 0
    assert r.out == base.out == "child 0\n"
