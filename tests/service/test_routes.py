"""Every route of the service through real HTTP (httpx against uvicorn on loopback)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from env.node.discover import node_id
from env.plan.stream_plan import GroupsPlan, parse_plan
from env.sim.nodes import load_node
from env.sim.profiles import simulated_profiles
from profiler.models import Profile
from profiler.store import ProfileStore
from svc_support import SIM_NODE, Server

ROOT = Path(__file__).resolve().parents[2]
COSCHED = [sys.executable, "-m", "service.cli"]


def cli_json(*args: str, env: dict[str, str] | None = None) -> object:
    out = subprocess.run([*COSCHED, *args, "--json"], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def a_profile(name: str = "MG", **update: object) -> Profile:
    node = load_node(SIM_NODE)
    base = simulated_profiles(node)["MG"]
    return base.model_copy(update={"name": name, **update})


def test_healthz(server: Server) -> None:
    r = server.client.get("/healthz")
    assert r.status_code == 200 and r.json() == {"status": "ok"}


def test_node_is_what_cosched_node_prints(server: Server) -> None:
    r = server.client.get("/node")
    assert r.status_code == 200
    assert r.json() == cli_json("node", "--node", SIM_NODE)


def test_model_says_which_policy_plans(server: Server) -> None:
    r = server.client.get("/model")
    assert r.status_code == 200
    doc = r.json()
    if doc["policy"] == "agent-search":  # a model ships for the node (and the simulated node scores its plans)
        assert doc["model"]["shipped"] is True and doc["model"]["trained_for"]["name"] == SIM_NODE
    else:
        assert doc["policy"] == "greedy" and doc["model"] is None and "greedy" in doc["reason"]


@pytest.mark.parametrize("ships", [False, True])
def test_model_is_the_shipped_one_or_none(ships: bool, tmp_path: Path, cosched_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from svc_support import running_app

    models = tmp_path / "models"
    models.mkdir()
    if ships:
        write_tiny_model(models / "reference.npz")
    monkeypatch.setenv("COSCHED_MODELS_DIR", str(models))
    with running_app(SIM_NODE, home=cosched_home) as s:
        doc = s.client.get("/model").json()
        plan = s.client.post("/schedule", json={"jobs": [{"id": "MG"}, {"id": "EP"}]}).json()
    if ships:
        assert doc["policy"] == "agent-search" and doc["model"]["shipped"] is True and doc["model"]["path"].endswith("reference.npz")
        # agent-search's plan, or the best baseline's when it is predicted below time sharing (a random tiny model)
        assert "agent-search" in (plan["policy"], plan["requested_policy"]) and plan["model"]["id"] == doc["model"]["id"]
    else:
        assert doc == {"policy": "greedy", "model": None, "reason": doc["reason"]} and SIM_NODE in doc["reason"]
        assert "greedy" in (plan["policy"], plan["requested_policy"]) and plan["model"] is None


def test_docs_and_openapi(server: Server) -> None:
    spec = server.client.get("/openapi.json")
    assert spec.status_code == 200
    paths = spec.json()["paths"]
    assert {"/schedule", "/healthz", "/node", "/model", "/profiles", "/profiles/{name}"} <= set(paths)
    assert set(paths["/profiles/{name}"]) == {"get", "put", "delete"}
    body = paths["/schedule"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body["$ref"].endswith("/Window")
    window = spec.json()["components"]["schemas"]["Window"]
    assert set(window["properties"]["mode"]["anyOf"][0]["enum"]) == {"groups", "continuous"}  # the body may say it
    assert "/decide" in paths
    docs = server.client.get("/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()


def test_unknown_route_and_method_are_4xx(server: Server) -> None:
    assert server.client.get("/nope").status_code == 404
    assert server.client.get("/schedule").status_code == 405
    assert server.client.post("/healthz").status_code == 405


def test_profiles_put_get_list_delete(server: Server) -> None:
    c = server.client
    nid = node_id(load_node(SIM_NODE))
    listed = c.get("/profiles")
    assert listed.status_code == 200
    assert listed.json()["node_id"] == nid and all(p["name"] != "crud-1" for p in listed.json()["profiles"])

    profile = a_profile("crud-1")
    assert c.get("/profiles/crud-1").status_code == 404
    created = c.put("/profiles/crud-1", content=profile.model_dump_json(), headers={"content-type": "application/json"})
    assert created.status_code == 201, created.text
    assert Profile.model_validate(created.json()) == profile
    got = c.get("/profiles/crud-1")
    assert got.status_code == 200 and Profile.model_validate(got.json()) == profile
    assert "crud-1" in [p["name"] for p in c.get("/profiles").json()["profiles"]]
    # the store is the one `cosched profiles` reads: same file, same node key
    assert ProfileStore().get("crud-1", nid) == profile

    replaced = c.put("/profiles/crud-1", json=a_profile("crud-1", wall_s=99.0).model_dump(mode="json"))
    assert replaced.status_code == 200 and replaced.json()["wall_s"] == 99.0

    deleted = c.delete("/profiles/crud-1")
    assert deleted.status_code == 200 and deleted.json() == {"deleted": "crud-1", "node_id": nid}
    assert c.get("/profiles/crud-1").status_code == 404
    gone = c.delete("/profiles/crud-1")
    assert gone.status_code == 404 and "no profile named 'crud-1'" in gone.json()["detail"]


@pytest.mark.parametrize(
    "path, doc, field, reason",
    [
        ("other", a_profile("crud-2").model_dump(mode="json"), "name", "not the name in the path"),
        ("crud-2", a_profile("crud-2", node_id="elsewhere").model_dump(mode="json"), "node_id", "stores profiles of node"),
        ("crud-2", {**a_profile("crud-2").model_dump(mode="json"), "wall_s": 1e999}, "wall_s", "finite"),
        ("crud-2", {**a_profile("crud-2").model_dump(mode="json"), "exit_status": 3}, None, "failed run"),
        ("crud-2", {**a_profile("crud-2").model_dump(mode="json"), "colour": "red"}, "colour", "Extra inputs"),
        ("crud-2", {"name": "crud-2"}, "node_id", "Field required"),
    ],
    ids=["name-mismatch", "other-node", "infinite-wall", "failed-run", "unknown-field", "missing-fields"],
)
def test_put_refuses_bad_profiles(server: Server, path: str, doc: dict, field: str | None, reason: str) -> None:
    body = json.dumps(doc).replace("Infinity", "1e999")
    r = server.client.put(f"/profiles/{path}", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    text = r.text
    assert reason in text
    if field:
        assert any(d["field"] == field for d in r.json()["detail"])
    assert server.client.get(f"/profiles/{path}").status_code == 404


@pytest.mark.parametrize("name", ["a b", "x" * 129, "é", "..%2F..%2Fetc", "a%00b"])
def test_profile_names_are_checked(server: Server, name: str) -> None:
    for method in ("GET", "DELETE"):
        r = server.client.request(method, f"/profiles/{name}")
        assert 400 <= r.status_code < 500, (method, name, r.status_code)
    assert server.client.put(f"/profiles/{name}", json=a_profile().model_dump(mode="json")).status_code in (404, 422)


def test_empty_profile_name_is_not_a_profile(server: Server) -> None:
    for method in ("GET", "DELETE", "PUT"):
        r = server.client.request(method, "/profiles/")
        assert 300 <= r.status_code < 500, (method, r.status_code)  # a redirect to /profiles, or 404/405


def test_schedule_never_executes(server: Server, tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    window = {"jobs": [{"id": "MG", "command": ["/usr/bin/touch", str(marker)]},
                       {"id": "EP", "command": ["/bin/sh", "-c", f"touch {marker}"]}]}
    r = server.client.post("/schedule", json=window)
    assert r.status_code < 500
    assert not marker.exists()


def test_schedule_returns_a_plan(server: Server, planning: None) -> None:
    window = {"jobs": [{"id": f"j{i}", "profile": p} for i, p in enumerate(["MG", "EP", "CG", "FT", "lu_cb", "fft"])],
              "max_concurrency": 2, "mode": "groups"}
    r = server.client.post("/schedule", json=window)
    assert r.status_code == 200, r.text
    plan = GroupsPlan.model_validate(r.json())
    assert plan.node.name == SIM_NODE and server.client.get("/model").json()["policy"] in (plan.policy, plan.requested_policy)
    assert plan.max_concurrency == 2
    placed = [j.id for g in plan.groups for j in g.jobs] + [e.id for e in plan.excluded]
    assert sorted(placed) == sorted(j["id"] for j in window["jobs"])


def test_unknown_profiles_are_excluded_not_errors(server: Server, planning: None) -> None:
    r = server.client.post("/schedule", json={"jobs": [{"id": "MG"}, {"id": "never-profiled"}, {"id": "x", "profile": "nope"}]})
    assert r.status_code == 200, r.text
    excluded = {e["id"]: e["reason"] for e in r.json()["excluded"]}
    assert set(excluded) == {"never-profiled", "x"}
    assert all(reason for reason in excluded.values())


def _schedule_verb_missing() -> str | None:
    from service.commands import VERBS

    names = {register.__module__.rsplit(".", 1)[-1] for register in VERBS}
    return None if "schedule" in names else "`cosched schedule` does not exist yet (no service/commands/schedule.py in VERBS)"


def test_service_plan_equals_cosched_schedule(server: Server, planning: None, tmp_path: Path) -> None:
    """Both with their defaults (the model that ships for the node, else greedy): the same plan."""
    why = _schedule_verb_missing()
    if why:
        pytest.skip(why)
    window = {"jobs": [{"id": p} for p in ["MG", "EP", "CG", "FT", "IS", "unknown-one"]], "max_concurrency": 3}
    path = tmp_path / "window.json"
    path.write_text(json.dumps(window))
    printed = cli_json("schedule", str(path), "--node", SIM_NODE)
    served = server.client.post("/schedule", json=window)
    assert served.status_code == 200, served.text
    assert served.json() == printed
    assert served.content == parse_plan(printed).model_dump_json().encode()  # the same bytes, compact (either mode)
    assert server.client.get("/model").json()["policy"] in (printed["policy"], printed["requested_policy"])


def test_service_plan_equals_cosched_schedule_with_a_model(planning: None, tmp_path: Path, cosched_home: Path) -> None:
    from svc_support import running_app

    why = _schedule_verb_missing()
    if why:
        pytest.skip(why)
    model = tmp_path / "m.npz"
    write_tiny_model(model)
    window = {"jobs": [{"id": p, "command": [f"./{p}"]} for p in ["MG", "EP", "lu_cb", "FT", "nope"]], "max_concurrency": 2}
    path = tmp_path / "window.json"
    path.write_text(json.dumps(window))
    # groups, asked for: the model plans them (by default the node model may find continuous decisions shorter)
    printed = cli_json("schedule", str(path), "--node", SIM_NODE, "--model", str(model), "--mode", "groups")
    with running_app(SIM_NODE, model_path=str(model), home=cosched_home) as s:
        served = s.client.post("/schedule", json={**window, "mode": "groups"})
    assert served.status_code == 200, served.text
    assert served.json() == printed and "agent-search" in (printed["policy"], printed["requested_policy"])


# -- a model file -----------------------------------------------------------------------------------


def write_tiny_model(path: Path, node_name: str = SIM_NODE) -> str:
    """A tiny untrained ``cosched-model/2`` file (``model_support.write_tiny_set_model``); its model id."""
    from model_support import write_tiny_set_model

    from agent.modelfile import load_set_model

    return load_set_model(write_tiny_set_model(path, node_name)).meta.model_id


def test_model_route_describes_a_set_model(tiny_set_model: Path, cosched_home: Path) -> None:
    """A ``cosched-model/2`` file (no W, no observation size): GET /model says what it is, as the same document."""
    from svc_support import running_app

    from agent.modelfile import load_set_model
    from service.api.served import ModelDescription

    meta = load_set_model(tiny_set_model).meta
    with running_app(SIM_NODE, model_path=str(tiny_set_model), home=cosched_home) as s:
        r = s.client.get("/model")
        window = {"jobs": [{"id": "MG"}, {"id": "EP"}, {"id": "CG"}], "max_concurrency": 2}
        served = s.client.post("/schedule", json={**window, "mode": "groups"}).content  # groups: the model plans them
        schema = s.client.get("/openapi.json").json()
    path = cosched_home / "w.json"
    path.write_text(json.dumps(window))
    out = subprocess.run([*COSCHED, "schedule", str(path), "--node", SIM_NODE, "--model", str(tiny_set_model), "--json",
                          "--mode", "groups"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120, env={**os.environ, "COSCHED_HOME": str(cosched_home)})
    assert out.returncode == 0, out.stderr
    assert json.loads(served) == json.loads(out.stdout)  # the service and the CLI: the same plan document
    plan = json.loads(served)
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    doc = r.json()
    assert ModelDescription.model_validate(doc).model_dump(mode="json", exclude={"reason"}) == doc
    assert doc["policy"] == "agent-search" and "reason" not in doc
    m = doc["model"]
    assert m["id"] == meta.model_id and m["format"] == "cosched-model/2" and m["path"] == str(tiny_set_model)
    assert m["window_size"] == 32 and m["max_concurrency"] == 4 and m["trained_for"]["name"] == SIM_NODE
    assert m["network"] == {"kind": "set-encoder", "architecture": meta.architecture, "shape": meta.net, "observation": "set-v1"}
    assert m["training"] == {"steps": 0} and m["features"]["names"]
    assert "agent-search" in (plan["policy"], plan["requested_policy"]) and plan["model"]["id"] == meta.model_id
    ref = schema["paths"]["/model"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    assert ref.endswith("/ModelDescription")


@pytest.mark.parametrize("kind", ["missing", "corrupt", "other-node", "old-format"])
def test_serve_refuses_an_unusable_model(tmp_path: Path, kind: str) -> None:
    from model_support import write_old_mlp_model

    path = tmp_path / "m.npz"
    if kind == "corrupt":
        path.write_bytes(b"not a zip")
    elif kind == "other-node":
        write_tiny_model(path, "sim:reference")
    elif kind == "old-format":
        write_old_mlp_model(path)
    out = subprocess.run([*COSCHED, "serve", "--port", "1", "--node", "local" if kind == "other-node" else SIM_NODE,
                          "--model", str(path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    if kind == "other-node" and len(load_node("local").cpus) == len(load_node(SIM_NODE).cpus):
        pytest.skip("this machine has the reference node's shape")
    assert out.returncode == 2, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "model" in out.stderr
    if kind == "old-format":
        assert "cosched-model/1" in out.stderr and "cosched train" in out.stderr and "Traceback" not in out.stderr


# -- a bug is not hidden, and not leaked ------------------------------------------------------------


def test_a_bug_is_a_500_without_traceback_and_logged(monkeypatch: pytest.MonkeyPatch, cosched_home: Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    """No input may reach this path (the bad-body and property tests check that); if a bug does, the client gets
    a JSON 500 with an error id and nothing of the internals, and the log gets the traceback under that id."""
    import service.planning
    from svc_support import running_app

    def broken(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("secret internals")

    monkeypatch.setattr(service.planning, "plan_window", broken)
    with caplog.at_level("ERROR", logger="cosched.error"), running_app(SIM_NODE, home=cosched_home) as s:
        r = s.client.post("/schedule", json={"jobs": [{"id": "MG"}]})
        assert s.client.get("/healthz").status_code == 200  # the service lives on
    assert r.status_code == 500
    detail = r.json()["detail"]
    assert detail.startswith("internal error ") and "bug" in detail
    assert "secret internals" not in r.text and "Traceback" not in r.text and "ZeroDivisionError" not in r.text
    error_id = detail.split()[2].rstrip(":")
    logged = [rec for rec in caplog.records if getattr(rec, "fields", {}).get("error_id") == error_id]
    assert logged and logged[0].exc_info is not None


def test_our_errors_map_to_their_status(monkeypatch: pytest.MonkeyPatch, cosched_home: Path) -> None:
    import service.planning
    from env.errors import InputError, RunError
    from profiler.errors import StoreError
    from svc_support import running_app

    raised: list[Exception] = []

    def failing(*args: object, **kwargs: object) -> None:
        raise raised[-1]

    monkeypatch.setattr(service.planning, "plan_window", failing)
    with running_app(SIM_NODE, home=cosched_home) as s:
        for exc, status in [(InputError("max_concurrency 9 is over the model's limit 4"), 422),
                            (StoreError("the profile store is locked"), 503), (RunError("node busy"), 503)]:
            raised.append(exc)
            r = s.client.post("/schedule", json={"jobs": [{"id": "MG"}]})
            assert r.status_code == status and r.json() == {"detail": str(exc)}


def test_the_search_budget_reaches_the_served_plans(tmp_path: Path) -> None:
    """`cosched serve --search-budget N` (create_app's search_budget): POST /schedule's agent-search plans say
    budget N; a bad budget, or one for a service without a model, is refused before serving, in one line."""
    from env.errors import InputError
    from service.api.main import create_app
    from svc_support import running

    window = {"jobs": [{"id": n} for n in ("EP", "MG", "CG", "fft")], "max_concurrency": 2, "mode": "groups"}
    for budget in (3, 7):
        with running(create_app(SIM_NODE, search_budget=budget), tmp_path) as s:
            plan = s.client.post("/schedule", json=window).json()
        if plan["policy"] == "agent-search":
            assert plan["search"]["budget"] == budget and plan["search"]["rollouts"] <= budget
        else:  # the guard replaced it: the plan still says what was asked and why
            assert plan["requested_policy"] == "agent-search" and plan["fallback_reason"]
    with pytest.raises(InputError, match="whole number of rollouts"):
        create_app(SIM_NODE, search_budget=0)
    with pytest.raises(InputError, match="--search-budget is for the agent-search policy"):
        create_app("local", search_budget=4)
