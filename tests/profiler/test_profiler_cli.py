"""`cosched profile` and `cosched profiles`, end to end on this machine with real programs."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Callable

import pytest

from env.node.discover import local_node_id
from profiler.events import HARDWARE_EVENTS, SOFTWARE_EVENTS
from profiler.models import Profile
from profiler.store import ProfileStore
from profiler_helpers import REPO, cosched_argv, env_with_home, needs_numactl, needs_perf, needs_sysbench
from service.cli import main

pytestmark = [needs_perf, needs_sysbench]

MakeProfile = Callable[..., Profile]
SYSBENCH_1 = ["sysbench", "cpu", "--threads=1", "--events=1000", "--time=0", "run"]


def one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if "error:" in ln]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def kept(home: Path, make_profile: MakeProfile) -> Profile:
    """A profile already in the store: no failure may lose it."""
    p = make_profile("handwritten_intel_full_counters.csv", "kept", local_node_id())
    ProfileStore().put(p)
    return p


@needs_numactl
def test_profile_stores_software_counters_and_show_json(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "--name", "sysbench1", "--no-interference", "--", *SYSBENCH_1]) == 0
    human = capsys.readouterr()
    assert "sysbench1" in human.out and "missing" in human.out
    assert main(["profiles", "show", "sysbench1", "--json"]) == 0
    out = capsys.readouterr().out
    doc = json.loads(out)  # stdout is one JSON document and nothing else
    assert doc.pop("interference") is None  # measured only with --curves
    p = Profile.model_validate(doc)
    assert p.name == "sysbench1" and p.node_id == local_node_id()
    assert p.command == SYSBENCH_1 and p.exit_status == 0
    assert all(p.counters[e] is not None and p.counters[e] > 0 for e in SOFTWARE_EVENTS - {"context-switches"})
    assert p.counters["context-switches"] is not None
    assert all(p.counters[e] is None for e in HARDWARE_EVENTS)  # this node: missing, not zero
    assert set(p.available_counters) == set(SOFTWARE_EVENTS)
    assert p.scale_factor is not None and p.one_core_s is not None
    assert p.peak_rss_kb is not None and p.peak_rss_kb > 0
    assert p.perf_version and p.perf_version.startswith("perf version")
    assert (home / "logs" / "profile-sysbench1.out").read_text().startswith("sysbench")


def test_profile_json_no_scale_list_delete(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "--name", "t1", "--no-scale", "--no-interference", "--json", "--", "true"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["name"] == "t1" and doc["scale_factor"] is None and doc["one_core_s"] is None
    assert main(["profiles", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert [p["name"] for p in listing["profiles"]] == ["t1"]
    assert main(["profiles", "list"]) == 0
    assert "t1" in capsys.readouterr().out
    assert main(["profiles", "delete", "t1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["deleted"] == "t1"
    assert ProfileStore().list() == []
    assert main(["profiles", "show", "t1"]) == 2
    assert "no profile named 't1'" in one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    ("argv", "code", "says"),
    [
        (["profile", "--name", "x", "--", "no-such-command-cosched"], 2, "command not found"),
        (["profile", "--name", "x", "--", "sh", "-c", "exit 3"], 1, "exit status 3"),
        (["profile", "--name", "x", "--", "sh", "-c", "kill -KILL $$"], 1, "signal 9"),
        (["profile", "--name", "bad name", "--", "true"], 2, "bad profile name"),
        (["profile", "--name", "a/b", "--", "true"], 2, "bad profile name"),
        (["profile", "--name", "x"], 2, "no command"),
        (["profile", "--name", "x", "--timeout", "0.3", "--", "sleep", "20"], 1, "timed out"),
        (["profiles", "show"], 2, "needs a NAME"),
        (["profiles", "show", "bad name"], 2, "bad profile name"),
    ],
)
def test_bad_input_one_line_and_nothing_lost(
    kept: Profile, argv: list[str], code: int, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == code
    captured = capsys.readouterr()
    line = one_error_line(captured.err)
    assert line.startswith(f"cosched {argv[0]}: error:") and says in line
    assert captured.out == ""
    store = ProfileStore()
    assert store.get("kept", kept.node_id) == kept
    assert [p.name for p in store.list()] == ["kept"]  # the failed run was not stored


def test_corrupt_database(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home.mkdir(parents=True)
    db = home / "profiles.sqlite"
    db.write_bytes(b"garbage, not a database" * 200)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    for argv in (["profile", "--name", "x", "--no-scale", "--", "true"], ["profiles", "list"]):
        assert main(argv) == 1
        line = one_error_line(capsys.readouterr().err)
        assert "corrupt" in line and str(db) in line
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def test_unwritable_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("COSCHED_HOME", str(blocker / "home"))
    assert main(["profile", "--name", "x", "--no-scale", "--", "true"]) == 1
    assert "cannot create the profile store" in one_error_line(capsys.readouterr().err)


def test_two_concurrent_profile_processes_both_stored(home: Path) -> None:
    env = env_with_home(home)
    procs = [
        subprocess.Popen(
            [*cosched_argv(), "profile", "--name", name, "--no-scale", "--no-interference", "--json", "--",
             "sysbench", "cpu", "--threads=1", "--events=300", "--time=0", "run"],
            env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        for name in ("conc-a", "conc-b")
    ]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
        assert json.loads(out)["name"] in ("conc-a", "conc-b")
    assert sorted(p.name for p in ProfileStore().list(local_node_id())) == ["conc-a", "conc-b"]


def _scale(name: str, threads: int, events: int, capsys: pytest.CaptureFixture[str]) -> tuple[float, float, float]:
    """(scale factor, CPUs the whole-node run got: task-clock / duration, CPUs used by other processes)."""
    argv = ["sysbench", "cpu", f"--threads={threads}", f"--events={events}", "--time=0", "run"]
    assert main(["profile", "--name", name, "--no-interference", "--json", "--", *argv]) == 0
    doc = json.loads(capsys.readouterr().out)
    doc.pop("interference")
    p = Profile.model_validate(doc)
    assert p.scale_factor is not None and p.counters["task-clock"] is not None
    return p.scale_factor, p.counters["task-clock"] / 1000 / p.duration_s, p.other_load_cpus or 0.0


@needs_numactl
@pytest.mark.whole_machine  # a busy machine is a skip: make test runs it before its two parallel pytest processes
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs")
def test_scale_factor_of_real_programs(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """~2 for a 2-thread CPU-bound program, ~1 for a single-threaded one.

    Noisy machine (other jobs share the 2 CPUs): up to two attempts for the single-threaded program and three for
    the 2-thread one, the first that passes wins. If the
    2-thread program never got two CPUs in its whole-node run (task-clock / duration < 1.6), no scale factor
    above 1.5 was possible: that is a busy machine, reported as a skip, not a pass. A virtual machine's two CPUs
    may be one core's two hyperthreads (measured here: 1.34-1.44 with both CPUs busy), so the 2-thread program
    must scale clearly (> 1.3) and clearly better than the single-threaded one (by 0.2).
    """
    one = [_scale("sb1", 1, 600, capsys)]
    if one[-1][0] >= 1.3:
        one.append(_scale("sb1", 1, 600, capsys))
    if min(r[0] for r in one) >= 1.3 and min(r[2] for r in one) >= 0.5:
        pytest.skip(f"machine busy: other processes used >= 0.5 CPUs during every attempt (scale, CPUs, others: {one})")
    assert min(r[0] for r in one) < 1.3, one

    two = [_scale("sb2", 2, 1500, capsys)]
    for _ in range(2):  # got its CPUs but still did not scale (a neighbour on the hyperthreads' core): try again
        if max(r[0] for r in two) > 1.5 or two[-1][1] < 1.2:
            break
        two.append(_scale("sb2", 2, 1500, capsys))
    if max(r[0] for r in two) <= 1.5 and max(r[1] for r in two) < 1.6:
        pytest.skip(f"machine busy: the 2-thread run never got 2 CPUs (scale, CPUs, others: {two})")
    best = max(r[0] for r in two)
    assert best > 1.3 and best > min(r[0] for r in one) + 0.2, (one, two)
