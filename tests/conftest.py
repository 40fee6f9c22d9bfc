"""Shared fixtures. ``fake_sysroot`` builds an explicit, clearly named substitute of /sys and /proc for
node shapes this machine is not (two sockets, resctrl, AMD): discovery reads everything below it."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from env.node.cpulist import format_cpulist

from model_support import write_tiny_set_model


def write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def build_fake_sysroot(
    root: Path,
    *,
    vendor: str = "GenuineIntel",
    sockets: int = 2,
    cores_per_socket: int = 12,
    l3_ways: int = 11,
    l3_size: str = "16896K",
    resctrl: bool = True,
    cbm_mask: str = "7ff",
    min_cbm_bits: int = 1,
    mba: bool = True,
    pmu: bool = True,
) -> Path:
    ncpu = sockets * cores_per_socket
    write(root, "sys/devices/system/cpu/online", f"0-{ncpu - 1}\n")
    flags = "fpu sse2 avx2" + (" cat_l3 rdt_a" if resctrl else "") + (" mba" if mba else "")
    cpuinfo = "".join(
        f"processor\t: {c}\nvendor_id\t: {vendor}\nmodel name\t: Fake {vendor} CPU\nflags\t\t: {flags}\n\n" for c in range(ncpu)
    )
    write(root, "proc/cpuinfo", cpuinfo)
    for s in range(sockets):
        cpus = list(range(s * cores_per_socket, (s + 1) * cores_per_socket))
        write(root, f"sys/devices/system/node/node{s}/cpulist", format_cpulist(cpus) + "\n")
        write(root, f"sys/devices/system/node/node{s}/meminfo", f"Node {s} MemTotal:       98304000 kB\n")
        for c in cpus:
            base = f"sys/devices/system/cpu/cpu{c}/cache"
            write(root, f"{base}/index0/level", "1\n")
            write(root, f"{base}/index3/level", "3\n")
            write(root, f"{base}/index3/id", f"{s}\n")
            write(root, f"{base}/index3/shared_cpu_list", format_cpulist(cpus) + "\n")
            write(root, f"{base}/index3/size", l3_size + "\n")
            write(root, f"{base}/index3/ways_of_associativity", f"{l3_ways}\n")
    fs = "nodev\tsysfs\nnodev\tproc\n" + ("nodev\tresctrl\n" if resctrl else "")
    write(root, "proc/filesystems", fs)
    mounts = "sysfs /sys sysfs rw 0 0\n" + ("resctrl /sys/fs/resctrl resctrl rw 0 0\n" if resctrl else "")
    write(root, "proc/mounts", mounts)
    if resctrl:
        write(root, "sys/fs/resctrl/info/L3/cbm_mask", cbm_mask + "\n")
        write(root, "sys/fs/resctrl/info/L3/min_cbm_bits", f"{min_cbm_bits}\n")
        write(root, "sys/fs/resctrl/info/L3/num_closids", "16\n")
        write(root, "sys/fs/resctrl/info/L3/shareable_bits", "0\n")
        if mba:
            amd = vendor == "AuthenticAMD"
            write(root, "sys/fs/resctrl/info/MB/bandwidth_gran", "1\n" if amd else "10\n")
            write(root, "sys/fs/resctrl/info/MB/min_bandwidth", "0\n" if amd else "10\n")
            write(root, "sys/fs/resctrl/info/MB/num_closids", "16\n" if amd else "8\n")
    if pmu:
        (root / "sys/bus/event_source/devices/cpu").mkdir(parents=True, exist_ok=True)
    (root / "sys/bus/event_source/devices/software").mkdir(parents=True, exist_ok=True)
    return root


@pytest.fixture
def fake_sysroot(tmp_path: Path) -> Callable[..., Path]:
    """Factory: fake_sysroot(**shape) -> a fake sysfs/procfs root (see build_fake_sysroot)."""
    counter = iter(range(1000))

    def make(**kw: object) -> Path:
        return build_fake_sysroot(tmp_path / f"fakesys{next(counter)}", **kw)  # type: ignore[arg-type]

    return make


def all_tools(name: str) -> str | None:
    """A ``which`` that finds every tool: discovery of a fake node should not depend on this machine's PATH."""
    return f"/usr/bin/{name}"


@pytest.fixture
def which_all() -> Callable[[str], str | None]:
    return all_tools


@pytest.fixture(scope="session")
def tiny_set_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ``cosched-model/2`` file for sim:reference (``write_tiny_set_model``), one for the session."""
    return write_tiny_set_model(tmp_path_factory.mktemp("set-model") / "set-v2.npz")
