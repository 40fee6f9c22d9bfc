"""Node discovery on this machine and on fake trees of shapes this machine is not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from env.node.discover import discover, node_id
from env.errors import InputError
from env.sim.nodes import load_node

COSCHED = [sys.executable, "-m", "service.cli"]


def test_this_machine_one_domain_no_rdt_no_counters() -> None:
    spec = discover("/")
    assert len(spec.cpus) == os.cpu_count()
    assert len(spec.numa) == len(list(Path("/sys/devices/system/node").glob("node[0-9]*")))
    caps = spec.capabilities
    # This development machine (docs/batch-runner.md, what this machine enforces): no resctrl, no hardware PMU; each "no" says why.
    if "resctrl" not in Path("/proc/filesystems").read_text():
        assert not caps.l3_cat.available and "resctrl" in (caps.l3_cat.reason or "")
        assert not caps.mba.available and caps.mba.reason
        assert not caps.rdtset.available and caps.rdtset.reason
    if not Path("/sys/bus/event_source/devices/cpu").exists():
        assert not caps.perf_hw_counters.available and "software" in (caps.perf_hw_counters.reason or "")


def test_cli_node_json_on_this_machine() -> None:
    out = subprocess.run([*COSCHED, "node", "--json"], capture_output=True, text=True, check=True)
    doc = json.loads(out.stdout)
    assert doc["name"] == "local"
    assert len(doc["cpus"]) == os.cpu_count()
    assert doc["capabilities"]["numa_binding"]["available"] is True
    for cap in doc["capabilities"].values():
        assert cap["available"] or cap["reason"], "every missing capability carries its reason"


def test_two_socket_intel_with_resctrl(fake_sysroot, which_all) -> None:
    root = fake_sysroot(sockets=2, cores_per_socket=12, l3_ways=11, cbm_mask="7ff", min_cbm_bits=2)
    spec = discover(root, which=which_all)
    assert [d.cpus for d in spec.numa] == [list(range(12)), list(range(12, 24))]
    assert [(d.id, d.ways, d.size_bytes) for d in spec.l3] == [(0, 11, 16896 * 1024), (1, 11, 16896 * 1024)]
    assert spec.cat is not None and spec.cat.cbm_mask == "7ff" and spec.cat.min_cbm_bits == 2 and spec.cat.num_closids == 16
    assert spec.mba is not None and spec.mba.units == "percent" and spec.mba.bandwidth_gran == 10 and spec.mba.min_bandwidth == 10
    caps = spec.capabilities
    assert caps.l3_cat.available and caps.mba.available and caps.rdtset.available and caps.perf_hw_counters.available
    assert spec.resctrl_path == "/sys/fs/resctrl"


def test_cat_ways_come_from_cbm_mask_not_associativity(fake_sysroot, which_all) -> None:
    spec = discover(fake_sysroot(l3_ways=20, cbm_mask="fff"), which=which_all)
    assert all(d.ways == 12 for d in spec.l3)


def test_amd_mba_units(fake_sysroot, which_all) -> None:
    spec = discover(fake_sysroot(vendor="AuthenticAMD", sockets=2, cores_per_socket=8, l3_ways=16, cbm_mask="ffff"), which=which_all)
    assert spec.vendor == "amd"
    assert spec.mba is not None and spec.mba.units == "amd_eighth_gbs" and spec.mba.max_bandwidth == 2048
    assert spec.cat is not None and spec.cat.contiguous is False
    assert "1/8 GB/s" in (spec.capabilities.mba.reason or "")


def test_resctrl_supported_but_not_mounted(fake_sysroot, which_all) -> None:
    root = fake_sysroot()
    (root / "proc/mounts").write_text("sysfs /sys sysfs rw 0 0\n")
    spec = discover(root, which=which_all)
    assert not spec.capabilities.l3_cat.available
    assert "mount -t resctrl" in (spec.capabilities.l3_cat.reason or "")
    assert not spec.capabilities.rdtset.available, "rdtset must never be used without resctrl"


def test_missing_tools_are_reported(fake_sysroot) -> None:
    spec = discover(fake_sysroot(), which=lambda name: None)
    assert not spec.capabilities.numa_binding.available and "numactl" in (spec.capabilities.numa_binding.reason or "")
    assert not spec.capabilities.perf_hw_counters.available and "perf" in (spec.capabilities.perf_hw_counters.reason or "")


def test_node_id_is_shape_not_host(fake_sysroot, which_all) -> None:
    a = discover(fake_sysroot(), which=which_all)
    b = discover(fake_sysroot(), which=which_all)
    c = discover(fake_sysroot(sockets=1), which=which_all)
    assert node_id(a) == node_id(b) != node_id(c)


@pytest.mark.parametrize(
    "breakage, words",
    [
        (lambda r: (r / "sys/devices/system/cpu/online").unlink(), "online"),
        (lambda r: (r / "sys/devices/system/cpu/online").write_text("zero-three\n"), "cpulist"),
        (lambda r: (r / "sys/fs/resctrl/info/L3/min_cbm_bits").write_text("many\n"), "min_cbm_bits"),
        (lambda r: (r / "sys/devices/system/node/node1/cpulist").write_text("0-5\n"), "inconsistent"),
    ],
)
def test_bad_fake_tree_one_clear_error(fake_sysroot, which_all, breakage, words) -> None:
    root = fake_sysroot()
    breakage(root)
    with pytest.raises(InputError, match=words):
        discover(root, which=which_all)


def test_cli_fake_tree_and_bad_tree(fake_sysroot) -> None:
    root = fake_sysroot()
    env = {**os.environ, "COSCHED_SYSROOT": str(root)}
    out = subprocess.run([*COSCHED, "node", "--json"], capture_output=True, text=True, env=env, check=True)
    doc = json.loads(out.stdout)
    assert len(doc["numa"]) == 2 and doc["cat"]["cbm_mask"] == "7ff"
    (root / "sys/devices/system/cpu/online").unlink()
    bad = subprocess.run([*COSCHED, "node"], capture_output=True, text=True, env=env)
    assert bad.returncode == 2
    assert bad.stdout == "" and len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr
    assert "online" in bad.stderr


def test_unknown_node_spec_one_line_exit_2() -> None:
    bad = subprocess.run([*COSCHED, "node", "--node", "sim:no-such-node"], capture_output=True, text=True)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "sim:reference" in bad.stderr


def test_reference_node_spec() -> None:
    spec = load_node("sim:reference")
    assert len(spec.cpus) == 24 and [len(d.cpus) for d in spec.numa] == [12, 12]
    assert spec.total_ways == 22 and spec.cat and spec.cat.cbm_mask == "7ff"
    assert spec.mba and spec.mba.bandwidth_gran == 10
    assert {"cores", "l3", "mba", "memory_bandwidth_gbs"} <= set(spec.notes)


def test_invalid_sim_node_file(tmp_path: Path) -> None:
    p = tmp_path / "broken.json"
    p.write_text('{"name": "sim:broken", "cpus": []}')
    with pytest.raises(InputError, match="broken.json is invalid"):
        load_node(f"sim:{p}")
