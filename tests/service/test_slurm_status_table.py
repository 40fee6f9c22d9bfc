"""`cosched slurm status` at 80 columns: every window, group and job id whole (no "win…"/"gro…", no ellipsis)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.cli import main
from service.slurm.journal import Journal, NewJob


@pytest.fixture()
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("SLURM_CONF", raising=False)
    monkeypatch.setenv("COLUMNS", "80")
    j = Journal(tmp_path / "controller" / "journal.sqlite")
    plan = json.dumps({"policy": "agent-search", "node": {"name": "local"}})
    for w in range(3):
        jobs = [NewJob(job_id=98_765_400 + 10 * w + k, group_idx=k // 2, profile=["sysbench-cpu-single-threaded", "xz"][k % 2],
                       options=[], placement=["cpus=0-1" if k % 2 else "cpus=0", "mempolicy=interleave", "pinrt=1"],
                       eligible=0.0) for k in range(4)]
        wid = j.add_window(plan, [(0, False, 3.5), (1, False, 2.0)], jobs)
        j.set_group(wid, 0, "dispatched", "node-a01")
    j.close()
    return tmp_path


def test_status_fits_80_columns_and_cuts_no_id(state_dir: Path, capsys) -> None:
    assert main(["slurm", "status", "--state-dir", str(state_dir)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(ln) for ln in lines) <= 80 and "…" not in out
    header = next(ln for ln in lines if "job" in ln.split())
    assert {"win", "grp", "node", "group", "job", "profile"} <= set(header.split())
    tokens = {t for ln in lines for t in ln.split()}
    doc = json.loads((main(["slurm", "status", "--state-dir", str(state_dir), "--json"]), capsys.readouterr().out)[1])
    for w in doc["windows"]:
        assert str(w["id"]) in tokens
        for g in w["groups"]:
            for jb in g["jobs"]:
                assert str(jb["job_id"]) in tokens  # each job id whole, on one line
    assert "node-a01" in tokens and "dispatched" in tokens
