"""Writes the standard evaluation file ``training/eval_windows.json`` (docs/design/coscheduler.md §8).

30 windows of W = 6 with Cmax = 4: first the paper's twelve test mixes Q1-Q12 (Table V; starred jobs were never
seen in training), then 18 more drawn with a fixed seed from all 19 catalogue programs, each with at least one
held-out program. Run ``.venv/bin/python training/make_eval_windows.py`` to regenerate it (the output is
deterministic); ``--check`` exits 1 when the files in the repository differ.

For the W x Cmax sweep (§8) it also writes ``eval_windows_w4.json`` (18 windows) and ``eval_windows_w8.json``
(9 windows): the paper's 72 jobs of Q1-Q12 in queue order, cut into windows of 4 and of 8 as the paper did.
Use them with ``cosched eval --window-size W --max-concurrency C``.
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


def sweep_windows(size: int) -> list[dict]:
    jobs = [n for mix in PAPER_MIXES for n in mix]
    return [window(f"w{size}-{i // size + 1}", jobs[i: i + size]) for i in range(0, len(jobs), size)]


def outputs() -> dict[Path, list[dict]]:
    return {OUT: windows(), OUT.with_name("eval_windows_w4.json"): sweep_windows(4),
            OUT.with_name("eval_windows_w8.json"): sweep_windows(8)}


def main() -> int:
    check = "--check" in sys.argv[1:]
    status = 0
    for path, docs in outputs().items():
        text = json.dumps(docs, indent=1) + "\n"
        if check:
            same = path.exists() and path.read_text() == text
            print(f"{path}: {'up to date' if same else 'differs from the generator'}")
            status |= 0 if same else 1
        else:
            path.write_text(text)
            print(f"wrote {path} ({len(docs)} windows of {len(docs[0]['jobs'])} jobs, Cmax 4)")
    return status


if __name__ == "__main__":
    sys.exit(main())
