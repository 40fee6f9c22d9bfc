"""Helpers for the env tests (imported by name: pytest puts this folder on sys.path)."""

from __future__ import annotations

from fractions import Fraction

from env.plan.actions import JobAction, ScheduleAction, encode
def job_action(cores, ways=22, bw=100, split="balanced") -> int:
    """A job-level action index from readable values: cores as a fraction, ways out of 22, bandwidth %."""
    return encode(JobAction(Fraction(cores), Fraction(ways, 22), bw, split))


def sched_action(affinity="compact", memory="first-touch") -> int:
    return encode(ScheduleAction(affinity, memory))
