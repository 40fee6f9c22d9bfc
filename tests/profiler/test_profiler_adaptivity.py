"""Whether a program adapts to CPUs taken from it while it runs (``profiler.adaptivity``, ``cosched profile
--adapts``), measured on real processes of this machine: a program that sleeps is where the node model says; an
OpenMP program whose threads spin at barriers runs far beyond it and is stopped; the profile keeps the verdict and the
online decisions take it unless the window says otherwise."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from profiler_helpers import REPO, needs_numactl, needs_perf

from profiler.adaptivity import CAP, probe_giveback
from profiler.models import ADAPTS_MAX, Profile
from profiler.store import ProfileStore

OMP = REPO / "native" / "build" / "cosched-ompbarrier"
pytestmark = pytest.mark.skipif(shutil.which("taskset") is None, reason="taskset (util-linux) is not installed")
CPUS = sorted(os.sched_getaffinity(0))
two_cpus = pytest.mark.skipif(len(CPUS) < 2, reason="taking CPUs from a running program needs two CPUs or more")


def _taskset(cpus):  # noqa: ANN001, ANN202 - the launcher: util-linux's taskset, which execs at once (a launcher slow to
    # exec would be re-pinned before the program starts, and the program would start on the kept CPUs alone)
    return ["taskset", "-c", ",".join(map(str, cpus if cpus is not None else CPUS))]


@two_cpus
def test_a_program_that_sleeps_adapts() -> None:
    # its time is the same on any CPUs: the give-back run is where the prediction is, whatever else the machine does
    probe = probe_giveback([sys.executable, "-c", "import time; time.sleep(0.6)"], _taskset, CPUS[:1], full_s=0.65)
    assert not probe.stopped and probe.ratio < ADAPTS_MAX and probe.adapts
    assert probe.kept_cpus == CPUS[:1] and probe.predicted_s == pytest.approx(0.65 / 2 + probe.kept_s / 2)


@two_cpus
@pytest.mark.skipif(not OMP.is_file(), reason="cosched-ompbarrier is not built (make -C native)")
def test_an_openmp_program_whose_threads_spin_does_not_adapt_and_is_stopped() -> None:
    argv = [str(OMP), "--sweeps", "20000"]
    full = probe_giveback(argv, _taskset, CPUS, full_s=1.0).kept_s  # "kept" on every CPU: its solo time
    probe = probe_giveback(argv, _taskset, CPUS[:1], full_s=full)
    assert probe.stopped and probe.ratio >= CAP * 0.99 and not probe.adapts


@needs_perf
@needs_numactl
@two_cpus
def test_cosched_profile_adapts_keeps_the_verdict_and_decisions_take_it(home: Path, capsys) -> None:  # noqa: ANN001
    from env.node.discover import discover
    from service.cli import main
    from service.decide import Decider

    assert main(["profile", "--name", "napper", "--no-scale", "--adapts", "--json", "--",
                 sys.executable, "-c", "import time; time.sleep(0.5)"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["adapts"] is True and 0 < doc["giveback_ratio"] <= ADAPTS_MAX
    stored = ProfileStore().get("napper", doc["node_id"])
    assert stored is not None and stored.adapts is True
    decider = Decider(discover("/"), "packing")
    assert decider.stream_job("a", "napper").adapts is True  # what its profile measured
    assert decider.stream_job("b", "napper", adapts=False).adapts is False  # the window's word overrides it
    assert decider.stream_job("c", "never-profiled").adapts is False


def test_a_profile_has_both_figures_or_neither(make_profile) -> None:  # noqa: ANN001
    p = make_profile("recorded_kvm_sysbench_cpu_t1.csv")
    assert p.adapts is None and p.giveback_ratio is None
    doc = p.model_dump(mode="json")
    assert Profile.model_validate({**doc, "adapts": False, "giveback_ratio": 80.0}).adapts is False
    with pytest.raises(ValueError, match="giveback_ratio and adapts are both given or both missing"):
        Profile.model_validate({**doc, "adapts": True})
