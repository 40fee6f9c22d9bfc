"""The contention model of the simulated node (docs/design/coscheduler.md §9). Python is its definition: a group has at most a
handful of jobs and domains, where list arithmetic beats numpy's per-call overhead. A group's run (``run_group``:
``solve``, ``_cache_mb``, ``traffic_gb``) also exists in C (``env.sim.kernel``, ``native/src/simkernel/simgroup.c``), the
same arithmetic in the same order, giving the same doubles about 10x faster (4 vs 44 us a group, measured);
``run_group`` uses it where it is built, and tests compare both bit for bit.

One job's time for its whole work, given what it holds and whom it runs with::

    Tc = work_s * ((1 - p) + p / n) * (1 + comm * x)          compute, Amdahl on n cores; x = how evenly its
                                                              threads are split over domains (0 compact, 1 even)
    C_l = the ways it holds in L3 l x MB per way, a way shared with co-runners (overlapping masks, e.g. no
         partitioning at all) counting only for its share: LRU keeps lines in proportion to how fast each
         sharer inserts them, i.e. its cores there x its miss traffic per compute second (found by a short
         fixed point: a cache-friendly job that hits inserts little and is crowded out by a streaming one)
    V  = stream_gb + reuse_gb * M(C)                          memory traffic (GB): its miss-ratio curve over L3 MB,
    M(C) = (1 - ws2_share) * m(C / ws_mb) + ws2_share * m(C / ws2_mb),  m(r) = 1 / (1 + r^STEEP): two working
         sets (and the streamed data, which no cache holds); misses fall in a step as each one comes to fit.
         A job over several L3s holds there the share of its data its threads there touch: M sums
         f_l * M(C_l / f_l) over its L3 domains l (f_l: its share of threads in l, C_l: the MB it holds in l)
    B  = its own bandwidth ceiling: sum over its cores of bw_core, cut by remote latency for the share of its
         accesses that are remote (latency-bound = irregular jobs suffer more), and by its MBA cap in each domain
    Tm = V / B * sum over routes (core domain s -> memory domain m) of share / kappa(route)
    T  = max(Tc, Tm) + (1 - overlap) * min(Tc, Tm)

Routes and memory policy: a thread in domain s sends a regular access to its own partition (first-touch and
local-alloc: where the toucher is, except the ``init_serial`` share first-touched by the master thread;
interleave: evenly over the job's domains; ``bind:I``: all of it in the domain of index I, as ``numactl
--membind`` does, which the calibration's remote runs use) and an irregular access anywhere in the job's data. kappa of a
route is the share of demand its memory controller (and, for a remote route, the inter-socket link
direction) can serve: the loads are the jobs' drawn bandwidths V / T, found by a short fixed-point
iteration. Communication adds ``comm_gb * x`` of traffic on the link.

A group is event-driven: all jobs start at 0, each progresses at 1 / T, and when one ends the others' T are
recomputed (freed ways and bandwidth go to those still running). Optional noise multiplies each job's T by
a seeded log-normal factor. Without noise the model is a pure function of its inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Annotated

from pydantic import ConfigDict, Field

from env.node.spec import NodeSpec
from env.sim import kernel
from env.sim.params import DEFAULT_PARAMS, SimParams


@dataclass(frozen=True)
class JobParams:
    """One program's character. Units: seconds, GB, MB, GB/s. See ``env/sim/catalogue.py`` for values and reasons.
    Also a job's ``params`` in a node-model file (``env.sim.nodemodel``: validated by these bounds, every field
    required)."""

    __pydantic_config__ = ConfigDict(extra="forbid", revalidate_instances="always")

    name: Annotated[str, Field(min_length=1, max_length=128)]
    work_s: Annotated[float, Field(gt=0)]  # single-core compute seconds (no memory stalls)
    parallel: Annotated[float, Field(ge=0, le=1)]  # Amdahl parallel fraction p
    comm: Annotated[float, Field(ge=0)]  # compute slowdown when its threads are split evenly over the domains
    comm_gb: Annotated[float, Field(ge=0)]  # inter-domain coherence / communication traffic (GB) at an even split
    # share of memory accesses that go anywhere in its data (not to its own partition)
    irregular: Annotated[float, Field(ge=0, le=1)]
    init_serial: Annotated[float, Field(ge=0, le=1)]  # share of its data first-touched by the master thread
    stream_gb: Annotated[float, Field(ge=0)]  # memory traffic no cache removes
    reuse_gb: Annotated[float, Field(ge=0)]  # extra traffic when it has no L3 at all (both working sets miss)
    # its first (smaller) working set, MB: half its misses go once the L3 holds this much
    ws_mb: Annotated[float, Field(gt=0)]
    ws2_mb: Annotated[float, Field(gt=0)]  # its second (larger) working set, MB
    ws2_share: Annotated[float, Field(ge=0, le=1)]  # the share of reuse_gb that belongs to the second working set
    bw_core: Annotated[float, Field(gt=0)]  # GB/s one of its cores can pull (its memory-level parallelism)

    def miss(self, mb: float) -> float:
        """The miss ratio of its reuse traffic (0..1) with ``mb`` of L3 for all its data: monotone, falling."""
        return miss_ratio(mb, self.ws_mb, self.ws2_mb, self.ws2_share)

    @property
    def latency_sensitivity(self) -> float:
        """How much of a remote access's extra latency shows: prefetched regular streams hide most of it."""
        return 0.25 + 0.75 * self.irregular

    def scaled(self, k: float) -> "JobParams":
        """The same program doing ``k`` times its work: its compute and every traffic scale, its working sets and
        character do not. Its time on any allocation, beside any co-runners, is ``k`` times as long (every rate the
        model solves for is traffic over time, which stays)."""
        return replace(self, work_s=self.work_s * k, comm_gb=self.comm_gb * k, stream_gb=self.stream_gb * k,
                       reuse_gb=self.reuse_gb * k)


#: How sharply a working set's misses fall as the cache comes to hold it: m(r) = 1 / (1 + r^STEEP) is 0.5 at
#: r = 1 (cache = working set), 0.89 at r = 1/2 and 0.11 at r = 2: a step over about a factor 4 of capacity, as
#: measured miss-ratio curves of these programs show at their working-set "knees" (env/sim/README.md).
STEEP = 3.0


def miss_ratio(mb: float, ws1: float, ws2: float, share2: float) -> float:
    """Two working sets' misses with ``mb`` MB of cache (see the module docstring)."""
    if mb <= 0.0:
        return 1.0
    r1 = mb / ws1
    r2 = mb / ws2
    return (1.0 - share2) / (1.0 + r1 * r1 * r1) + share2 / (1.0 + r2 * r2 * r2)


class Geometry:
    """A node spec reduced to index arrays the model loops over."""

    def __init__(self, node: NodeSpec, sp: SimParams = DEFAULT_PARAMS) -> None:
        self.name = node.name
        self.numa_ids = [d.id for d in node.numa]
        self.l3_ids = [d.id for d in node.l3]
        self.n_numa = len(node.numa)
        self.n_l3 = len(node.l3)
        self.cpu_numa = {c: i for i, d in enumerate(node.numa) for c in d.cpus}
        self.cpu_l3 = {c: i for i, d in enumerate(node.l3) for c in d.cpus}
        self.bw = [d.memory_bandwidth_gbs or sp.domain_bw_gbs for d in node.numa]
        self.way_mb = [((d.size_bytes / 2**20) if d.size_bytes else sp.l3_mb) / d.ways for d in node.l3]
        if node.cat is not None:
            m = node.cat.mask_int
            self.bits = [[b for b in range(m.bit_length()) if m >> b & 1][: d.ways] for d in node.l3]
        else:
            self.bits = [list(range(d.ways)) for d in node.l3]
        self.full_mask = [sum(1 << b for b in bits) for bits in self.bits]
        self.cpus = list(node.cpus)
        self.l3_index = {d: i for i, d in enumerate(self.l3_ids)}
        self.numa_index = {d: i for i, d in enumerate(self.numa_ids)}
        self.link_gbs = sp.link_gbs
        self.sp = sp
        self._layouts: dict[tuple[int, ...], tuple] = {}
        self.record = kernel.node_record(self)  # the C group run's copy (None: over its limits)

    def layout(self, cpus: list[int] | tuple[int, ...]) -> tuple[list[int], list[int], list[int], list[float], float, int]:
        """What a job's CPUs make of it, whatever the job (memoised: the searches place jobs on the same CPU sets
        again and again): its threads per NUMA domain and per L3, the domains it uses, its share of threads per
        domain, how evenly they are split (x: 0 when all share a domain, 1 for an even split over all domains) and
        its master thread's domain. Callers must not change the lists."""
        key = tuple(cpus)
        hit = self._layouts.get(key)
        if hit is None:
            n_numa = [0] * self.n_numa
            n_l3 = [0] * self.n_l3
            for c in cpus:
                n_numa[self.cpu_numa[c]] += 1
                n_l3[self.cpu_l3[c]] += 1
            n = len(cpus)
            doms = [s for s in range(self.n_numa) if n_numa[s]]
            share = [x / n for x in n_numa]
            x = 0.0
            if self.n_numa > 1:
                x = (1.0 - sum(s * s for s in share)) / (1.0 - 1.0 / self.n_numa)
            if len(self._layouts) > 100_000:
                self._layouts.clear()
            hit = self._layouts[key] = (n_numa, n_l3, doms, share, x, self.cpu_numa[min(cpus)])
        return hit


def geometry(node: NodeSpec, sp: SimParams = DEFAULT_PARAMS) -> Geometry:
    """The node's geometry under ``sp``: one per node and parameters (it memoises layouts)."""
    return _geometry(node, sp)


@lru_cache(maxsize=32)
def _geometry(node: NodeSpec, sp: SimParams) -> Geometry:
    return Geometry(node, sp)


class SimJob:
    """One job placed in a group: what does not change while the group runs is computed once."""

    __slots__ = ("params", "n", "n_l3", "masks", "tc", "routes", "bmax", "comm_link", "l3_share", "core_cap",
                 "ins_stream", "ins_reuse", "record")

    def __init__(self, g: Geometry, params: JobParams, cpus: list[int] | tuple[int, ...], memory: str,
                 masks: dict[int, int] | None = None, mba_percent: dict[int, int] | None = None) -> None:
        sp = g.sp
        self.params = params
        self.record: bytes | None = None  # env.sim.kernel's packed copy, made on first use
        n_numa, n_l3, doms, share, x, master = g.layout(cpus)
        n = len(cpus)
        self.n = n
        self.n_l3 = n_l3
        # masks: L3 index -> way bits; default all ways of the domains where it has cores
        self.masks = [0] * g.n_l3
        for li in range(g.n_l3):
            if n_l3[li]:
                self.masks[li] = g.full_mask[li] if masks is None or li not in masks else masks[li] & g.full_mask[li]
        p = params.parallel
        self.tc = params.work_s * ((1.0 - p) + p / n) * (1.0 + params.comm * x)
        # where its data lives
        bind = int(memory[5:]) if memory.startswith("bind:") else None
        if bind is not None:
            dist = [1.0 if m == bind else 0.0 for m in range(g.n_numa)]
        elif memory == "interleave":
            dist = [1.0 / len(doms) if s in doms else 0.0 for s in range(g.n_numa)]
        else:  # first-touch and local-alloc (membind to its own domains) place pages alike here
            init = params.init_serial
            dist = [(1.0 - init) * share[m] + (init if m == master else 0.0) for m in range(g.n_numa)]
        irr = params.irregular
        routes = []  # (core domain s, memory domain m, share of its traffic)
        remote = [0.0] * g.n_numa
        for s in doms:
            for m in range(g.n_numa):
                if memory == "interleave" or bind is not None:
                    reg = dist[m]
                else:
                    reg = (1.0 - params.init_serial) * (1.0 if m == s else 0.0) + (params.init_serial if m == master else 0.0)
                f = (1.0 - irr) * reg + irr * dist[m]
                if f > 0.0:
                    routes.append((s, m, share[s] * f))
                    if m != s:
                        remote[s] += f
        self.routes = routes
        # its own bandwidth ceiling: per-core pull cut by remote latency, then by MBA per domain
        lat = params.latency_sensitivity * (sp.remote_latency_ratio - 1.0)
        bmax = sum(n_numa[s] * params.bw_core / (1.0 + lat * remote[s]) for s in doms)
        if mba_percent:
            for s in doms:
                pct = mba_percent.get(s, 100)
                if pct < 100:
                    bmax = min(bmax, pct / 100.0 * g.bw[s] / share[s])
        self.bmax = bmax
        # communication traffic on the links (GB over the run), spread over the directions it uses
        pairs = [(a, b) for a in doms for b in doms if a != b]
        self.comm_link = [(a, b, params.comm_gb * x / len(pairs)) for a, b in pairs] if pairs and x > 0 else []
        # its share of threads per L3 domain (each L3 holds the data its threads there touch)
        self.l3_share = [(li, n_l3[li] / n) for li in range(g.n_l3) if n_l3[li]]
        # the fastest one of its cores can insert lines into a shared L3 (GB/s): its pull, capped by MBA
        self.core_cap = bmax / n
        # lines it inserts per compute second per core: its streamed traffic, and its reuse traffic at miss ratio 1
        self.ins_stream = params.stream_gb / params.work_s
        self.ins_reuse = params.reuse_gb / params.work_s


def memory_key(g: Geometry, cpus: list[int] | tuple[int, ...], memory: str) -> str:
    """The memory policy as the model sees it: local-alloc places pages like first-touch, and for a job whose
    CPUs are all in one domain every policy places them there (SimJobs with equal keys are equal)."""
    if memory == "local-alloc":
        return "first-touch"
    if memory.startswith("bind:"):
        return memory
    if len(g.layout(cpus)[2]) == 1:  # all its CPUs in one domain
        return "first-touch"
    return memory


def _way_groups(masks: list[int]) -> list[tuple[list[int], int]]:
    """The ways of one L3 grouped by exactly which holders hold them: (holder indices, number of ways)."""
    union = 0
    for m in masks:
        union |= m
    h = len(masks)
    out = []
    for pat in range(1, 1 << h):
        inside = union
        outside = 0
        for i in range(h):
            if pat >> i & 1:
                inside &= masks[i]
            else:
                outside |= masks[i]
        count = _popcount(inside & ~outside)
        if count:
            out.append(([i for i in range(h) if pat >> i & 1], count))
    return out


def _share_ways(groups: list[tuple[list[int], int]], pressure: list[float], wmb: float) -> list[float]:
    """MB each holder gets: ways it holds alone whole, each shared way split in proportion to its sharers'
    pressure."""
    eff = [0.0] * len(pressure)
    for members, count in groups:
        if len(members) == 1:
            eff[members[0]] += count * wmb
            continue
        tot = 0.0
        for i in members:
            tot += pressure[i]
        for i in members:
            eff[i] += (count * pressure[i] / tot if tot > 0.0 else count / len(members)) * wmb
    return eff


#: Rounds of the LRU occupancy fixed point (misses -> insertion rates -> shares of the shared ways -> misses).
LRU_ROUNDS = 3


def _cache_mb(g: Geometry, jobs: list[SimJob]) -> list[list[float]]:
    """MB of each L3 domain each job holds (index [job][l3]). Shared ways go by LRU pressure: the rate at which
    each sharer's threads there insert lines, i.e. its miss traffic per compute second per core (at most what a
    core can pull), so a streaming job crowds a cache-friendly one out, and a partition (disjoint masks) or an
    MBA cap on the streaming job protects it."""
    out = [[0.0] * g.n_l3 for _ in jobs]
    for li in range(g.n_l3):
        holders = [(k, j.masks[li]) for k, j in enumerate(jobs) if j.masks[li]]
        if not holders:
            continue
        wmb = g.way_mb[li]
        union = 0
        total_bits = 0
        for _, m in holders:
            union |= m
            total_bits += _popcount(m)
        if total_bits == _popcount(union):  # no shared way: each job has its own
            for k, m in holders:
                out[k][li] = _popcount(m) * wmb
            continue
        # the fixed point: start from every reuse missing, then each job's miss ratio at the MB it gets here
        h = len(holders)
        miss = [1.0] * h
        same = all(m == holders[0][1] for _, m in holders)
        pool = _popcount(union) * wmb
        groups = [] if same else _way_groups([m for _, m in holders])
        eff = [0.0] * h
        for r in range(LRU_ROUNDS):
            pressure = [0.0] * h
            for i in range(h):
                j = jobs[holders[i][0]]
                rate = j.ins_stream + j.ins_reuse * miss[i]
                pressure[i] = j.n_l3[li] * (rate if rate < j.core_cap else j.core_cap)
            if same:  # all hold the same ways (no partitioning): one pool
                tot = sum(pressure)
                for i in range(h):
                    eff[i] = pool * pressure[i] / tot if tot > 0.0 else pool / h
            else:
                eff = _share_ways(groups, pressure, wmb)
            if r == LRU_ROUNDS - 1:
                break
            for i in range(h):
                j = jobs[holders[i][0]]
                p = j.params
                f = j.n_l3[li] / j.n
                new = miss_ratio(eff[i] / f, p.ws_mb, p.ws2_mb, p.ws2_share)
                miss[i] = new if r == 0 else 0.5 * (miss[i] + new)  # damped: two sharers' shares can see-saw
        for i in range(h):
            out[holders[i][0]][li] = eff[i]
    return out


def traffic_gb(jobs: list[SimJob], cache: list[list[float]]) -> list[float]:
    """Each job's memory traffic (GB) for its whole work with the L3 MB it holds per domain."""
    out = []
    for k, j in enumerate(jobs):
        p = j.params
        if p.reuse_gb <= 0.0:
            out.append(p.stream_gb)
            continue
        c = cache[k]
        m = 0.0
        w1, w2, s2 = p.ws_mb, p.ws2_mb, p.ws2_share
        for li, f in j.l3_share:
            m += f * miss_ratio(c[li] / f, w1, w2, s2)
        out.append(p.stream_gb + p.reuse_gb * m)
    return out


def _popcount(x: int) -> int:
    return x.bit_count()


def solve(g: Geometry, jobs: list[SimJob]) -> list[float]:
    """Each running job's time for its whole work under the current contention (seconds). By the C kernel where it
    is built (the same doubles), else by ``solve_py``."""
    times = kernel.solve(g, jobs)
    return times if times is not None else solve_py(g, jobs)


def solve_py(g: Geometry, jobs: list[SimJob]) -> list[float]:
    """``solve`` in Python: the model's definition."""
    sp = g.sp
    ov = 1.0 - sp.overlap
    vols = traffic_gb(jobs, _cache_mb(g, jobs))
    nd = g.n_numa
    bw = g.bw
    link = g.link_gbs
    # resources: memory controllers 0..nd-1, then links s*nd+m+nd; each route uses its controller (and link)
    kap = [1.0] * (nd + nd * nd)
    njobs = len(jobs)
    base = [vols[k] / jobs[k].bmax if vols[k] > 0.0 else 0.0 for k in range(njobs)]
    times = [0.0] * njobs
    for _ in range(sp.iterations):
        load = [0.0] * (nd + nd * nd)
        for k in range(njobs):
            j = jobs[k]
            slow = 0.0
            for s, m, f in j.routes:
                kp = kap[m]
                if s != m:
                    kl = kap[nd + s * nd + m]
                    if kl < kp:
                        kp = kl
                slow += f / kp
            tm = base[k] * slow
            tc = j.tc
            t = (tm + ov * tc) if tm > tc else (tc + ov * tm)
            times[k] = t
            d = vols[k] / t
            for s, m, f in j.routes:
                load[m] += d * f
                if s != m:
                    load[nd + s * nd + m] += d * f
            for a, b, gb in j.comm_link:
                load[nd + a * nd + b] += gb / t
        change = 0.0
        for r in range(nd + nd * nd):
            ld = load[r]
            if ld > 0.0:
                new = kap[r] * (bw[r] if r < nd else link) / ld
                if new > 1.0:
                    new = 1.0
            else:
                new = 1.0
            dlt = new - kap[r]
            if dlt < 0.0:
                dlt = -dlt
            if dlt > change:
                change = dlt
            kap[r] = new
        if change < 1e-5:
            break
    return times


def run_group(g: Geometry, jobs: list[SimJob], factors: list[float] | None = None) -> list[float]:
    """Event-driven run of one group: each job's end time (seconds from the group's start). By the C kernel
    (``env.sim.kernel``: the same arithmetic, the same doubles) where it is built, else by ``run_group_py``."""
    ends = kernel.run_group(g, jobs, factors)
    return ends if ends is not None else run_group_py(g, jobs, factors)


def run_group_py(g: Geometry, jobs: list[SimJob], factors: list[float] | None = None) -> list[float]:
    """``run_group`` in Python: the model's definition."""
    left = [1.0] * len(jobs)
    ends = [0.0] * len(jobs)
    active = list(range(len(jobs)))
    now = 0.0
    while active:
        times = solve_py(g, [jobs[k] for k in active])
        if factors is not None:
            times = [t * factors[k] for t, k in zip(times, active)]
        rates = [1.0 / t for t in times]
        dt = min(left[k] / r for k, r in zip(active, rates))
        now += dt
        still = []
        for k, r in zip(active, rates):
            left[k] -= r * dt
            if left[k] <= 1e-9:
                ends[k] = now
            else:
                still.append(k)
        active = still
    return ends


def solo_time(node: NodeSpec, params: JobParams, cpus: list[int] | None = None, sp: SimParams = DEFAULT_PARAMS) -> float:
    """The job alone: on the whole node (default) or on the given CPUs, first-touch, all ways, no MBA cap."""
    g = geometry(node, sp)
    return run_group(g, [SimJob(g, params, cpus if cpus is not None else g.cpus, "first-touch")])[0]
