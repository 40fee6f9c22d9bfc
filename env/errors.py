"""Errors that reach the user as one line.

Every package of ours that can fail on bad input or a failed run raises a class with a
``cli_exit_code`` attribute: the command line prints the message alone (no traceback) and exits with
that code: 2 for bad input, 1 for a failure while running. The service maps the same classes to 4xx.
"""


class CoschedError(Exception):
    cli_exit_code = 1


class InputError(CoschedError):
    """The user's input is wrong: the message names what and how to fix it."""

    cli_exit_code = 2


class RunError(CoschedError):
    """Something failed while running."""

    cli_exit_code = 1
