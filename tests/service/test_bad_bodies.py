"""Bad bodies for POST /schedule: each answered 4xx with a clear reason, never 5xx (real HTTP)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from svc_support import Server

from env.plan.models import MAX_ARG_CHARS, MAX_JOBS

JSON = {"content-type": "application/json"}


def job(i: int) -> dict:
    return {"id": f"j{i}", "profile": "MG"}


def body(doc: object) -> bytes:
    return json.dumps(doc).encode()


# (name, raw body, expected status, a piece of the reason, the field named)
CASES = [
    ("malformed-json", b'{"jobs": [{"id": "MG"', 422, "malformed JSON", "body"),
    ("trailing-garbage", b'{"jobs": [{"id": "MG"}]} xyz', 422, "malformed JSON", "body"),
    ("not-utf8", b'{"jobs": [{"id": "\xff\xfe"}]}', 400, "not UTF-8", None),
    ("empty-body", b"", 422, "Field required", "body"),
    ("json-null", b"null", 422, "", "body"),
    ("json-array", b"[]", 422, "valid dictionary", "body"),
    ("json-string", b'"jobs"', 422, "valid dictionary", "body"),
    ("jobs-not-a-list", body({"jobs": "MG"}), 422, "valid list", "jobs"),
    ("job-not-an-object", body({"jobs": [1]}), 422, "", "jobs.0"),
    ("id-wrong-type", body({"jobs": [{"id": 5}]}), 422, "valid string", "jobs.0.id"),
    ("command-wrong-type", body({"jobs": [{"id": "a", "command": "ls -l"}]}), 422, "valid list", "jobs.0.command"),
    ("env-wrong-type", body({"jobs": [{"id": "a", "env": ["X=1"]}]}), 422, "valid dictionary", "jobs.0.env"),
    ("cmax-wrong-type", body({"jobs": [job(0)], "max_concurrency": "four"}), 422, "valid integer", "max_concurrency"),
    ("cmax-float", body({"jobs": [job(0)], "max_concurrency": 2.5}), 422, "", "max_concurrency"),
    ("cmax-bool-string", body({"jobs": [job(0)], "max_concurrency": [4]}), 422, "", "max_concurrency"),
    ("missing-id", body({"jobs": [{"profile": "MG"}]}), 422, "Field required", "jobs.0.id"),
    ("unknown-field", body({"jobs": [job(0)], "priority": 1}), 422, "Extra inputs", "priority"),
    ("unknown-job-field", body({"jobs": [{"id": "a", "shell": "rm -rf /"}]}), 422, "Extra inputs", "jobs.0.shell"),
    ("no-jobs", body({"jobs": []}), 422, "at least 1", "jobs"),
    ("duplicate-ids", body({"jobs": [job(0), job(1), job(0)]}), 422, "unique; repeated: j0", "body"),
    ("too-many-jobs", body({"jobs": [job(i) for i in range(10_000)]}), 422, f"at most {MAX_JOBS}", "jobs"),
    ("one-over-the-limit", body({"jobs": [job(i) for i in range(MAX_JOBS + 1)]}), 422, f"at most {MAX_JOBS}", "jobs"),
    ("long-id", body({"jobs": [{"id": "a" * 129}]}), 422, "pattern", "jobs.0.id"),
    ("very-long-id", body({"jobs": [{"id": "a" * 500_000}]}), 422, "pattern", "jobs.0.id"),
    ("long-profile", body({"jobs": [{"id": "a", "profile": "p" * 1000}]}), 422, "pattern", "jobs.0.profile"),
    ("long-arg", body({"jobs": [{"id": "a", "command": ["x" * (MAX_ARG_CHARS + 1)]}]}), 422, f"at most {MAX_ARG_CHARS}",
     "jobs.0.command.0"),
    ("many-args", body({"jobs": [{"id": "a", "command": ["x"] * 300}]}), 422, "at most 256", "jobs.0.command"),
    ("long-env-value", body({"jobs": [{"id": "a", "env": {"X": "v" * 5000}}]}), 422, "at most", "jobs.0.env.X"),
    ("bad-env-name", body({"jobs": [{"id": "a", "env": {"X=Y": "1"}}]}), 422, "pattern", "jobs.0.env.X=Y.[key]"),
    ("unicode-id", body({"jobs": [{"id": "mg-é"}]}), 422, "pattern", "jobs.0.id"),
    ("cjk-id", body({"jobs": [{"id": "作业"}]}), 422, "pattern", "jobs.0.id"),
    ("emoji-id", body({"jobs": [{"id": "\U0001f680"}]}), 422, "pattern", "jobs.0.id"),
    ("rtl-override-id", body({"jobs": [{"id": "a\u202eb"}]}), 422, "pattern", "jobs.0.id"),
    ("lone-surrogate-id", b'{"jobs": [{"id": "\\ud800"}]}', 422, "", "jobs.0.id"),
    ("nul-in-id", body({"jobs": [{"id": "a\u0000"}]}), 422, "pattern", "jobs.0.id"),
    ("nul-in-command", body({"jobs": [{"id": "a", "command": ["ls", "a\u0000b"]}]}), 422, "NUL", "jobs.0.command"),
    ("empty-command", body({"jobs": [{"id": "a", "command": []}]}), 422, "non-empty argv", "jobs.0.command"),
    ("newline-id", body({"jobs": [{"id": "a\n"}]}), 422, "pattern", "jobs.0.id"),
    ("path-id", body({"jobs": [{"id": "../../etc/passwd"}]}), 422, "pattern", "jobs.0.id"),
    ("negative-cmax", body({"jobs": [job(0)], "max_concurrency": -1}), 422, "greater than or equal to 1", "max_concurrency"),
    ("zero-cmax", body({"jobs": [job(0)], "max_concurrency": 0}), 422, "greater than or equal to 1", "max_concurrency"),
    ("huge-cmax", body({"jobs": [job(0)], "max_concurrency": 10**12}), 422, "less than or equal to 64", "max_concurrency"),
    ("enormous-cmax", b'{"jobs": [{"id": "a"}], "max_concurrency": 1' + b"0" * 5000 + b"}", 400, "digits", None),
    ("float-overflow-cmax", b'{"jobs": [{"id": "a"}], "max_concurrency": 1e999}', 422, "", "max_concurrency"),
    ("nan-cmax", b'{"jobs": [{"id": "a"}], "max_concurrency": NaN}', 422, "", "max_concurrency"),
    ("deeply-nested", b'{"jobs": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", 400, "nested too deeply", None),
    ("many-errors", body({"jobs": [{"id": f"bad id {i}"} for i in range(500)]}), 422, "more error(s)", "jobs.0.id"),
]


@pytest.mark.parametrize("name, raw, status, reason, field", CASES, ids=[c[0] for c in CASES])
def test_bad_body_is_4xx_with_a_reason(server: Server, name: str, raw: bytes, status: int | None, reason: str,
                                       field: str | None) -> None:
    r = server.client.post("/schedule", content=raw, headers=JSON)
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:500])
    if status is not None:
        assert r.status_code == status, r.text[:500]
    doc = r.json()
    assert "Traceback" not in r.text
    if isinstance(doc["detail"], list):
        assert doc["message"] and all(d["field"] and d["reason"] for d in doc["detail"])
        assert len(doc["detail"]) <= 20
        fields = [d["field"] for d in doc["detail"]]
    else:
        assert isinstance(doc["detail"], str) and doc["detail"]
        fields = []
    assert reason in r.text
    if field is not None:
        assert field in fields, fields
    assert len(r.content) < 20_000, "the answer must not echo a large input back"


def test_wrong_content_type_is_4xx(server: Server) -> None:
    r = server.client.post("/schedule", content=body({"jobs": [job(0)]}), headers={"content-type": "text/plain"})
    assert 400 <= r.status_code < 500 and r.json()["detail"]


def test_body_over_1mib_is_413(server: Server) -> None:
    big = body({"jobs": [{"id": "a", "command": ["x" * 4000] * 300}]})
    assert len(big) > 1 << 20
    r = server.client.post("/schedule", content=big, headers=JSON)
    assert r.status_code == 413 and "1 MiB" in r.json()["detail"]


def test_chunked_body_over_1mib_is_413(server: Server) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"jobs": [{"id": "a", "command": ["'
        for _ in range(300):
            yield b"x" * 4096
        yield b'"]}]}'

    r = server.client.post("/schedule", content=chunks(), headers=JSON)
    assert r.request.headers.get("transfer-encoding") == "chunked" and "content-length" not in r.request.headers
    assert r.status_code == 413 and "1 MiB" in r.json()["detail"]


def test_lying_content_length_over_the_limit_is_413_before_reading(server: Server) -> None:
    """A declared length over 1 MiB is refused before any of the body is read."""
    import socket

    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"POST /schedule HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 5000000\r\n\r\n{")
        head = sock.recv(4096).decode()
    assert head.startswith("HTTP/1.1 413"), head


def test_body_just_under_1mib_is_not_413(server: Server) -> None:
    filler = "x" * 4000
    doc = {"jobs": [{"id": f"j{i}", "command": ["prog", filler]} for i in range(250)]}
    raw = body(doc)
    assert 1_000_000 < len(raw) < 1 << 20
    r = server.client.post("/schedule", content=raw, headers=JSON)
    assert r.status_code != 413 and r.status_code < 500
