"""How results reach the terminal: one JSON document on stdout with --json, else a readable view."""

from __future__ import annotations

import json
import sys
from typing import Any, Callable

from pydantic import BaseModel, ValidationError


def emit(result: BaseModel | dict[str, Any] | list[Any], as_json: bool, render: Callable[[], None]) -> None:
    if as_json:
        if isinstance(result, BaseModel):
            sys.stdout.write(result.model_dump_json(indent=2) + "\n")
        else:
            sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        render()


def describe_validation_error(exc: ValidationError) -> str:
    """All of pydantic's complaints on one line: 'jobs.1.id: reason; max_concurrency: reason'."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "document"
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"{where}: {msg}")
    return "; ".join(parts)
