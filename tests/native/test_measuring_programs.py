"""The node model's measuring programs, run for real and briefly: cosched-bubble, cosched-probe,
cosched-membench (their kernels are unit-tested in C: native/tests/test_memkern.c)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

BUILD = Path(__file__).resolve().parents[2] / "native" / "build"
BUBBLE, PROBE, MEMBENCH = (BUILD / n for n in ("cosched-bubble", "cosched-probe", "cosched-membench"))


@pytest.fixture(autouse=True, scope="module")
def _built() -> None:
    missing = [p for p in (BUBBLE, PROBE, MEMBENCH) if not p.exists()]
    assert not missing, f"native build missing {missing}: run `make -C native` first"


def _json(out: str) -> dict:
    lines = out.strip().splitlines()
    assert len(lines) == 1, out
    return json.loads(lines[0])


def test_probe_prints_its_own_time_and_fixed_work() -> None:
    a = _json(subprocess.run([PROBE, "--rounds", "2", "--ws-mb", "1"], capture_output=True, text=True, check=True).stdout)
    b = _json(subprocess.run([PROBE, "--rounds", "2", "--ws-mb", "1"], capture_output=True, text=True, check=True).stdout)
    assert a["program"] == "probe" and a["seconds"] > 0 and a["ws_bytes"] == 1 << 20 and a["rounds"] == 2
    assert a["checksum"] == b["checksum"]  # the same work every time
    c = _json(subprocess.run([PROBE, "--rounds", "3", "--ws-mb", "1"], capture_output=True, text=True, check=True).stdout)
    assert c["checksum"] != a["checksum"]


def test_bubble_runs_until_sigterm_and_streams_more_at_higher_level() -> None:
    done = {}
    for level in (0.0, 1.0):
        p = subprocess.Popen([BUBBLE, "--level", str(level), "--threads", "2", "--max-mb", "4"], stdout=subprocess.PIPE, text=True)
        time.sleep(0.3)
        assert p.poll() is None  # runs until killed
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=10)
        assert p.returncode == 0
        done[level] = _json(out)
        assert done[level]["signal"] == signal.SIGTERM and done[level]["threads"] == 2
    assert done[0.0]["bytes"] == 0 and done[0.0]["ws_bytes"] == 0
    assert done[1.0]["bytes"] > 0 and done[1.0]["ws_bytes"] == 4 << 20


def test_bubble_for_a_given_time() -> None:
    t = time.monotonic()
    r = _json(subprocess.run([BUBBLE, "--level", "0.5", "--seconds", "0.2", "--max-mb", "2"], capture_output=True, text=True, check=True).stdout)
    assert 0.15 < time.monotonic() - t < 5 and r["signal"] == 0 and r["busy"] == 0.5 and r["ws_bytes"] == 1 << 20


def test_membench_kernels() -> None:
    s = _json(subprocess.run([MEMBENCH, "stream", "--mb", "8", "--reps", "2", "--threads", "2"], capture_output=True, text=True, check=True).stdout)
    assert s["kernel"] == "stream" and s["gbs"] > 0 and s["valid"] is True and s["threads"] == 2
    lat = _json(subprocess.run([MEMBENCH, "latency", "--mb", "8", "--loads", "100000"], capture_output=True, text=True, check=True).stdout)
    assert lat["kernel"] == "latency" and lat["ns_per_load"] > 0 and lat["loads"] == 100000


@pytest.mark.parametrize(
    "argv, message",
    [
        ([BUBBLE, "--level", "1.5"], "--level takes a number from 0 to 1"),
        ([PROBE, "--rounds", "x"], "--rounds takes a whole number"),
        ([MEMBENCH], "name a kernel: stream or latency"),
        ([MEMBENCH, "stream", "--bogus"], "unknown option '--bogus'"),
    ],
)
def test_bad_options_are_one_line(argv: list, message: str) -> None:
    r = subprocess.run(argv, capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and message in r.stderr


@pytest.mark.parametrize("prog", [BUBBLE, PROBE, MEMBENCH])
def test_help_lists_the_table(prog: Path) -> None:
    r = subprocess.run([prog, "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("usage: ") and "--help" in r.stdout
