"""The simulated node's group run in C (``native/build/libcosched_sim.so``, source ``native/src/simkernel/simgroup.c``): the
same arithmetic as ``env.sim.model.run_group``, in the same order, so the same doubles (tests compare them bit for
bit); about 10x faster (4 vs 44 us for a group of up to four jobs on sim:reference, measured on this 2-CPU
machine), and group runs are what the planners' searches spent most of their time on.

``env.sim.model.run_group`` calls ``run_group`` here and runs its Python code when this returns None: no library
(``make -C native`` builds it), ``COSCHED_SIM_KERNEL=python`` in the environment, or a node or group over the
kernel's limits (16 NUMA domains, 64 L3 domains, 8 jobs). ``status()`` says which path runs and why.

A job (``SimJob``) and a node (``Geometry``) are packed once into flat records of doubles (layout in
``native/src/simkernel/simgroup.h``) and kept on the object as ``record``.
"""

from __future__ import annotations

import ctypes
import os
from array import array
from pathlib import Path
from typing import Any, Sequence

LIB = Path(__file__).resolve().parents[2] / "native" / "build" / "libcosched_sim.so"
MAX_DOMAINS, MAX_L3, MAX_JOBS = 16, 64, 8  # native/src/simkernel/simgroup.h

_lib: Any = None
_solve: Any = None
_why = ""


def _load() -> Any:
    global _lib, _solve, _why
    if _lib is not None or _why:
        return _lib
    if os.environ.get("COSCHED_SIM_KERNEL", "auto") == "python":
        _why = "COSCHED_SIM_KERNEL=python"
        return None
    try:
        lib = ctypes.CDLL(str(LIB))
    except OSError as e:
        _why = f"no {LIB.name} ({e}); build it with: make -C native"
        return None
    fn = lib.sg_run_group
    fn.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_char_p,
                   ctypes.POINTER(ctypes.c_double)]
    fn.restype = ctypes.c_int
    sv = lib.sg_solve
    sv.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_int,
                   ctypes.POINTER(ctypes.c_double)]
    sv.restype = ctypes.c_int
    _lib, _solve = fn, sv
    return fn


def status() -> str:
    """Which implementation runs the node model's groups, and why."""
    return f"C kernel ({LIB})" if _load() is not None else f"Python ({_why})"


def node_record(g: Any) -> bytes | None:
    """A node geometry's record (``Geometry`` keeps it as ``record``), or None when the kernel cannot take the node."""
    if g.n_numa <= MAX_DOMAINS and g.n_l3 <= MAX_L3 and all(m < 2**53 for m in g.full_mask):
        return array("d", [g.n_numa, g.n_l3, g.link_gbs, g.sp.overlap, g.sp.iterations, *g.bw, *g.way_mb]).tobytes()
    return None


def job_record(j: Any) -> bytes:
    """The job's record (kept on it; a SimJob does not change once made)."""
    rec: bytes | None = j.record
    if rec is None:
        p = j.params
        flat = [0.0, j.tc, j.bmax, j.core_cap, j.ins_stream, j.ins_reuse, p.stream_gb, p.reuse_gb, p.ws_mb, p.ws2_mb,
                p.ws2_share, j.n, len(j.routes), len(j.comm_link), *j.n_l3, *j.masks]
        for route in j.routes:
            flat.extend(route)
        for link in j.comm_link:
            flat.extend(link)
        flat[0] = len(flat)
        rec = j.record = array("d", flat).tobytes()
    return rec


def run_group(g: Any, jobs: Sequence[Any], factors: Sequence[float] | None = None) -> list[float] | None:
    """Each job's end time, or None when the Python model must run it (see the module's docstring)."""
    fn = _lib if _lib is not None else _load()
    if fn is None or not 0 < len(jobs) <= MAX_JOBS:
        return None
    node = g.record
    if node is None:
        return None
    recs = b"".join([job_record(j) for j in jobs])
    k = len(jobs)
    out = (ctypes.c_double * k)()
    fac = None if factors is None else array("d", factors).tobytes()
    if fn(node, len(node) // 8, recs, len(recs) // 8, k, fac, out):
        return None
    return out[:]


def solve(g: Any, jobs: Sequence[Any]) -> list[float] | None:
    """``env.sim.model.solve`` in C (each job's time for its whole work when they run together from now on), or None
    when the Python model must run it (as for ``run_group``). The streams' searches solve once per event."""
    if _lib is None and _load() is None:
        return None
    k = len(jobs)
    node = g.record
    if node is None or not 0 < k <= MAX_JOBS:
        return None
    recs = b"".join([job_record(j) for j in jobs])
    out = (ctypes.c_double * k)()
    if _solve(node, len(node) // 8, recs, len(recs) // 8, k, out):
        return None
    return out[:]


__all__ = ["run_group", "solve", "status", "LIB"]
