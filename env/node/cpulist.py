"""Linux cpulist text ('0-3,8,10-11') both ways: the one place CPU sets become text and back."""

from __future__ import annotations

from typing import Iterable


def parse_cpulist(text: str) -> list[int]:
    """'0-3,8' -> [0, 1, 2, 3, 8]. Raises ValueError naming the bad part."""
    cpus: list[int] = []
    text = text.strip()
    if not text:
        return cpus
    for part in text.split(","):
        part = part.strip()
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ValueError(f"bad cpulist part {part!r} in {text!r}")
        a, b = int(lo), int(hi) if sep else int(lo)
        if b < a:
            raise ValueError(f"bad cpulist range {part!r} in {text!r}")
        cpus.extend(range(a, b + 1))
    return sorted(set(cpus))


def format_cpulist(cpus: Iterable[int]) -> str:
    """[0, 1, 2, 5] -> '0-2,5' (the form numactl and sysfs use)."""
    ordered = sorted(set(cpus))
    runs: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        runs.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(runs)


def parse_hexmask(text: str) -> int:
    """A sysfs/resctrl hex mask ('7ff', '0x00f', 'ffff,ffffffff') as an int."""
    cleaned = text.strip().lower().removeprefix("0x").replace(",", "")
    if not cleaned or any(c not in "0123456789abcdef" for c in cleaned):
        raise ValueError(f"bad hex mask {text!r}")
    return int(cleaned, 16)
