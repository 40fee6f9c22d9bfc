#!/usr/bin/env python3
"""Write the example window's input file: deterministic word text (compressible, like logs), ~2 MB."""

import random
import sys
from pathlib import Path

out = Path(sys.argv[1] if len(sys.argv) > 1 else ".cosched-example/text.txt")
if out.exists() and out.stat().st_size > 0:
    sys.exit(0)
out.parent.mkdir(parents=True, exist_ok=True)
rng = random.Random(2026)
words = ["".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(2, 9))) for _ in range(4000)]
tmp = out.with_suffix(".tmp")
tmp.write_text(" ".join(rng.choice(words) for _ in range(300_000)))
tmp.rename(out)
