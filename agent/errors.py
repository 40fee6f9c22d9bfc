"""Errors of the agent package that reach the user as one line.

``agent`` imports nothing of ours, so this is its own class; it follows the project's convention
(``cli_exit_code``: the command line prints the message alone and exits with that code; 2 = bad input).
"""


class ModelFileError(Exception):
    """A model file cannot be used here: missing, corrupt, another format version, another node shape or
    another feature set. The message is one line that says which and what to do."""

    cli_exit_code = 2
