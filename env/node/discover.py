"""Discover this node: topology from sysfs, capabilities each with the reason when absent.

Everything is read below a root directory (``COSCHED_SYSROOT``, default ``/``) so tests can point it
at a fake tree (a two-socket Intel node with resctrl, an AMD one) and exercise every path here,
although this machine has one NUMA domain and no RDT. Nothing here runs ``pqos`` or ``rdtset``: with
intel-cmt-cat 4.5 and no resctrl they abort with a double free, so their use is decided from resctrl.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path
from typing import Callable

from env.node.cpulist import parse_cpulist, parse_hexmask
from env.errors import InputError
from env.node.spec import Capabilities, Capability, CatInfo, L3Domain, MbaInfo, NodeSpec, NumaDomain

Which = Callable[[str], str | None]

# The unthrottled MBA value on AMD (resctrl's default schemata there reads MB:0=2048).
AMD_MBA_MAX = 2048


def sysroot() -> Path:
    return Path(os.environ.get("COSCHED_SYSROOT", "/"))


def _read(root: Path, rel: str) -> str | None:
    try:
        return (root / rel).read_text().strip()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise InputError(f"cannot read {root / rel}: {exc.strerror}") from exc


def _require(root: Path, rel: str, what: str) -> str:
    text = _read(root, rel)
    if text is None:
        raise InputError(f"{root / rel} is missing: cannot learn {what} (is {root} a sysfs/procfs root?)")
    return text


def _cpulist(root: Path, rel: str, what: str) -> list[int]:
    text = _require(root, rel, what)
    try:
        return parse_cpulist(text)
    except ValueError as exc:
        raise InputError(f"{root / rel}: {exc}") from exc


def _int(root: Path, rel: str) -> int:
    text = _require(root, rel, rel)
    try:
        return int(text)
    except ValueError:
        raise InputError(f"{root / rel}: expected an integer, found {text!r}") from None


def _cpuinfo(root: Path) -> tuple[str, str, set[str]]:
    text = _read(root, "proc/cpuinfo") or ""
    vendor_id = re.search(r"^vendor_id\s*:\s*(.+)$", text, re.M)
    model = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    flags = re.search(r"^flags\s*:\s*(.+)$", text, re.M)
    vendor = {"GenuineIntel": "intel", "AuthenticAMD": "amd"}.get(vendor_id.group(1).strip() if vendor_id else "", "other")
    return vendor, model.group(1).strip() if model else "", set(flags.group(1).split()) if flags else set()


def _numa(root: Path, cpus: list[int]) -> list[NumaDomain]:
    node_dir = root / "sys/devices/system/node"
    nodes = sorted(
        (int(p.name[4:]) for p in node_dir.glob("node[0-9]*") if p.name[4:].isdigit()),
    ) if node_dir.is_dir() else []
    if not nodes:  # a kernel without NUMA support: the whole machine is one domain
        return [NumaDomain(id=0, cpus=cpus)]
    domains = []
    for n in nodes:
        node_cpus = [c for c in _cpulist(root, f"sys/devices/system/node/node{n}/cpulist", f"NUMA node {n}'s CPUs") if c in cpus]
        if not node_cpus:
            continue  # memory-only node (e.g. CXL): no CPUs to schedule on
        meminfo = _read(root, f"sys/devices/system/node/node{n}/meminfo") or ""
        m = re.search(r"MemTotal:\s*(\d+)\s*kB", meminfo)
        domains.append(NumaDomain(id=n, cpus=node_cpus, memory_bytes=int(m.group(1)) * 1024 if m else None))
    return domains


def _size_bytes(text: str | None) -> int | None:
    if not text:
        return None
    m = re.fullmatch(r"(\d+)\s*([KMG]?)", text.strip())
    if not m:
        return None
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)]


def _l3(root: Path, cpus: list[int], cat: CatInfo | None) -> list[L3Domain]:
    caches: dict[int, L3Domain] = {}
    for cpu in cpus:
        base = root / f"sys/devices/system/cpu/cpu{cpu}/cache"
        for index in sorted(base.glob("index[0-9]*")) if base.is_dir() else []:
            rel = str(index.relative_to(root))
            if _read(root, f"{rel}/level") != "3":
                continue
            shared = _cpulist(root, f"{rel}/shared_cpu_list", "the CPUs sharing an L3")
            cid_text = _read(root, f"{rel}/id")
            cid = int(cid_text) if cid_text and cid_text.isdigit() else min(shared)
            ways_text = _read(root, f"{rel}/ways_of_associativity")
            ways = bin(cat.mask_int).count("1") if cat else int(ways_text) if ways_text and ways_text.isdigit() else 1
            if cid not in caches:
                caches[cid] = L3Domain(id=cid, cpus=[c for c in shared if c in cpus], size_bytes=_size_bytes(_read(root, f"{rel}/size")), ways=ways)
    if not caches:  # no L3 reported: one notional domain, so plans still have a shape
        return [L3Domain(id=0, cpus=cpus, size_bytes=None, ways=bin(cat.mask_int).count("1") if cat else 1)]
    return [caches[k] for k in sorted(caches)]


def _resctrl_mount(root: Path) -> str | None:
    mounts = _read(root, "proc/mounts") or ""
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[2] == "resctrl":
            return fields[1]
    return None


def _rdt(root: Path, vendor: str, flags: set[str]) -> tuple[str | None, CatInfo | None, MbaInfo | None, Capability, Capability]:
    """resctrl state -> (mount point, CAT limits, MBA limits, l3_cat, mba)."""
    filesystems = _read(root, "proc/filesystems") or ""
    kernel_has = any(line.split()[-1:] == ["resctrl"] for line in filesystems.splitlines())
    mount = _resctrl_mount(root)
    if mount is None:
        if not kernel_has:
            why = "no resctrl file system in this kernel (CONFIG_X86_CPU_RESCTRL off, /proc/filesystems has no resctrl)"
        else:
            why = "resctrl is supported but not mounted: as root, mount -t resctrl resctrl /sys/fs/resctrl"
        l3_why = why if ({"cat_l3", "rdt_a"} & flags or kernel_has) else f"the CPU has no L3 CAT (no cat_l3 flag); {why}"
        mb_why = why if ("mba" in flags or kernel_has) else f"the CPU has no MBA (no mba flag); {why}"
        return None, None, None, Capability(available=False, reason=l3_why), Capability(available=False, reason=mb_why)
    info = mount.lstrip("/") + "/info"
    cat = mba = None
    if (root / info / "L3").is_dir():
        try:
            cat = CatInfo(
                cbm_mask=f"{parse_hexmask(_require(root, f'{info}/L3/cbm_mask', 'the L3 way mask')):x}",
                min_cbm_bits=_int(root, f"{info}/L3/min_cbm_bits"),
                num_closids=_int(root, f"{info}/L3/num_closids"),
                shareable_bits=f"{parse_hexmask(_read(root, f'{info}/L3/shareable_bits') or '0'):x}",
                contiguous=vendor != "amd",
            )
        except ValueError as exc:
            raise InputError(f"{root / info / 'L3'}: {exc}") from exc
        l3_cap = Capability(available=True, reason=f"resctrl at {mount}: {bin(cat.mask_int).count('1')} ways, {cat.num_closids} classes")
    else:
        l3_cap = Capability(available=False, reason=f"resctrl at {mount} has no info/L3: the CPU does not support L3 CAT")
    if (root / info / "MB").is_dir():
        amd = vendor == "amd"
        mba = MbaInfo(
            units="amd_eighth_gbs" if amd else "percent",
            bandwidth_gran=_int(root, f"{info}/MB/bandwidth_gran"),
            min_bandwidth=_int(root, f"{info}/MB/min_bandwidth"),
            max_bandwidth=AMD_MBA_MAX if amd else 100,
            num_closids=_int(root, f"{info}/MB/num_closids"),
        )
        units = "absolute units of 1/8 GB/s (AMD)" if amd else f"percent in steps of {mba.bandwidth_gran} from {mba.min_bandwidth}"
        mb_cap = Capability(available=True, reason=f"resctrl at {mount}: {units}")
    else:
        mb_cap = Capability(available=False, reason=f"resctrl at {mount} has no info/MB: the CPU does not support MBA")
    return mount, cat, mba, l3_cap, mb_cap


def _hw_pmu(root: Path, which: Which) -> Capability:
    if which("perf") is None:
        return Capability(available=False, reason="perf not found (apt-get install linux-perf)")
    devices = root / "sys/bus/event_source/devices"
    core_pmus = [p for p in ("cpu", "cpu_core", "cpu_atom") if (devices / p).is_dir()]
    if not core_pmus:
        return Capability(
            available=False,
            reason="no hardware PMU exposed (no sys/bus/event_source/devices/cpu; e.g. a VM without a virtual PMU): perf counts software events only",
        )
    return Capability(available=True, reason=f"core PMU: {', '.join(core_pmus)}")


def discover(root: Path | str | None = None, which: Which = shutil.which) -> NodeSpec:
    """This node's spec. Raises InputError naming the file when the tree is unreadable or malformed."""
    root = Path(root) if root is not None else sysroot()
    if not root.is_dir():
        raise InputError(f"system root {root} is not a directory")
    cpus = _cpulist(root, "sys/devices/system/cpu/online", "the online CPUs")
    if not cpus:
        raise InputError(f"{root}/sys/devices/system/cpu/online lists no CPUs")
    vendor, model, flags = _cpuinfo(root)
    mount, cat, mba, l3_cap, mb_cap = _rdt(root, vendor, flags)
    numa = _numa(root, cpus)
    numactl = which("numactl")
    numa_cap = (
        Capability(available=True, reason=f"numactl at {numactl}")
        if numactl
        else Capability(available=False, reason="numactl not found (apt-get install numactl)")
    )
    rdtset = which("rdtset")
    if rdtset is None:
        rdt_cap = Capability(available=False, reason="rdtset not found (apt-get install intel-cmt-cat)")
    elif mount is None or (cat is None and mba is None):
        rdt_cap = Capability(available=False, reason="rdtset needs resctrl with L3 or MB; without it intel-cmt-cat 4.5 aborts, so it is never called")
    else:
        rdt_cap = Capability(available=True, reason=f"rdtset at {rdtset}")
    pmu = _hw_pmu(root, which)
    per_thread = (
        Capability(available=True, reason="per-thread hardware counters through perf_event_open")
        if pmu.available
        else Capability(available=False, reason="no hardware counters: per-thread speed falls back to CPU time (task-clock, schedstat)")
    )
    try:
        return NodeSpec(
            name="local",
            vendor=vendor,  # type: ignore[arg-type]
            model_name=model,
            cpus=cpus,
            numa=numa,
            l3=_l3(root, cpus, cat),
            cat=cat,
            mba=mba,
            capabilities=Capabilities(
                numa_binding=numa_cap, l3_cat=l3_cap, mba=mb_cap, rdtset=rdt_cap, perf_hw_counters=pmu, per_thread_counters=per_thread
            ),
            resctrl_path=mount,
        )
    except ValueError as exc:
        raise InputError(f"the node under {root} is inconsistent: {exc}") from exc


def node_id(spec: NodeSpec) -> str:
    """A stable id of a node's hardware shape: profiles and models carry over between identical nodes."""
    digest = hashlib.sha1(f"{spec.vendor}|{spec.model_name}|{spec.cpus}|{[d.cpus for d in spec.numa]}".encode()).hexdigest()[:8]
    return f"{spec.vendor}-{len(spec.cpus)}c{len(spec.numa)}n-{digest}"


def local_node_id() -> str:
    return node_id(discover())
