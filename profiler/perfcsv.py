"""Parse the CSV that ``perf stat -x SEP`` writes, field by field.

A counter line is ``value,unit,event,runtime,pct,metric,metric_unit`` (perf 6.x), e.g.::

    1216.84,msec,task-clock,1216837959,100.00,0.982,CPUs utilized
    <not supported>,,cpu-cycles,0,100.00,,

With ``--per-thread`` each line is prefixed by ``comm-tid``. Lines starting with ``#`` and blank lines are
perf's comments. Rules:

* ``<not supported>`` and ``<not counted>`` are *missing* (``None``), never zero.
* Under a locale with a decimal comma (e.g. ``LC_ALL=de_DE.UTF-8``) perf writes ``116,34,msec,...`` with the
  separator ``,``: a number then spans two fields. It is recognised because the field after a value is a unit
  (never all digits) and perf prints percentages with two decimals (``100,00``). Such a line is rejoined.
* Values are normalised: ``duration_time`` to nanoseconds, ``task-clock`` to milliseconds (perf's own units),
  whatever time unit perf printed.
* Several lines for one event (per thread, per PMU) are aggregated: summed, except ``duration_time``
  (one wall clock seen by every thread), which takes the maximum. Missing only if no line counted.
* Anything else is refused with :class:`PerfOutputError` naming the line: a guess would poison the profile.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Literal

from profiler.errors import PerfOutputError
from profiler.events import WALL_CLOCK_EVENTS

Status = Literal["counted", "not supported", "not counted"]

NOT_SUPPORTED = "<not supported>"
NOT_COUNTED = "<not counted>"

_NUMBER = re.compile(r"^[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$")
_DIGITS = re.compile(r"^[0-9]+$")
_UNIT = re.compile(r"^[A-Za-z%/]*$")
_EVENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:@/=-]*$")
_THREAD = re.compile(r"^.+-[0-9]+$")

#: Time units perf prints, in nanoseconds.
_TIME_UNIT_NS = {"ns": 1.0, "nsec": 1.0, "us": 1e3, "usec": 1e3, "ms": 1e6, "msec": 1e6, "s": 1e9, "sec": 1e9}
#: Events with a time unit, and the unit their values are normalised to.
_TIME_EVENT_TARGET = {"duration_time": "ns", "task-clock": "msec"}


@dataclass(frozen=True)
class PerfLine:
    """One counter line of perf's CSV."""

    event: str
    value: float | None
    status: Status
    unit: str
    thread: str | None = None
    runtime_ns: int | None = None
    percent_running: float | None = None


@dataclass(frozen=True)
class PerfStat:
    """All counter lines of one perf run, and their aggregation per event."""

    lines: tuple[PerfLine, ...]

    def events(self) -> list[str]:
        seen: dict[str, None] = {}
        for line in self.lines:
            seen.setdefault(line.event, None)
        return list(seen)

    def value(self, event: str) -> float | None:
        """The event's value over all its lines; None when absent, unsupported or not counted."""
        counted = [ln.value for ln in self.lines if ln.event == event and ln.value is not None]
        if not counted:
            return None
        return max(counted) if event in WALL_CLOCK_EVENTS else float(sum(counted))

    def status(self, event: str) -> Status | Literal["absent"]:
        statuses = {ln.status for ln in self.lines if ln.event == event}
        if not statuses:
            return "absent"
        if "counted" in statuses:
            return "counted"
        return "not supported" if "not supported" in statuses else "not counted"

    def counters(self, events: Iterable[str]) -> dict[str, float | None]:
        return {e: self.value(e) for e in events}

    def threads(self) -> list[str]:
        return sorted({ln.thread for ln in self.lines if ln.thread is not None})


def parse_perf_csv(text: str, sep: str = ",", source: str = "perf output") -> PerfStat:
    """Parse the whole of a ``perf stat -x SEP`` output file. Raises PerfOutputError on anything else."""
    if len(sep) != 1:
        raise ValueError("the separator is one character")
    lines: list[PerfLine] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip("\r\n")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            lines.append(_parse_line(line, sep))
        except _Refused as exc:
            shown = line if len(line) <= 120 else line[:117] + "..."
            raise PerfOutputError(f"{source} line {lineno} is not a perf stat CSV counter line ({exc}): {shown!r}") from None
    if not lines:
        raise PerfOutputError(f"{source} has no counter lines (perf wrote nothing it counted)")
    return PerfStat(tuple(lines))


class _Refused(Exception):
    pass


def _decimal_point(token: str, sep: str) -> str:
    """With a separator other than ',', a decimal comma is simply the number's own: '116,34' -> '116.34'."""
    if sep != "," and re.match(r"^[0-9]+,[0-9]+$", token):
        return token.replace(",", ".")
    return token


def _is_value(token: str) -> bool:
    return token in (NOT_SUPPORTED, NOT_COUNTED) or bool(_NUMBER.match(token))


def _parse_line(line: str, sep: str) -> PerfLine:
    tokens = line.split(sep)
    thread: str | None = None
    if tokens and not _is_value(_decimal_point(tokens[0], sep)):
        if not _THREAD.match(tokens[0]) or len(tokens) < 2 or not _is_value(_decimal_point(tokens[1], sep)):
            raise _Refused("no value field")
        thread = tokens.pop(0)
    if len(tokens) < 3:
        raise _Refused("fewer than 3 fields")

    raw_value = _decimal_point(tokens.pop(0), sep)
    # Decimal comma: the field after a value is a unit, which is never all digits.
    if sep == "," and _DIGITS.match(raw_value) and tokens and _DIGITS.match(tokens[0]):
        raw_value = f"{raw_value}.{tokens.pop(0)}"
    if len(tokens) < 2:
        raise _Refused("no unit and event fields")
    unit = tokens.pop(0).strip()
    event = tokens.pop(0).strip()
    if not _UNIT.match(unit):
        raise _Refused(f"bad unit {unit!r}")
    if not _EVENT.match(event):
        raise _Refused(f"bad event name {event!r}")

    runtime_ns: int | None = None
    percent: float | None = None
    if tokens:
        runtime = tokens.pop(0).strip()
        if runtime:
            if not _DIGITS.match(runtime):
                raise _Refused(f"bad runtime {runtime!r}")
            runtime_ns = int(runtime)
    if tokens:
        pct = _decimal_point(tokens.pop(0).strip(), sep)
        # perf prints the percentage with two decimals: "100,00" under a decimal-comma locale.
        if sep == "," and _DIGITS.match(pct) and tokens and re.match(r"^[0-9]{2}$", tokens[0]):
            pct = f"{pct}.{tokens.pop(0)}"
        if pct:
            if not _NUMBER.match(pct):
                raise _Refused(f"bad percentage {pct!r}")
            percent = float(pct)
    # The rest (derived metric and its unit) is perf's commentary; perf truncates it under some locales.

    if raw_value == NOT_SUPPORTED:
        return PerfLine(event, None, "not supported", unit, thread, runtime_ns, percent)
    if raw_value == NOT_COUNTED:
        return PerfLine(event, None, "not counted", unit, thread, runtime_ns, percent)
    value = float(raw_value)
    if event in _TIME_EVENT_TARGET and unit:
        if unit not in _TIME_UNIT_NS:
            raise _Refused(f"unknown time unit {unit!r} for {event}")
        target = _TIME_EVENT_TARGET[event]
        value = value * _TIME_UNIT_NS[unit] / _TIME_UNIT_NS[target]
        unit = target
    return PerfLine(event, value, "counted", unit, thread, runtime_ns, percent)
