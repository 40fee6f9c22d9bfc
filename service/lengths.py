"""Each program's length learned from its jobs that ended on a node: the Slurm controller's (``service.slurm``) and
the online runner's (``cosched run WINDOW.json --mode continuous``) one rule.

A node model's time alone for a program comes from its profile, often a short run of it, so it can be off by a
factor, and by different factors for different programs; what a decision orders by (the longest first, what is left
for the end) is then wrong. Each job that ends well says how long its program runs here.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from env.node.spec import NodeSpec
from service.decide import profile_solo_s

LEARN_LAST = 5  # a program's learned length: the median of its last LEARN_LAST jobs that ended
MIN_SOLO_S, MAX_SOLO_S = 1e-3, 1e8  # a learned length stays within what POST /decide takes as solo_s (0, 1e9]
RUN_FILE = "lengths.jsonl"  # an online run's starts, as learning needs them (its run directory)


class Lengths:
    """Each program's time alone on a node kind as its jobs that ended show it (system-generated runtime predictions,
    as Tsafrir, Etsion and Feitelson's backfilling takes a user's last jobs' runtimes instead of their estimates).

    A job that ended well teaches its program's time alone: the time its decision took, times the seconds it ran over
    the seconds the decision predicted; a program's length is the median of its last LEARN_LAST. A program none of
    whose jobs ended yet gets its profile's time times the median ratio of learned to profile time over the programs
    learned: the profiles were taken alike (often on short runs), so they tend to be off alike, and a program left
    at its profile's length beside learned ones would be misordered for it. Nothing learned: the profiles' own."""

    def __init__(self, node: NodeSpec) -> None:
        self.node = node
        self.waiting: dict[Any, tuple[str, float, float]] = {}  # started job -> (program, solo_s taken, predicted s)
        self.seen: dict[str, list[float]] = {}  # program -> its jobs' times alone, oldest first
        self._profile: dict[str, float | None] = {}

    def started(self, job_id: Any, profile: str, expected: tuple[float, float]) -> None:
        """``job_id`` of ``profile`` started, decided with its time alone and the seconds to its end predicted."""
        self.waiting[job_id] = (profile, *expected)

    def ended(self, job_id: Any, ran_s: float | None) -> str | None:
        """``job_id`` ended after ``ran_s`` seconds (None: it failed or was cancelled, which says nothing of its
        program's length); the line that says what was learned, if anything."""
        profile, solo, predicted = self.waiting.pop(job_id)
        if ran_s is None or ran_s <= 0:
            return None
        xs = self.seen.setdefault(profile, [])
        xs.append(min(MAX_SOLO_S, max(MIN_SOLO_S, solo * ran_s / predicted)))
        del xs[:-LEARN_LAST]
        k = self.profile_ratio()
        return (f"job {job_id} ({profile}) ran {ran_s:.1f} s where {predicted:.1f} s was predicted: {profile} alone "
                f"now taken as {statistics.median(xs):.1f} s (its last {len(xs)} ended here)" +
                (f"; programs none of whose jobs ended yet: their profiles' times x {k:.2f}" if k is not None else ""))

    def profile_solo_s(self, profile: str) -> float | None:
        """The program's time alone as its profile on the node model has it (None: no node model, or unknown)."""
        if profile not in self._profile:
            self._profile[profile] = profile_solo_s(self.node, profile)
        return self._profile[profile]

    def profile_ratio(self) -> float | None:
        """Learned over profile time alone, the median over the programs learned (None: none to compare)."""
        ratios = [statistics.median(xs) / base for p, xs in self.seen.items() if (base := self.profile_solo_s(p))]
        return statistics.median(ratios) if ratios else None

    def solo_s(self, profiles: Iterable[str]) -> dict[str, float]:
        """Each of ``profiles``' time alone to decide with, where something was learned (else absent: its profile's)."""
        learned = {p: statistics.median(xs) for p, xs in self.seen.items()}
        k = self.profile_ratio()
        out = {}
        for p in profiles:
            if p in learned:
                out[p] = learned[p]
            elif k is not None and (base := self.profile_solo_s(p)):
                out[p] = base * k
        return out


def expectations(starts: Iterable[tuple[Any, float | None]], ends: Mapping[Any, float], now_s: float
                 ) -> dict[Any, tuple[float, float]]:
    """What each start teaches once it ends: (its time alone as decided, the seconds to its predicted end), for the
    starts decided with a time alone whose predicted end lies ahead (``Lengths.started``'s ``expected``)."""
    return {jid: (solo, end - now_s) for jid, solo in starts
            if solo is not None and (end := ends.get(jid)) is not None and end > now_s}


def ran_well(result: Mapping[str, Any]) -> float | None:
    """The seconds an online run's job ran, where they say how long its program runs alone on its CPUs: it exited 0
    where the runner saw it end, on the CPUs it started with (None otherwise)."""
    ok = (result.get("exit_code") == 0 and result.get("signal") is None and not result.get("timed_out")
          and result.get("end_seen", True) and result.get("note") is None and not result.get("gave_back")
          and result.get("start_s") is not None and result.get("end_s") is not None)
    return float(result["end_s"]) - float(result["start_s"]) if ok else None


class RunLengths:
    """The online runner's lengths: each start's expectation kept in the run directory's ``lengths.jsonl`` (one
    fsynced line, before the decision is carried out), each end taught from the runner's own record of it, so that
    ``cosched run --resume`` learns again what the killed run had learned (``ends``: the journal's job ends)."""

    def __init__(self, node: NodeSpec, run_dir: Path, ends: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self.lengths, self.path = Lengths(node), Path(run_dir) / RUN_FILE
        if ends is None or not self.path.exists():
            return
        for line in self.path.read_text().splitlines():
            try:
                rec = json.loads(line)
                self.lengths.started(rec["job"], rec["profile"], (float(rec["solo_s"]), float(rec["predicted_s"])))
            except (ValueError, KeyError, TypeError):
                continue  # a line cut by the kill: that start teaches nothing
        for jid, result in ends.items():
            if jid in self.lengths.waiting:
                self.lengths.ended(jid, ran_well(result))

    def started(self, job_id: str, profile: str, expected: tuple[float, float]) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps({"job": job_id, "profile": profile, "solo_s": expected[0],
                                "predicted_s": expected[1]}) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.lengths.started(job_id, profile, expected)

    def ended(self, job_id: str, result: Mapping[str, Any]) -> str | None:
        """What ``job_id``'s end taught (a line), if anything."""
        if job_id not in self.lengths.waiting:
            return None
        return self.lengths.ended(job_id, ran_well(result))

    def summary(self) -> str | None:
        """One line: each program's length learned against its profile's, or None when nothing was learned."""
        got = self.lengths.solo_s(self.lengths.seen)
        if not got:
            return None
        parts = []
        for p, t in sorted(got.items()):
            base = self.lengths.profile_solo_s(p)
            parts.append(f"{p} {t:.1f} s" + (f" (its profile's {base:.1f} s)" if base else ""))
        return "lengths learned from the jobs that ended (each program's time alone on this node): " + ", ".join(parts)


__all__ = ["LEARN_LAST", "MAX_SOLO_S", "MIN_SOLO_S", "RUN_FILE", "Lengths", "RunLengths", "expectations", "ran_well"]
