"""cosched calibrate judges the fit on co-runs no probe measured, beside the noise floor of repeated probes."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from env.calibration.calibrate import heldout_pairs, noise_floor
from env.calibration.store import CalibrationStore
from service.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def two_cpu_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A simulated node of two CPUs (the paper's jobs on variant-a's parameters): every co-run there is a pair."""
    monkeypatch.setenv("COSCHED_HOME", str(tmp_path / "home"))
    doc = json.loads((ROOT / "env" / "sim" / "nodes" / "variant-a.json").read_text())
    node = doc["node"]
    node["cpus"] = [0, 1]
    node["numa"] = [{**node["numa"][0], "cpus": [0, 1]}]
    node["l3"] = [{**node["l3"][0], "cpus": [0, 1]}]
    path = tmp_path / "two.json"
    node["name"] = f"sim:{path}"
    path.write_text(json.dumps(doc))
    return f"sim:{path}"


def _calibrate(capsys, node: str, *extra: str) -> dict:
    assert main(["calibrate", "--backend", "sim", "--node", node, "--jobs", "EP,MG,CG,FT", "--probes", "6",
                 "--heldout", "8", "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_heldout_pairs_are_never_probed_pairs(two_cpu_node: str, capsys) -> None:
    doc = _calibrate(capsys, two_cpu_node, "--noise", "0.05")
    runs = CalibrationStore().runs(doc["node"])
    probed = {frozenset(p.job for p in r.record.group) for r in runs if r.source == "calibrate" and r.record.kind == "corun"}
    held = [frozenset(p.job for p in r.record.group) for r in runs if r.source == "heldout"]
    assert len(held) == 8 and probed and not probed & set(held)
    assert doc["heldout"]["disjoint_from_probes"] is True
    # the noise floor beside the held-out error: repeats of probed co-runs, in the same units
    floor = doc["noise_floor"]
    assert floor["n"] == 6 and 0 < floor["median_abs_error_pct"] < 20
    # the model file keeps it with its held-out error (HeldOutError.noise_floor)
    held = json.loads(Path(doc["out"]).read_text())["provenance"]["heldout"]
    assert held["noise_floor"] == pytest.approx(floor["median_abs_error_pct"], abs=1e-3)
    assert main(["calibrate", "--backend", "sim", "--node", two_cpu_node, "--jobs", "EP,MG,CG,FT", "--probes", "6",
                 "--heldout", "8", "--noise", "0.05", "--seed", "3"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("held-out co-runs"))
    assert "noise floor" in line and "no pair of them probed" in line


def test_without_noise_the_floor_is_zero_and_without_repeats_it_is_not_measured(two_cpu_node: str, capsys) -> None:
    doc = _calibrate(capsys, two_cpu_node)
    assert doc["noise_floor"]["median_abs_error_pct"] == pytest.approx(0.0, abs=1e-6)
    doc = _calibrate(capsys, two_cpu_node, "--repeats", "0", "--seed", "1")
    assert doc["noise_floor"] is None
    assert json.loads(Path(doc["out"]).read_text())["provenance"]["heldout"].get("noise_floor") is None


def test_the_floor_is_the_error_one_measurement_carries() -> None:
    # groups whose repeats differ by 10 % of their mean: each measurement is 10 % / sqrt(2) from the other on average
    f = noise_floor([(0.95, 1.05), (1.9, 2.1), (9.5, 10.5)])
    assert f.n == 3 and f.median_abs_error_pct == pytest.approx(10 / 2 ** 0.5)


@pytest.mark.parametrize("n_jobs", [2, 3, 4, 7])
def test_the_kept_pairs_leave_the_probes_a_pair(n_jobs: int) -> None:
    jobs = [f"j{i}" for i in range(n_jobs)]
    kept = heldout_pairs(jobs, random.Random(0))
    n_pairs = n_jobs * (n_jobs - 1) // 2
    assert len(kept) < n_pairs and (len(kept) >= 1 if n_pairs >= 2 else not kept)
