"""Writes the standard evaluation file ``training/eval_windows.json`` (coscheduler.md §8).

30 windows of W = 6 with Cmax = 4: first the paper's twelve test mixes Q1-Q12 (Table V; starred jobs were never
seen in training), then 18 more drawn with a fixed seed from all 19 catalogue programs, each with at least one
held-out program. Run ``.venv/bin/python training/make_eval_windows.py`` to regenerate it (the output is
deterministic); ``--check`` exits 1 when the file in the repository differs.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from env.sim.catalogue import ALL_JOBS, HELD_OUT_JOBS  # noqa: E402

OUT = Path(__file__).resolve().parent / "eval_windows.json"
SEED = 20261120
N_RANDOM = 18
PAPER_MIXES = [  # Table V of the co-scheduler paper
    ["fmm", "FT", "EP", "fft", "CG", "lu_ncb"],
    ["IS", "lu_ncb", "EP", "CG", "SP", "cholesky"],
    ["fft", "MG", "IS", "lu_ncb", "lu_cb", "EP"],
    ["fmm", "IS", "MG", "FT", "SP", "fft"],
    ["CG", "MG", "FT", "fmm", "DC", "water_nsquared"],
    ["lu_ncb", "water_spatial", "fft", "DC", "fmm", "MG"],
    ["ocean_ncp", "CG", "fmm", "barnes", "ocean_cp", "lu_ncb"],
    ["IS", "MG", "FT", "CG", "DC", "ocean_ncp"],
    ["MG", "EP", "IS", "fft", "DC", "water_nsquared"],
    ["DC", "barnes", "cholesky", "lu_ncb", "CG", "fmm"],
    ["lu_cb", "MG", "barnes", "cholesky", "fmm", "MG"],
    ["raytrace", "cholesky", "DC", "BT", "fft", "lu_ncb"],
]


def window(tag: str, names: list[str]) -> dict:
    return {"jobs": [{"id": f"{tag}-{k}-{n}", "profile": n} for k, n in enumerate(names)], "max_concurrency": 4}


def windows() -> list[dict]:
    out = [window(f"q{i + 1}", mix) for i, mix in enumerate(PAPER_MIXES)]
    rng = random.Random(SEED)
    while len(out) < len(PAPER_MIXES) + N_RANDOM:
        names = rng.sample(ALL_JOBS, 6)
        if any(n in HELD_OUT_JOBS for n in names):
            out.append(window(f"r{len(out) - len(PAPER_MIXES) + 1}", names))
    return out


def main() -> int:
    text = json.dumps(windows(), indent=1) + "\n"
    if "--check" in sys.argv[1:]:
        same = OUT.exists() and OUT.read_text() == text
        print(f"{OUT}: {'up to date' if same else 'differs from the generator'}")
        return 0 if same else 1
    OUT.write_text(text)
    print(f"wrote {OUT} ({len(windows())} windows of 6 jobs, Cmax 4)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
