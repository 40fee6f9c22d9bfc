"""Errors of the profiler that reach the user as one line.

``cli_exit_code`` follows the project convention: 2 for bad input, 1 for a failure while running.
The command line prints the message alone and exits with that code; the service maps them to 4xx.
"""

from __future__ import annotations


class ProfilerError(Exception):
    """Base of every profiler error."""

    cli_exit_code = 1


class ProfilerInputError(ProfilerError):
    """The caller's input is wrong (bad name, command not found, unknown profile, wrong feature set)."""

    cli_exit_code = 2


class ProfilerRunError(ProfilerError):
    """Something failed while running: perf, the profiled command, the store."""

    cli_exit_code = 1


class PerfOutputError(ProfilerRunError):
    """perf's CSV output is not what perf writes: refused, never guessed."""


class ProfileNotFoundError(ProfilerInputError):
    """No stored profile under that name for that node."""


class StoreError(ProfilerRunError):
    """The profile store cannot be opened, read or written (unwritable, corrupt, newer schema)."""


class StoreLockedError(StoreError):
    """Another writer held the profile store past the busy timeout."""
