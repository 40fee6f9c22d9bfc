"""Generated jobs for the simulated node: ``syn-SEED-INDEX`` names a program drawn from broad ranges of character.

Why: the paper trains on 12 programs. An agent that sees 12 feature vectors learns *those* jobs, not how job
features relate to good groupings, and it generalises poorly to the held-out programs. Training windows can
mix in generated jobs (``cosched train --synthetic-jobs N``) so that the features the agent learns from are
spread over the whole space a node's queue may show (domain randomisation). The held-out programs are never
trained on; the ranges below are wide enough to hold every catalogue program, the held-out ones included,
which is the point: a new program should look like something seen in training.

A name is the whole description: the same name gives the same job in every process (seeded from the name), so
plans, the sim backend, the search and the profiles all agree without a registry. Ranges (u: uniform,
log: log-uniform), per ``env.sim.model.JobParams`` and the profile-only columns of ``CatalogueEntry``:

=================  ====================================  ===============================================
column             drawn from                            why this range
=================  ====================================  ===============================================
work_s             log [100, 2000] s                     minutes to half an hour of single-core work
parallel           1 - log [0.002, 0.35]                 embarrassingly parallel down to poor scaling
comm, comm_gb      u [0, 0.45]; comm x log [300, 4000]   none to all-to-all exchanges
irregular          u [0, 0.85]                           streaming to pointer chasing
init_serial        0.45 u^2                              mostly parallel initialisation
stream_gb          log [5, 15000]                        cache-resident to bandwidth-bound
reuse_gb, ws_mb    log [2, 7000]; log [1, 32] MB         cache-insensitive to cache-hungry
ws2_mb, ws2_share  ws_mb x log [3, 40]; u [0, 0.9]       a second, larger working set (drawn last)
bw_core            u [3, 15] GB/s                        latency-bound to prefetch-friendly
footprint_gb       log [0.05, 8]
ipc                u [0.5, 2.3]
branch, L1-I MPKI  log [0.5, 10]; log [0.1, 3.5]
cs_per_cpu_s       log [15, 500]
=================  ====================================  ===============================================
"""

from __future__ import annotations

import dataclasses
import math
import random
import re
from functools import lru_cache

from env.sim.model import JobParams

PREFIX = "syn"
_NAME = re.compile(rf"^{PREFIX}-(\d{{1,9}})-(\d{{1,9}})$")


class WithGenerated(dict):
    """A table of the catalogue's programs by name that also answers for generated jobs: a missing ``syn-…``
    name is made by ``_make`` on first use and kept apart; ``[]`` and ``get`` both resolve it. Iterating, ``len``
    and ``in`` see the catalogue's programs only, whatever was generated before in the process (the tables are
    cached per node: a generated job kept in the table itself would show in every later listing)."""

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003 - dict's own
        super().__init__(*args, **kwargs)
        self._generated: dict[str, object] = {}

    def _make(self, name: str) -> object:
        raise NotImplementedError

    def __missing__(self, name: str) -> object:
        if not isinstance(name, str) or not is_synthetic(name):
            raise KeyError(name)
        value = self._generated.get(name)
        if value is None:
            value = self._generated[name] = self._make(name)
        return value

    def get(self, name, default=None):  # type: ignore[override]
        try:
            return self[name]
        except KeyError:
            return default


def synthetic_name(seed: int, index: int) -> str:
    return f"{PREFIX}-{seed}-{index}"


def synthetic_names(n: int, seed: int) -> list[str]:
    """``n`` generated job names of one seed (the training run's)."""
    return [synthetic_name(seed, i) for i in range(n)]


def is_synthetic(name: str) -> bool:
    return _NAME.match(name) is not None


@lru_cache(maxsize=65536)
def synthetic_entry(name: str):  # -> env.sim.catalogue.CatalogueEntry | None
    """The generated job ``name`` (None when ``name`` is not a generated job's name)."""
    from env.sim.catalogue import CatalogueEntry

    m = _NAME.match(name)
    if m is None:
        return None
    rng = random.Random(f"cosched-synthetic-v1:{int(m.group(1))}:{int(m.group(2))}")

    def log(lo: float, hi: float) -> float:
        return math.exp(rng.uniform(math.log(lo), math.log(hi)))

    comm = rng.uniform(0.0, 0.45)
    params = JobParams(
        name=name,
        work_s=log(100, 2000),
        parallel=1.0 - log(0.002, 0.35),
        comm=comm,
        comm_gb=comm * log(300, 4000),
        irregular=rng.uniform(0.0, 0.85),
        init_serial=0.45 * rng.random() ** 2,
        stream_gb=log(5, 15000),
        reuse_gb=log(2, 7000),
        ws_mb=log(1, 32),
        ws2_mb=1.0,
        ws2_share=0.0,
        bw_core=rng.uniform(3, 15),
    )
    entry = CatalogueEntry(
        params, suite="synthetic", character="generated (cosched train --synthetic-jobs)",
        why="drawn from env/sim/synthetic.py's ranges, seeded by its name",
        footprint_gb=log(0.05, 8), ipc=rng.uniform(0.5, 2.3), branch_mpki=log(0.5, 10), l1i_mpki=log(0.1, 3.5),
        cs_per_cpu_s=log(15, 500),
    )
    # the second working set is drawn after everything else, so the other columns are those of before it existed
    ws2 = params.ws_mb * log(3, 40)
    return dataclasses.replace(entry, params=dataclasses.replace(params, ws2_mb=ws2, ws2_share=rng.uniform(0.0, 0.9)))
