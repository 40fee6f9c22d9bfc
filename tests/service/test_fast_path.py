"""POST /schedule's fast path (service.app.ScheduleFastPath) answers exactly as the FastAPI route (real HTTP).

The fast path takes ``Content-Type: application/json`` exactly; ``application/json; charset=utf-8`` goes through
the route (FastAPI's JSON parsing and validation), so the same body sent both ways must get the same bytes back.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from svc_support import SIM_NODE, Server, running
from test_bad_bodies import CASES

from service.app import create_app

FAST = {"content-type": "application/json"}
ROUTED = {"content-type": "application/json; charset=utf-8"}

GOOD = [
    {"jobs": [{"id": "MG"}, {"id": "EP"}]},
    {"jobs": [{"id": f"j{i}", "profile": p, "command": [f"./{p}", "-n", str(i)], "env": {"OMP_NUM_THREADS": "4"}}
              for i, p in enumerate(["MG", "EP", "CG", "FT", "IS", "LU"])], "max_concurrency": 3},
    {"jobs": [{"id": "MG"}, {"id": "never-profiled"}, {"id": "x", "profile": "nope"}]},  # excluded jobs
    {"jobs": [{"id": f"j{i}", "profile": "MG"} for i in range(40)], "max_concurrency": 2},  # planned off the event loop
    {"jobs": [{"id": "MG"}], "max_concurrency": 64},  # a planning error (above the model's Cmax) or a plan
]


def both(server: Server, raw: bytes) -> tuple[tuple[int, bytes], tuple[int, bytes]]:
    fast = server.client.post("/schedule", content=raw, headers=FAST)
    routed = server.client.post("/schedule", content=raw, headers=ROUTED)
    return (fast.status_code, fast.content), (routed.status_code, routed.content)


@pytest.mark.parametrize("doc", GOOD, ids=range(len(GOOD)))
def test_fast_path_plans_as_the_route(server: Server, planning: None, doc: dict) -> None:
    fast, routed = both(server, json.dumps(doc).encode())
    assert fast == routed
    assert fast[0] in (200, 422)


def test_duplicate_keys_and_bom_as_the_route(server: Server, planning: None) -> None:
    for raw in (b'{"jobs": [{"id": "a"}], "jobs": [{"id": "MG"}]}', b'\xef\xbb\xbf{"jobs": [{"id": "MG"}]}',
                b' {"jobs": [{"id": "MG"}], "max_concurrency": 2.0}\n', b'{"jobs": [{"id": "MG"}], "max_concurrency": "2"}'):
        fast, routed = both(server, raw)
        assert fast == routed, raw


@pytest.mark.parametrize("name, raw", [(c[0], c[1]) for c in CASES], ids=[c[0] for c in CASES])
def test_bad_bodies_answered_as_the_route(server: Server, name: str, raw: bytes) -> None:
    fast, routed = both(server, raw)
    assert fast == routed


def test_the_fast_path_is_taken_only_for_json(cosched_home: Path, planning: None) -> None:
    """Valid windows sent as application/json are planned by the fast path; others reach the route."""
    app = create_app(SIM_NODE)
    fast = next(m.kwargs["fast_schedule"] for m in app.user_middleware if "fast_schedule" in m.kwargs)
    calls = []
    plan = fast.plan
    fast.plan = lambda window: calls.append(window) or plan(window)
    with running(app, cosched_home) as s:
        r = s.client.post("/schedule", content=b'{"jobs": [{"id": "MG"}]}', headers=FAST)
        assert r.status_code == 200 and r.headers["content-type"] == "application/json"
        assert int(r.headers["content-length"]) == len(r.content) and len(calls) == 1
        assert s.client.post("/schedule", content=b'{"jobs": [{"id": "MG"}]}', headers=ROUTED).content == r.content
        assert s.client.post("/schedule", content=b'{"jobs": [{"id": "a b"}]}', headers=FAST).status_code == 422
        assert len(calls) == 1
