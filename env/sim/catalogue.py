"""The simulated node's job catalogue: the co-scheduler paper's 19 programs, each a ``JobParams`` with reasons.

The numbers are a documented *model* of each program's character (class-B-like inputs on the paper's node),
chosen from what the suites' own papers and common characterisations say about them, not measured here:

* PARSEC 3 / SPLASH-2x (Bienia et al., PACT 2008; Woo et al., ISCA 1995): barnes, cholesky, fft, fmm, lu_cb,
  lu_ncb, ocean_cp, ocean_ncp, raytrace, water_nsquared, water_spatial.
* NAS Parallel Benchmarks (Bailey et al., 1991), OpenMP: BT, CG, DC, EP, FT, IS, MG, SP.

Columns (see ``env.sim.model.JobParams``): single-core compute seconds, Amdahl parallel fraction,
inter-socket communication (compute slowdown at an even split; link GB), irregular share of accesses,
master-initialised share of the data, streamed GB, cache-reuse GB (the traffic its L3 can save), GB/s per core;
its miss-ratio curve over L3 capacity (two working sets) is in ``CACHE_CURVES``.
Profile-only columns: footprint (GB), IPC when not stalled, branch / L1-I misses per kilo-instruction,
context switches per CPU-second.

``solo_s`` and ``scale_factor`` are never typed in: they are what the model gives for a solo run on the whole
node and on one core (``catalogue(node)`` computes them), so the catalogue and the model cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from env.node.spec import NodeSpec
from env.sim.model import JobParams, solo_time
from env.sim.params import DEFAULT_PARAMS, SimParams
from env.sim.synthetic import WithGenerated, is_synthetic, synthetic_entry

#: The paper's training programs (Table IV without the starred ones).
TRAIN_JOBS: tuple[str, ...] = (
    "fft", "fmm", "lu_cb", "lu_ncb", "ocean_cp", "ocean_ncp", "water_spatial", "CG", "EP", "FT", "MG", "SP",
)
#: Held out in the paper to test generalisation to unseen programs.
HELD_OUT_JOBS: tuple[str, ...] = ("barnes", "cholesky", "raytrace", "water_nsquared", "BT", "DC", "IS")


@dataclass(frozen=True)
class CatalogueEntry:
    params: JobParams
    suite: str
    character: str  # one line: what kind of job it is
    why: str  # the reasons for its numbers
    footprint_gb: float
    ipc: float
    branch_mpki: float
    l1i_mpki: float
    cs_per_cpu_s: float


def _e(name, suite, character, why, work, p, comm, comm_gb, irr, init, stream, reuse, bwc, foot, ipc, br, l1i, cs):
    ws1, ws2, share2 = CACHE_CURVES[name]
    return CatalogueEntry(
        JobParams(name, work, p, comm, comm_gb, irr, init, stream, reuse, ws1, ws2, share2, bwc),
        suite, character, why, foot, ipc, br, l1i, cs,
    )


#: Each program's miss-ratio curve over L3 capacity: (first working set MB, second working set MB, share of its
#: reuse traffic in the second). Sizes are for all its threads together on the paper's inputs; sources and
#: estimates in env/sim/README.md ("Cache curves").
CACHE_CURVES: dict[str, tuple[float, float, float]] = {
    "barnes": (1.5, 24.0, 0.4),
    "cholesky": (1.0, 12.0, 0.5),
    "fft": (3.0, 64.0, 0.3),
    "fmm": (2.0, 20.0, 0.8),
    "lu_cb": (0.5, 24.0, 0.6),
    "lu_ncb": (0.5, 24.0, 0.6),
    "ocean_cp": (3.0, 512.0, 0.5),
    "ocean_ncp": (3.0, 512.0, 0.5),
    "raytrace": (6.0, 48.0, 0.5),
    "water_nsquared": (0.5, 4.0, 0.6),
    "water_spatial": (1.0, 20.0, 0.85),
    "BT": (2.0, 32.0, 0.5),
    "CG": (2.4, 176.0, 0.3),
    "DC": (4.0, 64.0, 0.5),
    "EP": (0.1, 0.5, 0.5),
    "FT": (6.0, 48.0, 0.5),
    "IS": (8.0, 128.0, 0.2),
    "MG": (2.0, 40.0, 0.5),
    "SP": (2.0, 32.0, 0.5),
}

# name, suite, character, reasons,
#   work_s, parallel, comm, comm_gb, irregular, init_serial, stream_gb, reuse_gb, bw_core (cache curve: CACHE_CURVES),
#   footprint_gb, ipc, branch_mpki, l1i_mpki, cs_per_cpu_s
ENTRIES: tuple[CatalogueEntry, ...] = (
    _e("barnes", "parsec", "compute-bound, irregular tree walks, cache-friendly",
       "Barnes-Hut N-body: octree traversals are pointer chasing (irregular 0.5) but the tree fits in a few MB "
       "(reuse over 1.5 MB and 24 MB working sets: the tree's top, a thread's traversal set); most time is "
       "force computation (compute-bound, scales well, p 0.97); the tree is "
       "built partly by the master (init 0.2).",
       1400, 0.97, 0.10, 60, 0.5, 0.2, 100, 800, 5, 1.2, 1.6, 6.0, 1.0, 40),
    _e("cholesky", "parsec", "limited parallelism, irregular sparse factorisation",
       "Sparse supernodal Cholesky: the elimination tree limits parallelism (p 0.80), accesses follow the "
       "sparsity pattern (irregular 0.5) with moderate reuse; the matrix is read in by the master (init 0.3).",
       500, 0.80, 0.15, 40, 0.5, 0.3, 300, 900, 6, 1.5, 1.3, 5.0, 1.5, 60),
    _e("fft", "parsec", "all-to-all transposes: heavy inter-socket traffic, bandwidth-hungry",
       "six-step radix-sqrt(n) FFT: every transpose is an all-to-all exchange (comm 0.30, 800 GB over the "
       "link at an even split), streaming the data set several times (4000 GB) with some blocking reuse.",
       350, 0.95, 0.30, 800, 0.4, 0.05, 4000, 1000, 10, 6.0, 1.1, 1.5, 0.5, 30),
    _e("fmm", "parsec", "compute-bound, good scaling, L3-sensitive (cell expansions)",
       "fast multipole method: dense per-cell interaction lists, compute-bound (p 0.985), little streamed data, "
       "but the cells' expansions its threads reuse (6000 GB of reuse, 80 % of it over a ~20 MB working set) "
       "only fit when it keeps most of the L3: a streaming co-runner in shared ways makes it memory-bound.",
       750, 0.985, 0.05, 20, 0.3, 0.05, 60, 6000, 6, 0.8, 1.9, 3.0, 1.0, 30),
    _e("lu_cb", "parsec", "blocked dense LU, contiguous blocks: cache-friendly, compute-bound",
       "contiguous blocks make each block's data local and cache-resident (irregular 0.05, reuse 1500 GB "
       "saved by ~5 MB of cache); the diagonal-block critical path limits scaling (p 0.93).",
       900, 0.93, 0.05, 30, 0.05, 0.05, 200, 1500, 9, 0.5, 2.2, 1.0, 0.3, 30),
    _e("lu_ncb", "parsec", "blocked dense LU, non-contiguous blocks: cache-sensitive",
       "the same factorisation with blocks strided through the matrix: conflict and capacity misses make it "
       "much more cache-sensitive (reuse 3500 GB, 60 % of it over the ~24 MB of block rows and columns in use) "
       "and more bandwidth-hungry than lu_cb.",
       900, 0.92, 0.08, 50, 0.1, 0.05, 1500, 3500, 9, 0.5, 1.8, 1.0, 0.3, 30),
    _e("ocean_cp", "parsec", "regular stencil, bandwidth-hungry and cache-sensitive",
       "red-black Gauss-Seidel multigrid on contiguous partitions: regular (irregular 0.05), streams its "
       "grids (7000 GB) and reuses neighbouring rows in cache (4000 GB: half over ~3 MB of rows, half over "
       "whole grids no L3 holds); parallel init (init 0.02).",
       450, 0.96, 0.05, 100, 0.05, 0.02, 7000, 4000, 12, 3.5, 1.2, 1.0, 0.3, 30),
    _e("ocean_ncp", "parsec", "stencil on non-contiguous partitions: bandwidth-hungry, more remote traffic",
       "the same solver with row-major, non-contiguous partitions: more false sharing and remote lines "
       "(irregular 0.3, comm 0.10, 300 GB over the link) and more streamed traffic (8000 GB) than ocean_cp.",
       450, 0.95, 0.10, 300, 0.3, 0.05, 8000, 3000, 10, 3.5, 1.0, 1.2, 0.3, 30),
    _e("raytrace", "parsec", "compute-bound, read-only shared scene, irregular reads",
       "ray tracing a shared scene: irregular reads (0.6) of a read-only BVH that caches well (6 MB and 48 MB "
       "working sets); the "
       "scene is loaded by the master (init 0.3); compute-bound with dynamic load balancing (p 0.96).",
       1200, 0.96, 0.02, 10, 0.6, 0.3, 150, 700, 5, 1.0, 1.5, 8.0, 2.0, 40),
    _e("water_nsquared", "parsec", "compute-bound O(n^2) molecular dynamics, tiny working set",
       "all-pairs forces over a small molecule set: compute-bound (p 0.97), the data fits in L2/L3 "
       "(0.5 MB and 4 MB working sets), very little memory traffic.",
       1100, 0.97, 0.05, 10, 0.1, 0.1, 20, 60, 6, 0.3, 2.0, 2.5, 0.5, 30),
    _e("water_spatial", "parsec", "compute-bound but cache-sensitive (cell lists)",
       "spatial cells cut the force work but the molecule records of a thread's boxes and their neighbours must "
       "stay in cache: large reuse (12000 GB, 85 % of it over a ~20 MB working set: ~30,000 molecules x 680 B) "
       "so losing the L3 to a streaming co-runner hurts it; otherwise compute-bound (p 0.975).",
       800, 0.975, 0.05, 20, 0.15, 0.1, 150, 12000, 8, 0.4, 1.8, 2.5, 0.5, 30),
    _e("BT", "nas", "compute-intensive block-tridiagonal solver, moderate bandwidth",
       "5x5 block solves are compute-heavy (work 1500 s) with regular sweeps (irregular 0.05) that stream "
       "2500 GB; direction-wise sweeps cross partitions (comm 0.08).",
       1500, 0.97, 0.08, 150, 0.05, 0.02, 2500, 1500, 10, 1.5, 1.9, 0.8, 0.3, 30),
    _e("CG", "nas", "irregular sparse matrix-vector products: latency-bound, heavy inter-socket traffic",
       "conjugate gradient on a random sparse matrix: indirect accesses (irregular 0.75) make it latency-bound "
       "(bw_core 4 GB/s) and send much traffic across the link when split (comm 0.35, 500 GB): compact wins.",
       300, 0.95, 0.35, 500, 0.75, 0.05, 5000, 1500, 4, 1.0, 0.6, 4.0, 0.3, 30),
    _e("DC", "nas", "data cube: poor scaling, irregular, I/O-like page traffic",
       "data-cube aggregation over tuples: hash-like irregular accesses (0.6), much serial work (p 0.70) and "
       "master-built inputs (init 0.4), many page faults and context switches.",
       400, 0.70, 0.20, 200, 0.6, 0.4, 2500, 800, 5, 4.0, 1.0, 9.0, 3.0, 400),
    _e("EP", "nas", "embarrassingly parallel, compute-bound, no memory traffic",
       "independent Gaussian-pair generation: perfectly parallel (p 0.998), registers and L1 only.",
       1150, 0.998, 0.0, 0, 0.0, 0.0, 5, 2, 6, 0.05, 1.6, 2.0, 0.2, 20),
    _e("FT", "nas", "3-D FFT: all-to-all transposes, bandwidth-hungry, cache-sensitive",
       "each 3-D FFT step transposes the whole grid in shared memory (part of it first touched on the other "
       "socket: comm 0.12, 600 GB over the link at an even split) and streams it (6000 GB, prefetchable pencils: "
       "12 GB/s per core); blocking for cache saves some (3000 GB over 6 MB and 48 MB working sets).",
       400, 0.95, 0.12, 600, 0.3, 0.05, 6000, 3000, 12, 5.0, 1.3, 1.0, 0.3, 30),
    _e("IS", "nas", "integer bucket sort: random access and an all-to-all exchange",
       "random scatter of keys (irregular 0.8) and a bucket exchange between threads (comm 0.40, 600 GB): "
       "short, latency-bound, compact wins.",
       120, 0.90, 0.40, 600, 0.8, 0.1, 3000, 500, 5, 1.0, 0.8, 6.0, 0.2, 30),
    _e("MG", "nas", "multigrid: regular streaming, bandwidth-bound",
       "V-cycles stream the grids (14000 GB) with little compute (work 250 s) and regular, prefetchable "
       "accesses (irregular 0.05, bw_core 14 GB/s): bandwidth-bound even on a whole socket, so two sockets' "
       "controllers (distributed) help.",
       250, 0.97, 0.05, 150, 0.05, 0.02, 14000, 3000, 14, 3.5, 1.0, 0.8, 0.2, 30),
    _e("SP", "nas", "scalar pentadiagonal solver: regular, bandwidth-heavy",
       "like BT with scalar systems: less compute per point, more streaming (5000 GB), regular sweeps.",
       1100, 0.96, 0.10, 300, 0.05, 0.02, 5000, 2000, 10, 1.8, 1.5, 0.8, 0.2, 30),
)

class _Entries(WithGenerated):
    """The catalogue by name; a generated job's name (``env.sim.synthetic``) resolves too, on first use."""

    def _make(self, name: str) -> CatalogueEntry:
        return synthetic_entry(name)


BY_NAME: dict[str, CatalogueEntry] = _Entries((e.params.name, e) for e in ENTRIES)
ALL_JOBS: tuple[str, ...] = tuple(e.params.name for e in ENTRIES)


def is_known(name: str) -> bool:
    """A catalogue program or a generated job."""
    return name in BY_NAME or is_synthetic(name)


@dataclass(frozen=True)
class CatalogueJob:
    """A catalogue entry as the model sees it on one node: solo time and scale factor from the model."""

    entry: CatalogueEntry
    solo_s: float
    one_core_s: float
    traffic_gb: float  # memory traffic of the solo run (what LLC-load-misses count)

    @property
    def name(self) -> str:
        return self.entry.params.name

    @property
    def scale_factor(self) -> float:
        return self.one_core_s / self.solo_s

    @property
    def held_out(self) -> bool:
        return self.name in HELD_OUT_JOBS


def _solo_traffic_gb(node: NodeSpec, params: JobParams, sp: SimParams) -> float:
    from env.sim.model import SimJob, _cache_mb, geometry, traffic_gb

    g = geometry(node, sp)
    j = SimJob(g, params, g.cpus, "first-touch")
    return traffic_gb([j], _cache_mb(g, [j]))[0]


def catalogue_job(node: NodeSpec, name: str, sp: SimParams | None = None) -> CatalogueJob:
    from env.sim.world import world_for

    w = world_for(node)
    sp = sp if sp is not None else w.params
    e = w.entries[name]
    return CatalogueJob(
        entry=e,
        solo_s=solo_time(node, e.params, sp=sp),
        one_core_s=solo_time(node, e.params, cpus=[node.cpus[0]], sp=sp),
        traffic_gb=_solo_traffic_gb(node, e.params, sp),
    )


def catalogue(node: NodeSpec, sp: SimParams | None = None) -> dict[str, CatalogueJob]:
    """Every job of ``node``'s world (``env.sim.world``: the paper's catalogue or a node model's jobs), in order."""
    from env.sim.world import world_for

    w = world_for(node)
    return _catalogue(node, sp if sp is not None else w.params, w)


class _Jobs(WithGenerated):
    """Catalogue jobs on one node; a generated job is computed (and kept) on first use. Iterate ``ALL_JOBS``
    to list the catalogue (iterating this lists the catalogue's jobs only, never the generated ones)."""

    def __init__(self, node: NodeSpec, sp: SimParams) -> None:
        from env.sim.world import world_for

        super().__init__((name, catalogue_job(node, name, sp)) for name in world_for(node).all_jobs)
        self._node, self._sp = node, sp

    def _make(self, name: str) -> CatalogueJob:
        return catalogue_job(self._node, name, self._sp)


@lru_cache(maxsize=16)
def _catalogue(node: NodeSpec, sp: SimParams, _world: object) -> dict[str, CatalogueJob]:
    return _Jobs(node, sp)
