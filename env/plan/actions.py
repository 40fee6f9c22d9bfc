"""The 257-action encoding (docs/design/coscheduler.md §2): index <-> meaning, both ways, in one place.

    0..5     schedule-level: affinity x memory policy (index = 3*affinity + memory)
    6..255   job-level: cores x ways x bandwidth x split (mixed radix, split fastest)
    256      skip: move the current job to the end of the remaining window

Fractions are node-relative so one agent shape works on any node; a model is still node-specific.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Literal, Union

Affinity = Literal["compact", "distributed"]
MemoryPolicy = Literal["first-touch", "interleave", "local-alloc"]
Split = Literal["balanced", "proportional"]

ENCODING_VERSION = "cosched-actions-v1"

AFFINITIES: tuple[Affinity, ...] = ("compact", "distributed")
MEMORY_POLICIES: tuple[MemoryPolicy, ...] = ("first-touch", "interleave", "local-alloc")
CORE_FRACTIONS: tuple[Fraction, ...] = (Fraction(1, 8), Fraction(1, 4), Fraction(1, 2), Fraction(3, 4), Fraction(7, 8))
# The paper's node had 22 ways; its options {4, 8, 12, 16, 22} become fractions of the node's ways.
WAY_FRACTIONS: tuple[Fraction, ...] = tuple(Fraction(w, 22) for w in (4, 8, 12, 16, 22))
BW_PERCENTS: tuple[int, ...] = (20, 40, 60, 80, 100)
SPLITS: tuple[Split, ...] = ("balanced", "proportional")

N_SCHEDULE = len(AFFINITIES) * len(MEMORY_POLICIES)  # 6
N_JOB = len(CORE_FRACTIONS) * len(WAY_FRACTIONS) * len(BW_PERCENTS) * len(SPLITS)  # 250
FIRST_JOB = N_SCHEDULE
SKIP = N_SCHEDULE + N_JOB  # 256
N_ACTIONS = SKIP + 1  # 257


@dataclass(frozen=True)
class ScheduleAction:
    affinity: Affinity
    memory: MemoryPolicy


@dataclass(frozen=True)
class JobAction:
    cores: Fraction
    ways: Fraction
    bw_percent: int
    split: Split


@dataclass(frozen=True)
class SkipAction:
    pass


Action = Union[ScheduleAction, JobAction, SkipAction]


def decode(index: int) -> Action:
    """The action with this index (from a table: planners decode at every step; the actions are frozen)."""
    if 0 <= index < N_ACTIONS:
        return _DECODED[index]
    raise ValueError(f"action index {index} is outside 0..{N_ACTIONS - 1}")


def job_index(c: int, w: int, b: int, s: int) -> int:
    """The job action whose options are CORE_FRACTIONS[c], WAY_FRACTIONS[w], BW_PERCENTS[b] and SPLITS[s] (the
    searches step through options by index: no Fraction compared)."""
    return FIRST_JOB + ((c * len(WAY_FRACTIONS) + w) * len(BW_PERCENTS) + b) * len(SPLITS) + s


def job_options(index: int) -> tuple[int, int, int, int]:
    """The option indices (c, w, b, s) of a job action: the inverse of ``job_index``."""
    if not FIRST_JOB <= index < SKIP:
        raise ValueError(f"action {index} is not a job action ({FIRST_JOB}..{SKIP - 1})")
    rest, s = divmod(index - FIRST_JOB, len(SPLITS))
    rest, b = divmod(rest, len(BW_PERCENTS))
    c, w = divmod(rest, len(WAY_FRACTIONS))
    return c, w, b, s


def _decode(index: int) -> Action:
    if index < N_SCHEDULE:
        a, m = divmod(index, len(MEMORY_POLICIES))
        return ScheduleAction(AFFINITIES[a], MEMORY_POLICIES[m])
    if index == SKIP:
        return SkipAction()
    c, w, b, s = job_options(index)
    return JobAction(CORE_FRACTIONS[c], WAY_FRACTIONS[w], BW_PERCENTS[b], SPLITS[s])


_DECODED: tuple[Action, ...] = tuple(_decode(i) for i in range(N_ACTIONS))


def encode(action: Action) -> int:
    """The inverse of decode; raises ValueError for a value not in the option lists."""
    try:
        if isinstance(action, ScheduleAction):
            return AFFINITIES.index(action.affinity) * len(MEMORY_POLICIES) + MEMORY_POLICIES.index(action.memory)
        if isinstance(action, SkipAction):
            return SKIP
        c = CORE_FRACTIONS.index(action.cores)
        w = WAY_FRACTIONS.index(action.ways)
        b = BW_PERCENTS.index(action.bw_percent)
        s = SPLITS.index(action.split)
    except ValueError as exc:
        raise ValueError(f"{action} is not in the action encoding {ENCODING_VERSION}: {exc}") from None
    return job_index(c, w, b, s)


def is_schedule(index: int) -> bool:
    return 0 <= index < N_SCHEDULE


def is_job(index: int) -> bool:
    return FIRST_JOB <= index < SKIP


def describe(index: int) -> str:
    """Human text of an action, for logs and traces."""
    a = decode(index)
    if isinstance(a, ScheduleAction):
        return f"schedule: {a.affinity}, {a.memory}"
    if isinstance(a, SkipAction):
        return "skip"
    return f"job: cores {a.cores}, ways {a.ways.numerator}/{a.ways.denominator}, bw {a.bw_percent}%, {a.split}"
