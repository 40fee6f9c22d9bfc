"""Node-level parameters of the simulated node's contention model, and where each number comes from.

The node's *shape* (CPUs, NUMA and L3 domains, ways, MBA granularity, bandwidth per domain) comes from its
``NodeSpec`` (``env/sim/nodes/*.json``). What a node spec does not say, the model takes from here:

=====================  ==========  ==============================================================================
parameter              reference   source / reason
=====================  ==========  ==============================================================================
domain_bw_gbs          76.8        per NUMA domain when the spec has no ``memory_bandwidth_gbs``: 6 DDR4-2400
                                   channels x 19.2 GB/s = 115.2 GB/s peak per socket (Intel product sheet,
                                   Xeon Silver 4116); a STREAM-like load reaches about two thirds of it.
link_gbs               27.0        per direction between two sockets: two UPI links at 9.6 GT/s x 2 B =
                                   38.4 GB/s raw per direction; about 70 % of it carries data (headers,
                                   snoops, credits), a usual remote-STREAM figure on 2-socket Skylake-SP.
remote_latency_ratio   1.6         remote / local load latency on 2-socket Skylake-SP (about 140 / 90 ns,
                                   Intel MLC idle latencies as commonly published).
overlap                0.75        share of the shorter of (compute time, memory time) hidden under the longer
                                   one: out-of-order cores and prefetchers overlap most, not all, stalls.
l3_mb                  16.5        per L3 domain when the spec has no ``size_bytes`` (product sheet).
clock_ghz              2.1         base clock (product sheet); it turns compute seconds into simulated cycles.
noise_sd               0.0         optional measurement noise: each job's time in a plan is multiplied by
                                   exp(N(0, noise_sd)), drawn from the seed given to the simulation.
latency_ns             90.0        idle local load latency (Intel MLC on 2-socket Skylake-SP, as commonly
                                   published): only the LATENCY microbenchmark of the measuring backend reads it.
bubble_gbs_per_core    8.0         memory traffic per core of the pressure generator at level 1 (a streaming
                                   loop on one core of this node class); only the measuring backend's BUBBLE.
=====================  ==========  ==============================================================================

These are a *model*: every figure the simulated node produces is labelled simulated.

``SimParams`` is also the ``params`` section of a node-model file (``env.sim.nodemodel``: pydantic validates it by
the bounds below, and a file must give every field: no default, so nothing falls back to the paper's machine).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import ConfigDict, Field


@dataclass(frozen=True)
class SimParams:
    __pydantic_config__ = ConfigDict(extra="forbid", revalidate_instances="always")

    domain_bw_gbs: Annotated[float, Field(gt=0)]
    link_gbs: Annotated[float, Field(gt=0)]
    remote_latency_ratio: Annotated[float, Field(ge=1)]
    overlap: Annotated[float, Field(ge=0, le=1)]
    l3_mb: Annotated[float, Field(gt=0)]
    clock_ghz: Annotated[float, Field(gt=0)]
    noise_sd: Annotated[float, Field(ge=0)]
    latency_ns: Annotated[float, Field(gt=0)]
    bubble_gbs_per_core: Annotated[float, Field(gt=0)]
    # fixed-point iterations of the bandwidth-sharing solve (converges in 3-5 for these sizes)
    iterations: Annotated[int, Field(ge=1)]


#: The paper's machine (the table above).
DEFAULT_PARAMS = SimParams(domain_bw_gbs=76.8, link_gbs=27.0, remote_latency_ratio=1.6, overlap=0.75, l3_mb=16.5,
                           clock_ghz=2.1, noise_sd=0.0, latency_ns=90.0, bubble_gbs_per_core=8.0, iterations=8)
#: The order of the fields in a node-model file (``iterations`` after ``noise_sd``, as files have always had it).
FILE_ORDER = ("domain_bw_gbs", "link_gbs", "remote_latency_ratio", "overlap", "l3_mb", "clock_ghz", "noise_sd",
              "iterations", "latency_ns", "bubble_gbs_per_core")
