"""Property-based: schemathesis drives every operation of /openapi.json over real HTTP, valid and invalid
inputs alike, and no answer may be a 5xx. Bounded (examples per operation) so the run stays well under a minute.

And the profile store changes only through PUT and DELETE."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode
from svc_support import SIM_NODE, Server

from env.node.discover import node_id
from env.plan.models import Plan
from env.plan.stream_plan import parse_plan
from env.sim.nodes import load_node
from env.sim.profiles import simulated_profiles
from profiler.store import ProfileStore

EXAMPLES = int(os.environ.get("COSCHED_SERVICE_EXAMPLES", "40"))  # per operation and mode; raise it to hunt longer


OPERATIONS = [("POST", "/schedule"), ("POST", "/decide"), ("GET", "/healthz"), ("GET", "/node"), ("GET", "/model"), ("GET", "/profiles"),
              ("GET", "/profiles/{name}"), ("PUT", "/profiles/{name}"), ("DELETE", "/profiles/{name}")]


@pytest.fixture(scope="module")
def api_schema(server: Server):  # noqa: ANN201 - a schemathesis schema
    return schemathesis.openapi.from_url(f"{server.url}/openapi.json")


def test_the_run_covers_every_operation(api_schema) -> None:  # noqa: ANN001
    found = {(op.ok().method.upper(), op.ok().path) for op in api_schema.get_all_operations()}
    assert found == set(OPERATIONS)


# (schemathesis' own pytest plugin, schema.parametrize, does not run under pytest 9: its lazy fixture reads
# request.node._nodeid. Driving each operation's hypothesis strategy directly is the same run.)
WITH_INPUT = [op for op in OPERATIONS if op[0] != "GET" or "{" in op[1]]  # a negative case needs something to get wrong
RUNS = [(m, p, GenerationMode.POSITIVE) for m, p in OPERATIONS] + [(m, p, GenerationMode.NEGATIVE) for m, p in WITH_INPUT]


@pytest.mark.parametrize("method, path, mode", RUNS, ids=[f"{m}-{p}-{g}" for m, p, g in RUNS])
def test_no_input_gives_a_5xx(api_schema, method: str, path: str, mode: GenerationMode) -> None:  # noqa: ANN001
    operation = api_schema[path][method]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    def check(case: schemathesis.Case) -> None:
        response = case.call(timeout=30)
        case.validate_response(response, checks=[not_a_server_error])
        assert "Traceback" not in response.text

    check()


CATALOGUE = sorted(simulated_profiles(load_node(SIM_NODE)))
job_names = st.one_of(st.sampled_from(CATALOGUE), st.from_regex(r"[A-Za-z0-9._:-]{1,12}", fullmatch=True))


@st.composite
def windows(draw: st.DrawFn) -> dict:
    ids = draw(st.lists(st.from_regex(r"[A-Za-z0-9._:-]{1,16}", fullmatch=True), min_size=1, max_size=14, unique=True))
    jobs = []
    for i in ids:
        job: dict = {"id": i}
        if draw(st.booleans()):
            job["profile"] = draw(job_names)
        if draw(st.booleans()):
            job["command"] = ["/bin/true", i]
        jobs.append(job)
    doc: dict = {"jobs": jobs}
    if draw(st.booleans()):
        doc["max_concurrency"] = draw(st.integers(1, 64))
    return doc


@given(window=windows())
@settings(max_examples=EXAMPLES * 3 // 2, deadline=None, database=None, suppress_health_check=list(HealthCheck))
def test_valid_windows_get_a_plan_or_a_reason(server: Server, window: dict) -> None:
    """Valid windows mixing catalogue jobs and unknown ones: a complete plan, or a 422 that says why; never a 5xx."""
    r = server.client.post("/schedule", json=window)
    assert r.status_code in (200, 422), (r.status_code, r.text[:500])
    if r.status_code == 422:
        assert r.json()["detail"]
        return
    plan = parse_plan(r.json())  # the mode the node model predicts better: groups or continuous
    jobs = [j for g in plan.groups for j in g.jobs] if isinstance(plan, Plan) else plan.launches
    placed = sorted([j.id for j in jobs] + [e.id for e in plan.excluded])
    assert placed == sorted(j["id"] for j in window["jobs"])
    if isinstance(plan, Plan):
        assert all(len(g.jobs) <= window.get("max_concurrency", 4) for g in plan.groups)


def _store_state(home: Path) -> tuple[list[str], str]:
    profiles = ProfileStore().list()
    digest = hashlib.sha256()
    for path in sorted(home.glob("profiles.sqlite*")):
        digest.update(path.name.encode() + path.read_bytes())
    return [p.model_dump_json() for p in profiles], digest.hexdigest()


def test_only_put_and_delete_change_the_store(server: Server) -> None:
    c = server.client
    node = load_node(SIM_NODE)
    seeded = simulated_profiles(node)["EP"].model_copy(update={"name": "kept"})
    ProfileStore().put(seeded)
    before = _store_state(server.home)

    reads = [
        c.get("/healthz"), c.get("/node"), c.get("/model"), c.get("/profiles"), c.get("/profiles/kept"),
        c.get("/profiles/absent"), c.get("/openapi.json"),
        c.post("/schedule", json={"jobs": [{"id": "kept"}, {"id": "EP"}, {"id": "new-one", "command": ["true"]}]}),
        c.post("/schedule", json={"jobs": [{"id": "kept", "profile": "kept"}], "max_concurrency": 1}),
        c.post("/schedule", content=b"{"),
        # refused writes change nothing
        c.put("/profiles/kept", json={**seeded.model_dump(mode="json"), "node_id": "another-node", "wall_s": 5.0}),
        c.put("/profiles/other", json=seeded.model_dump(mode="json")),
        c.put("/profiles/kept", json={**seeded.model_dump(mode="json"), "exit_status": 1}),
        c.delete("/profiles/absent"),
        c.delete("/profiles/bad%20name"),
    ]
    assert all(r.status_code < 500 for r in reads), [r.status_code for r in reads]
    assert _store_state(server.home) == before

    assert c.put("/profiles/kept", json={**seeded.model_dump(mode="json"), "wall_s": 7.0}).status_code == 200
    assert ProfileStore().get("kept", node_id(node)).wall_s == 7.0
    assert c.delete("/profiles/kept").status_code == 200
    assert ProfileStore().get("kept", node_id(node)) is None
