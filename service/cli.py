"""The ``cosched`` command line: one verb a module under ``service/commands``.

Errors: any exception carrying ``cli_exit_code`` (ours) becomes one line on stderr and that exit
status; pydantic validation errors are bad input (2). ``--debug`` shows tracebacks.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn, Sequence

from pydantic import ValidationError

from service.commands import VERBS
from service.output import describe_validation_error


class _Parser(argparse.ArgumentParser):
    """argparse, but bad usage is one line (with a pointer to --help) and exit 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message} (see '{self.prog} --help')\n")
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="cosched", description="An RL co-scheduler for HPC nodes.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser)
    sub.required = True
    for register in VERBS:
        register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except ValidationError as exc:
        if args.debug:
            raise
        print(f"cosched {args.verb}: error: {describe_validation_error(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"cosched {args.verb}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - ours carry cli_exit_code; anything else is a bug
        code = getattr(exc, "cli_exit_code", None)
        if code is None or args.debug:
            raise
        print(f"cosched {args.verb}: error: {exc}", file=sys.stderr)
        return int(code)


if __name__ == "__main__":
    sys.exit(main())
