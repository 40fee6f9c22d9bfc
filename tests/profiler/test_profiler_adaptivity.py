"""Whether a program adapts to CPUs taken from it while it runs (``profiler.adaptivity``, ``cosched profile
--adapts``), on real processes of this machine: a program that sleeps is where the node model says; a program that
slows down once CPUs are taken (an explicit substitute for the spinning OpenMP program, whose slowdown depends on the
machine's load and is measured by bench/giveback_cost.py) runs far beyond it and is stopped; a busy node or a short
program is not judged; the profile keeps the verdict and the decisions take it unless the window says otherwise."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from profiler_helpers import needs_numactl, needs_perf

from profiler.adaptivity import CAP, probe_giveback
from profiler.models import ADAPTS_MAX, Profile
from profiler.store import ProfileStore

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


#: An explicit substitute for a program that does not adapt (the spinning OpenMP program's slowdown depends on what
#: else the machine runs, so it is measured in bench/giveback_cost.py, not here): 0.8 s of work in 10 ms steps, each
#: step a tenth as productive once it finds fewer CPUs allowed than it started with. It sleeps, so its times do not
#: depend on the machine's load.
SLOWS_DOWN = """
import os, time
start, work = len(os.sched_getaffinity(0)), 0.0
while work < 0.8:
    time.sleep(0.01)
    work += 0.01 if len(os.sched_getaffinity(0)) >= start else 0.001
"""


@two_cpus
def test_a_program_that_slows_down_once_cpus_are_taken_does_not_adapt_and_is_stopped() -> None:
    argv = [sys.executable, "-c", SLOWS_DOWN]
    probe = probe_giveback(argv, _taskset, CPUS[:1], full_s=0.85)
    assert probe.stopped and probe.measured_s >= CAP * probe.predicted_s * 0.99 and not probe.adapts
    assert probe.kept_s < 1.5  # started on the kept CPU, it never slows down: what the node model assumes


@needs_perf
@needs_numactl
@two_cpus
def test_cosched_profile_adapts_keeps_the_verdict_and_decisions_take_it(home: Path, capsys, monkeypatch) -> None:  # noqa: ANN001
    import profiler.adaptivity
    from env.node.discover import discover
    from service.cli import main
    from service.decide import Decider

    # the test suite runs beside other tests: the busy-node guard (tested above) is lifted for this sleeping program,
    # whose times do not depend on the load
    monkeypatch.setattr(profiler.adaptivity, "MAX_OTHER_LOAD_CPUS", float("inf"))
    assert main(["profile", "--name", "napper", "--no-scale", "--adapts", "--json", "--",
                 sys.executable, "-c", "import time; time.sleep(0.8)"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["adapts"] is True and 0 < doc["giveback_ratio"] <= ADAPTS_MAX
    stored = ProfileStore().get("napper", doc["node_id"])
    assert stored is not None and stored.adapts is True
    decider = Decider(discover("/"), "packing")
    assert decider.stream_job("a", "napper").adapts is True  # what its profile measured
    assert decider.stream_job("b", "napper", adapts=False).adapts is False  # the window's word overrides it
    assert decider.stream_job("c", "never-profiled").adapts is False
    # too short to probe: said, and nothing claimed
    assert main(["profile", "--name", "blink", "--no-scale", "--adapts", "--json", "--", "true"]) == 0
    out = capsys.readouterr()
    assert "adapts" not in json.loads(out.out) and "the probe needs 0.5 s or more" in " ".join(out.err.split())


def test_a_short_program_or_a_busy_node_is_not_judged() -> None:
    from profiler.adaptivity import why_not_probed

    assert why_not_probed(2.0, 0.05) is None and why_not_probed(2.0, None) is None
    assert "needs 0.5 s or more" in why_not_probed(0.2, 0.0)
    assert "on an idle node" in why_not_probed(2.0, 0.9)


def test_a_profile_has_both_figures_or_neither(make_profile) -> None:  # noqa: ANN001
    p = make_profile("recorded_kvm_sysbench_cpu_t1.csv")
    assert p.adapts is None and p.giveback_ratio is None
    doc = p.model_dump(mode="json")
    assert Profile.model_validate({**doc, "adapts": False, "giveback_ratio": 80.0}).adapts is False
    with pytest.raises(ValueError, match="giveback_ratio and adapts are both given or both missing"):
        Profile.model_validate({**doc, "adapts": True})
