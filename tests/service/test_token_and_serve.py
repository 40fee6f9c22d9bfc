"""The token rule, `cosched serve` as a process (bind refusal, access log, graceful shutdown), and a light import path."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from svc_support import SIM_NODE, TOKEN, Server

from env.errors import InputError
from service.commands.serve import check_bind, is_loopback, server_backends

ROOT = Path(__file__).resolve().parents[2]

PROTECTED = [("GET", "/node"), ("GET", "/model"), ("GET", "/profiles"), ("GET", "/profiles/MG"), ("DELETE", "/profiles/MG"),
             ("PUT", "/profiles/MG"), ("POST", "/schedule"), ("GET", "/openapi.json"), ("GET", "/docs"), ("GET", "/nope")]


# -- the token ------------------------------------------------------------------------------------


def test_healthz_is_open_with_a_token(token_server: Server) -> None:
    r = token_server.client.get("/healthz")
    assert r.status_code == 200 and r.json() == {"status": "ok"}


@pytest.mark.parametrize("method, path", PROTECTED)
@pytest.mark.parametrize("auth", [None, "Bearer wrong", f"Bearer {TOKEN}x", f"bearer {TOKEN}", TOKEN, f"Basic {TOKEN}", "Bearer", f"Bearer  {TOKEN}"])
def test_every_other_route_needs_the_bearer_token(token_server: Server, method: str, path: str, auth: str | None) -> None:
    headers = {"authorization": auth} if auth is not None else {}
    r = token_server.client.request(method, path, headers=headers, json={"jobs": [{"id": "MG"}]} if method in ("POST", "PUT") else None)
    assert r.status_code == 401, (method, path, auth, r.status_code)
    assert r.headers["www-authenticate"] == "Bearer" and "bearer token" in r.json()["detail"]


def test_the_right_token_opens_every_route(token_server: Server) -> None:
    c, h = token_server.client, {"authorization": f"Bearer {TOKEN}"}
    assert c.get("/node", headers=h).status_code == 200
    assert c.get("/model", headers=h).status_code == 200
    assert c.get("/profiles", headers=h).status_code == 200
    assert c.get("/openapi.json", headers=h).status_code == 200
    assert c.get("/profiles/not-there", headers=h).status_code == 404
    assert c.post("/schedule", headers=h, json={"jobs": [{"id": "a b"}]}).status_code == 422


def test_unauthorized_big_body_is_401_not_read(token_server: Server) -> None:
    r = token_server.client.post("/schedule", content=b"x" * (2 << 20), headers={"content-type": "application/json"})
    assert r.status_code == 401


@pytest.mark.parametrize("host, loop", [("127.0.0.1", True), ("127.0.0.53", True), ("::1", True), ("[::1]", True),
                                        ("localhost", True), ("0.0.0.0", False), ("::", False), ("10.1.2.3", False),
                                        ("example.org", False), ("", False)])
def test_loopback_detection(host: str, loop: bool) -> None:
    assert is_loopback(host) is loop


def test_non_loopback_needs_a_token() -> None:
    with pytest.raises(InputError, match="COSCHED_TOKEN"):
        check_bind("0.0.0.0", None)
    with pytest.raises(InputError):
        check_bind("0.0.0.0", "")
    check_bind("0.0.0.0", "secret")
    check_bind("127.0.0.1", None)


# -- cosched serve as a process -------------------------------------------------------------------


def serve_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "COSCHED_TOKEN"}
    env.update(COSCHED_HOME=str(home), **extra)
    return env


def test_serve_refuses_a_public_address_without_token(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "service.cli", "serve", "--host", "0.0.0.0", "--port", "1"], cwd=ROOT,
                         env=serve_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "COSCHED_TOKEN" in lines[0] and "0.0.0.0" in lines[0], out.stderr
    assert out.stdout == ""


def test_serve_refuses_an_unknown_node(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "service.cli", "serve", "--node", "sim:nowhere", "--port", "1"], cwd=ROOT,
                         env=serve_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and "sim:nowhere" in out.stderr


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_serve(home: Path, *args: str, **env: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "service.cli", "serve", "--port", str(port), "--node", SIM_NODE, *args],
                            cwd=ROOT, env=serve_env(home, **env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"cosched serve exited {proc.returncode}: {proc.stderr.read()}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.05)
    proc.kill()
    raise AssertionError("cosched serve never became healthy")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_logs_json_and_stops_gracefully(tmp_path: Path, sig: signal.Signals) -> None:
    proc, url = start_serve(tmp_path, COSCHED_TOKEN=TOKEN)
    try:
        assert httpx.get(f"{url}/node", timeout=10).status_code == 401
        assert httpx.get(f"{url}/node", headers={"authorization": f"Bearer {TOKEN}"}, timeout=10).status_code == 200
        r = httpx.post(f"{url}/schedule", content=b"{", headers={"authorization": f"Bearer {TOKEN}", "content-type": "application/json"},
                       timeout=10)
        assert r.status_code == 422
    finally:
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out == ""
    records = [json.loads(line) for line in err.splitlines()]  # every line of the log is JSON
    access = [r for r in records if r["logger"] == "cosched.access"]
    assert {"method": "GET", "path": "/node", "status": 401} in [{k: a[k] for k in ("method", "path", "status")} for a in access]
    assert any(a["path"] == "/schedule" and a["status"] == 422 and a["duration_ms"] >= 0 for a in access)
    assert records[-1]["msg"] == "stopped" and records[-1]["by"] == sig.name


def test_serve_uses_the_c_parser_and_loop_when_installed(tmp_path: Path) -> None:
    import importlib.util

    proc, url = start_serve(tmp_path)
    try:
        assert httpx.post(f"{url}/schedule", json={"jobs": [{"id": "MG"}]}, timeout=10).status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    starting = [r for r in map(json.loads, err.splitlines()) if r["msg"] == "starting"]
    assert len(starting) == 1 and starting[0]["workers"] == 1
    want_http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    want_loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    assert (starting[0]["http"], starting[0]["loop"]) == (want_http, want_loop)


def test_serve_falls_back_to_pure_python_backends(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("httptools", "uvloop") else real(name, *a))
    assert server_backends() == {"http": "h11", "loop": "asyncio"}


def test_serve_with_two_workers(tmp_path: Path) -> None:
    proc, url = start_serve(tmp_path, "--workers", "2")
    try:
        from env.sim.nodes import load_node
        from service.planning import default_policy

        # 'agent' when a model ships for the node (training/models), else the baseline default
        assert httpx.get(f"{url}/model", timeout=10).json()["policy"] == default_policy(load_node(SIM_NODE))
        assert httpx.get(f"{url}/node", timeout=10).json()["name"] == SIM_NODE
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == 0


# -- light ----------------------------------------------------------------------------------------


def test_the_service_import_path_is_light() -> None:
    """Start-up needs neither torch, the training stack, matplotlib nor scikit-learn (time to ready, memory)."""
    code = (
        "import sys, service.cli, service.commands.serve, service.api.main\n"
        "service.api.main.create_app('sim:reference')\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'matplotlib', 'sklearn', 'scipy')\n"
        "               or (m.startswith('training.') and m not in ('training.policies', 'training.registry', 'training.search_policy')))  # numpy agent policies are light\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"heavy modules imported: {out.stdout.strip()}"
