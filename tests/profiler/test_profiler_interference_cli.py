"""`cosched profile --curves` (interference curves, opt-in), for real on this machine at a small budget:
stored beside the solo profile, shown and drawn by `cosched profiles show NAME [--plot FILE]`, removed when the
job is re-profiled without them; a failure of the curves keeps the solo profile."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from env.node.discover import local_node_id
from profiler.models import Profile
from profiler.store import ProfileStore
from profiler_helpers import needs_numactl, needs_perf, needs_sysbench
from service.cli import main

pytestmark = [needs_perf, needs_sysbench, needs_numactl,
              pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="the curves need a second CPU for the generator")]

TINY = ["sysbench", "cpu", "--threads=1", "--events=200", "--time=0", "run"]


def test_profile_measures_stores_shows_and_plots_the_curves(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "--name", "tiny", "--no-scale", "--curves", "--json", "--", *TINY]) == 0
    doc = json.loads(capsys.readouterr().out)
    curves = doc.pop("interference")
    Profile.model_validate(doc)
    assert [p["x"] for p in curves["sensitivity"]] == [0.25, 0.5, 0.75, 1.0]
    assert all(p["slowdown"] > 0 for p in curves["sensitivity"]) and curves["pressure"] > 0 and not curves["simulated"]
    assert curves["ways"] is None and curves["mba"] is None  # this node has no CAT / MBA
    kinds = {r["kind"] for r in curves["runs"]}
    assert {"solo", "bubble", "probe"} <= kinds and curves["node_seconds"] > 0
    stored = ProfileStore().get_interference("tiny", local_node_id())
    assert stored is not None and stored.pressure == curves["pressure"]

    png = tmp_path / "curves.png"
    assert main(["profiles", "show", "tiny", "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "interference curves" in out and "measured" in out and "sensitivity" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    assert main(["profile", "--name", "tiny", "--no-scale", "--no-interference", "--", *TINY]) == 0
    capsys.readouterr()
    assert ProfileStore().get_interference("tiny", local_node_id()) is None  # stale curves are not kept
    assert main(["profiles", "show", "tiny", "--plot", str(png)]) == 2
    assert "no interference curves" in capsys.readouterr().err


def test_failing_curves_keep_the_solo_profile(home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import env.real.probes as realprobe

    def no_job_time(*_a, **_kw):  # noqa: ANN002, ANN003, ANN202
        raise realprobe.RunError("sysbench (p0-job) failed with exit status 1 during a measurement")

    monkeypatch.setattr(realprobe.RealMeasuringBackend, "measure", no_job_time)  # a measurement that fails
    assert main(["profile", "--name", "tiny", "--no-scale", "--curves", "--", *TINY]) == 1
    err = capsys.readouterr().err
    assert "interference curves of tiny failed" in err and "exit status 1" in err and "solo profile is stored" in err
    assert ProfileStore().get("tiny", local_node_id()) is not None


def test_without_the_native_programs_nothing_runs(home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import env.real.probes as realprobe

    real = realprobe.missing_programs
    monkeypatch.setattr(realprobe, "missing_programs", lambda build=home / "no-build": real(build))  # as before 'make native'
    assert main(["profile", "--name", "tiny", "--no-scale", "--curves", "--", *TINY]) == 2
    err = capsys.readouterr().err
    assert "make native" in err and "--curves" in err
    assert ProfileStore().get("tiny", local_node_id()) is None  # refused before any run
