"""Node microbenchmarks (env/measure/nodebench.py, `cosched node --bench`): on this machine for real at a small
budget, and on a fake two-domain node through a recording backend (which placements are asked for)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from env.node.discover import discover
from env.errors import InputError
from env.measure.nodebench import load_bench, run_bench, save_bench
from env.measure.probing import LATENCY, PROBE, STREAM, Measurement, Placement
from env.real.probes import ProbeSizes, RealMeasuringBackend

SMALL = ProbeSizes(probe_rounds=2, probe_ws_mb=4, stream_mb=4, stream_reps=1, latency_mb=4, latency_loads=50_000)


class Recording:
    """A stand-in backend for a node shape this machine is not: it records the placements asked for and
    answers fixed figures (remote memory slower), so the test checks what the bench asks, not hardware."""

    simulated = True

    def __init__(self, node) -> None:  # noqa: ANN001
        self.node, self.asked = node, []

    def shape(self):  # noqa: ANN201
        return self.node

    def jobs(self) -> list[str]:
        return []

    def measure(self, group, *, seed=None) -> Measurement:  # noqa: ANN001
        (p,) = group
        self.asked.append(p)
        remote = p.memory_domain is not None and p.memory_domain != self.node.numa_of(p.cpus[0])
        if p.job == STREAM:
            return Measurement(times_s=(0.1,), node_seconds=0.1, metric=(50.0 if remote else 100.0,))
        if p.job == LATENCY:
            return Measurement(times_s=(0.1,), node_seconds=0.1, metric=(140.0 if remote else 90.0,))
        slow = 1.1 if (p.l3_ways is not None and p.l3_ways < 11) or (p.mba_percent is not None and p.mba_percent < 100) else 1.0
        return Measurement(times_s=(0.5 * slow,), node_seconds=0.5 * slow)


def test_two_domains_local_and_remote_and_one_step_of_cat_and_mba(fake_sysroot, which_all) -> None:
    node = discover(fake_sysroot(cores_per_socket=2), which=which_all)
    rec = Recording(node)
    bench = run_bench(rec, "fake", repeats=2)
    kinds = {(d.cpu_domain, d.memory_domain): d for d in bench.domains}
    assert set(kinds) == {(0, 0), (0, 1), (1, 0), (1, 1)}
    assert kinds[(0, 1)].kind == "remote" and kinds[(0, 1)].stream_gbs.median == 50.0 and kinds[(1, 1)].latency_ns.median == 90.0
    streams = [p for p in rec.asked if p.job == STREAM]
    assert Placement(STREAM, (0, 1), memory="bind", memory_domain=1) in streams and Placement(STREAM, (2, 3), memory="bind", memory_domain=0) in streams
    assert bench.cat.available and bench.cat.step == "11 -> 10 ways" and bench.cat.slowdown_pct == pytest.approx(10.0)
    assert bench.mba.available and bench.mba.step == "100 -> 90 %" and bench.mba.slowdown_pct == pytest.approx(10.0)
    assert [p.l3_ways for p in rec.asked if p.job == PROBE and p.l3_ways] == [11, 11, 10, 10]
    assert bench.simulated and "between all 2 domains" in bench.remote
    assert bench.probe_alone_s.median == 0.5 and len(bench.runs) == 2 and bench.runs[0].domains[1].bandwidth_gbs == 50.0
    assert bench.node_seconds == pytest.approx(2 * (8 * 0.1 + 0.5) + 4 * 0.5 + 4 * 0.55)


def test_this_machine_for_real(tmp_path: Path) -> None:
    node = discover()
    bench = run_bench(RealMeasuringBackend(node, sizes=SMALL, work_dir=tmp_path), "here", repeats=2)
    assert not bench.simulated and len(bench.domains) == len(node.numa) ** 2
    d = bench.domains[0]
    assert d.stream_gbs.n == 2 and len(bench.runs) == 2 and d.stream_gbs.min <= d.stream_gbs.median <= d.stream_gbs.max and d.latency_ns.median > 0
    if len(node.numa) == 1:
        assert "one NUMA domain" in bench.remote
    if not node.capabilities.l3_cat.available:
        assert not bench.cat.available and bench.cat.reason == node.capabilities.l3_cat.reason
    assert bench.l3[0].size_bytes == node.l3[0].size_bytes
    path = save_bench(bench, tmp_path)
    assert load_bench(tmp_path, "here") == bench and load_bench(tmp_path, "other") is None
    path.write_text("{not json")
    with pytest.raises(InputError, match="not a node benchmark document"):
        load_bench(tmp_path, "here")


def test_cli_bench_quick_json(tmp_path: Path) -> None:
    env = {**os.environ, "COSCHED_HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "service.cli", "node", "--bench", "--quick", "--repeats", "1", "--json"], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["domains"][0]["stream_gbs"]["n"] == 1 and "bench:" in out.stderr  # progress on stderr
    assert list((tmp_path / "node-bench").glob("*.json"))
    bad = subprocess.run([sys.executable, "-m", "service.cli", "node", "--bench", "--repeats", "0"], capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "--repeats" in bad.stderr
