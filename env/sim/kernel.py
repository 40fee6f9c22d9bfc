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
import threading
from array import array
from pathlib import Path
from typing import Any, Sequence

LIB = Path(__file__).resolve().parents[2] / "native" / "build" / "libcosched_sim.so"
MAX_DOMAINS, MAX_L3, MAX_JOBS = 16, 64, 8  # native/src/simkernel/simgroup.h

_lib: Any = None
_solve: Any = None
_why = ""
_dll: Any = None  # the library itself (the play-out's functions are declared from it)


def _load() -> Any:
    global _lib, _solve, _why, _dll
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
    _lib, _solve, _dll = fn, sv, lib
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


class _State(ctypes.Structure):
    """``sp_state`` of ``native/src/simkernel/playout.h``."""

    _fields_ = [("cmax", ctypes.c_int), ("window", ctypes.c_int), ("objective", ctypes.c_int),
                ("hold_weight", ctypes.c_double), ("now", ctypes.c_double), ("held", ctypes.c_double),
                ("nrun", ctypes.c_int), ("run_rec", ctypes.POINTER(ctypes.c_int)),
                ("run_left", ctypes.POINTER(ctypes.c_double)), ("run_factor", ctypes.POINTER(ctypes.c_double)),
                ("run_solo", ctypes.POINTER(ctypes.c_double)), ("run_mask", ctypes.POINTER(ctypes.c_uint64)),
                ("nq", ctypes.c_int), ("q_kind", ctypes.POINTER(ctypes.c_int)), ("q_name", ctypes.POINTER(ctypes.c_int)),
                ("kind_solo", ctypes.POINTER(ctypes.c_double)), ("kind_run_solo", ctypes.POINTER(ctypes.c_double)),
                ("nends", ctypes.c_int), ("ends", ctypes.POINTER(ctypes.c_double))]


_MAX_CPUS, _WORDS, _MAX_QUEUE = 256, 4, 4096  # playout.h: SP_MAX_CPUS, SP_MASK_WORDS, SP_MAX_QUEUE
_MAX_RECORDS = 200_000  # a play-out context starts afresh beyond this many job records


_pl: Any = None


def _playout_lib() -> Any:
    """The library with its play-out functions declared, or None."""
    global _pl
    if _pl is None and _load() is not None:
        lib = _dll
        if hasattr(lib, "sp_play_fill"):
            lib.sp_new.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int),
                                   ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int), ctypes.c_int]
            lib.sp_new.restype = ctypes.c_void_p
            lib.sp_delete.argtypes = [ctypes.c_void_p]
            lib.sp_set_py312.argtypes = [ctypes.c_void_p, ctypes.c_int]
            lib.sp_add_record.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_uint64),
                                          ctypes.c_char_p, ctypes.c_int]
            lib.sp_add_record.restype = ctypes.c_int
            lib.sp_play_fill.argtypes = [ctypes.c_void_p, ctypes.POINTER(_State), ctypes.POINTER(ctypes.c_double),
                                         ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_uint64)]
            lib.sp_play_fill.restype = ctypes.c_int
            _pl = lib
    return _pl


class Playout:
    """``env.planners.continuous.play_out`` with ``Fill`` deciding, in C (``native/src/simkernel/playout.c``): the same
    choices and the same doubles (tests compare the values bit for bit), many times faster. One per node's memo
    (``StreamNode.memo``), so a search's forks share its records and solves. ``play`` returns None where only the
    Python play-out can run (no library, a node or a state over its limits): the caller plays it in Python."""

    def __init__(self, g: Any, node: Any) -> None:
        self.lib = _playout_lib()
        self.node, self.g = node, g
        self.ctx = None
        cpus = [c for d in node.numa for c in d.cpus]
        usable = (self.lib is not None and g.record is not None and set(cpus) == set(node.cpus)
                  and len(cpus) == len(set(cpus)) and all(0 <= c < _MAX_CPUS for c in cpus))
        if usable:
            ids = [d.id for d in node.numa]
            counts = [len(d.cpus) for d in node.numa]
            self.ctx = self.lib.sp_new(g.record, len(g.record) // 8, len(ids), (ctypes.c_int * len(ids))(*ids),
                                       (ctypes.c_int * len(ids))(*counts), (ctypes.c_int * len(cpus))(*cpus),
                                       len(node.cpus))
        if self.ctx:
            import sys

            self.lib.sp_set_py312(self.ctx, int(sys.version_info >= (3, 12)))  # how sum() adds floats there
        self.kinds: dict[tuple, int] = {}  # (id(params), solo_s, name) -> kind
        self.kind_params: list[Any] = []  # a job of each kind, kept alive: their params' ids name kinds
        self.by_job: dict[int, tuple[Any, int, int]] = {}  # id(job) -> (the job, its kind, its program's number)
        self.per_kind: tuple | None = None
        self.lock = threading.Lock()
        self.names: dict[str, int] = {}
        self.running: dict[int, tuple[Any, int, tuple[int, ...]]] = {}  # id(SimJob) -> (it, its record, CPU mask)
        self.records = 0

    def __del__(self) -> None:
        if getattr(self, "ctx", None):
            self.lib.sp_delete(self.ctx)
            self.ctx = None

    def _kind(self, job: Any) -> tuple[int, int]:
        """The job's kind (its params, time alone and program: what a play-out starts) and its program's number."""
        hit = self.by_job.get(id(job))
        if hit is None:
            if len(self.by_job) > _MAX_RECORDS:
                self.by_job.clear()  # a cache: the kinds stay
            key = (id(job.params), job.solo_s, job.name)
            k = self.kinds.get(key)
            if k is None:
                k = self.kinds[key] = len(self.kind_params)
                self.kind_params.append(job)
                self.names.setdefault(job.name, len(self.names))
            hit = self.by_job[id(job)] = (job, k, self.names[job.name])  # the job kept alive: its id names it
        return hit[1], hit[2]

    def _record(self, kind: int, mask: Sequence[int], rec: bytes) -> int:
        self.records += 1
        m = (ctypes.c_uint64 * _WORDS)(*mask)
        return self.lib.sp_add_record(self.ctx, kind, m, rec, len(rec) // 8)

    def _running(self, r: Any) -> tuple[int, tuple[int, ...]]:
        """A running job's record (its own SimJob's) and its CPUs as mask words."""
        hit = self.running.get(id(r.sim))
        if hit is None:
            words = [0] * _WORDS
            for c in r.alloc.cpus:
                words[c // 64] |= 1 << (c % 64)
            rec = job_record(r.sim)
            self.records += 1
            hit = self.running[id(r.sim)] = (r.sim, self.lib.sp_add_record(
                self.ctx, -1, (ctypes.c_uint64 * _WORDS)(*words), rec, len(rec) // 8), tuple(words))
        return hit[1], hit[2]

    def _per_kind(self, solo: dict[str, float]) -> tuple[Any, Any]:
        """The kinds' own times alone and their programs' (``solo``, the base's), as C arrays, kept until a kind is
        added or another ``solo`` is given."""
        key = (id(solo), len(self.kind_params))
        if self.per_kind is None or self.per_kind[0] != key:
            n = max(1, len(self.kind_params))
            own = array("d", [j.solo_s for j in self.kind_params] or [0.0])
            prog = array("d", [solo[j.name] for j in self.kind_params] or [0.0])
            self.per_kind = (key, solo, own, prog, (ctypes.c_double * n).from_buffer(own),
                             (ctypes.c_double * n).from_buffer(prog))
        return self.per_kind[4], self.per_kind[5]

    def play(self, sim: Any, queue: Sequence[Any], cmax: int, window: int, solo: dict[str, float], objective: str,
             hold_weight: float, ends: Sequence[float], held: float) -> float | None:
        """The play-out's value (``play_out``'s), or None where Python must play it."""
        with self.lock:  # one thread at a time in a context (ctypes lets others run during its calls)
            return self._play(sim, queue, cmax, window, solo, objective, hold_weight, ends, held)

    def _play(self, sim: Any, queue: Sequence[Any], cmax: int, window: int, solo: dict[str, float], objective: str,
              hold_weight: float, ends: Sequence[float], held: float) -> float | None:
        if not self.ctx or len(queue) > _MAX_QUEUE or not 1 <= cmax <= MAX_JOBS:
            return None
        if self.records > _MAX_RECORDS:  # start afresh: the records met long ago are rarely met again
            lock = self.lock
            self.lib.sp_delete(self.ctx)
            self.__init__(self.g, self.node)  # type: ignore[misc]
            self.lock = lock  # held by this call
            if not self.ctx:
                return None
        running = list(sim.running.values())
        try:
            run_solo = array("d", [solo[r.name] for r in running] or [0.0])
            queued = [self._kind(j) for j in queue]
            kind_solo, kind_run_solo = self._per_kind(solo)
        except KeyError:
            return None  # the Python play-out says what is missing
        recs, words = array("i", [0]), array("Q", [0] * _WORDS)
        if running:
            held_by = [self._running(r) for r in running]
            recs = array("i", [h[0] for h in held_by])
            words = array("Q", [w for h in held_by for w in h[1]])
        left = array("d", [r.left for r in running] or [0.0])
        factor = array("d", [r.factor for r in running] or [0.0])
        kinds = array("i", [k for k, _ in queued] or [0])
        names = array("i", [n for _, n in queued] or [0])
        done = array("d", list(ends) or [0.0])

        def c(kind: Any, a: array) -> Any:
            return (kind * len(a)).from_buffer(a)

        st = _State(cmax, window, 0 if objective == "makespan" else 1, hold_weight, sim.now, held,
                    len(running), c(ctypes.c_int, recs), c(ctypes.c_double, left), c(ctypes.c_double, factor),
                    c(ctypes.c_double, run_solo), c(ctypes.c_uint64, words), len(queue), c(ctypes.c_int, kinds),
                    c(ctypes.c_int, names), kind_solo, kind_run_solo, len(ends), c(ctypes.c_double, done))
        value, need = ctypes.c_double(), ctypes.c_int()
        need_mask = (ctypes.c_uint64 * _WORDS)()
        for _ in range(10_000):
            rc = self.lib.sp_play_fill(self.ctx, ctypes.byref(st), ctypes.byref(value), ctypes.byref(need), need_mask)
            if rc == 0:
                return value.value
            if rc != 1:
                return None
            job = self.kind_params[need.value]  # a kind of job on CPUs the play-out met for the first time
            cpus = [w * 64 + b for w in range(_WORDS) for b in range(64) if need_mask[w] >> b & 1]
            from env.plan.allocate import plain_allocation

            simjob = sim.sim_job(job.params, plain_allocation(self.node, cpus))
            if self._record(need.value, list(need_mask), job_record(simjob)) < 0:
                return None
        return None


__all__ = ["run_group", "solve", "status", "LIB", "Playout"]
