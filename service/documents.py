"""Reading the user's JSON documents: one clear line for every way a file can be wrong."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from env.errors import InputError
from env.plan.models import Plan, Window
from env.plan.stream_plan import ContinuousPlan, parse_plan
from service.output import describe_validation_error


def read_json(path: str | Path) -> Any:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{p} is a directory, not a JSON file") from None
    except UnicodeDecodeError:
        raise InputError(f"{p} is not UTF-8 text") from None
    except OSError as exc:
        raise InputError(f"cannot read {p}: {exc.strerror}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{p} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None


def read_window_or_plan(path: str | Path) -> Window | Plan | ContinuousPlan:
    """A plan has "groups" (or "launches": a continuous plan); a window has "jobs"."""
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise InputError(f"{path}: expected a JSON object (a window with \"jobs\", a plan with \"groups\" or a "
                         "continuous plan with \"launches\")")
    continuous = doc.get("mode") == "continuous" or "launches" in doc
    what = "continuous plan" if continuous else "plan" if "groups" in doc else "window"
    try:
        return parse_plan(doc) if what != "window" else Window.model_validate(doc)
    except ValidationError as exc:
        raise InputError(f"{path} is not a valid {what}: {describe_validation_error(exc)}") from None


def read_window(path: str | Path) -> Window:
    doc = read_window_or_plan(path)
    if not isinstance(doc, Window):
        raise InputError(f"{path} is a plan; this command takes a window (a JSON object with \"jobs\")")
    return doc
