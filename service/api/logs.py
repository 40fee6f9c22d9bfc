"""The service's logs: JSON lines on stderr (``log_config``), one access line a request, bugs under an error id."""

from __future__ import annotations

import json
import logging
import traceback
import uuid
from typing import Any

access_log = logging.getLogger("cosched.access")
error_log = logging.getLogger("cosched.error")


class JsonLines(logging.Formatter):
    """One JSON object a line: time, level, logger, message, and the record's ``fields``."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {"ts": round(record.created, 3), "level": record.levelname.lower(), "logger": record.name,
                               "msg": record.getMessage()}
        doc.update(getattr(record, "fields", {}))
        if record.exc_info:
            doc["traceback"] = "".join(traceback.format_exception(*record.exc_info))
        return json.dumps(doc, default=str)


def log_config(level: str = "info") -> dict[str, Any]:
    """logging.dictConfig for uvicorn and us: JSON lines on stderr, uvicorn's own access log off (ours replaces it)."""
    handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonLines}},
        "handlers": {"stderr": handler},
        "loggers": {
            "uvicorn": {"handlers": ["stderr"], "level": level.upper(), "propagate": False},
            "uvicorn.error": {"level": level.upper()},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
            "cosched": {"handlers": ["stderr"], "level": level.upper(), "propagate": False},
        },
    }


def bug_report(exc: BaseException, method: str, path: str) -> dict[str, str]:
    """Log an unexpected exception (a bug) with its traceback under a fresh id; the client's answer names only the id."""
    error_id = uuid.uuid4().hex[:12]
    error_log.error("unexpected error (a bug)", exc_info=exc, extra={"fields": {"error_id": error_id, "method": method, "path": path}})
    return {"detail": f"internal error {error_id}: this is a bug in cosched, not in your request; "
                      "it was logged with the request's method and path"}
