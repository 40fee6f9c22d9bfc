"""Running commands under perf: exit status, signals, timeouts, missing commands, binding, destinations."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from env.node.discover import discover
from env.plan.launch import solo_prefix
from profiler.errors import ProfilerInputError
from profiler.events import HARDWARE_EVENTS
from profiler.perfrun import perf_version, resolve_command, run_under_perf
from profiler_helpers import needs_numactl, needs_perf

pytestmark = needs_perf
LOCAL = discover()


def test_success_counts_software_events(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    with out.open("wb") as f:
        run = run_under_perf(["sh", "-c", "echo hello; echo oops >&2"], stdout=f, stderr=subprocess.DEVNULL)
    assert run.ok and run.exit_status == 0 and run.signal is None
    assert out.read_text() == "hello\n"
    counters = run.counters()
    assert counters["task-clock"] is not None and counters["duration_time"] is not None
    assert run.wall_s > 0 and run.peak_rss_kb > 0
    assert run.other_load_cpus is not None and run.other_load_cpus >= 0  # the node's other load, measured
    assert run.executed[:2] == (run.executed[0], "stat") and "--" in run.executed
    if os.environ.get("COSCHED_EXPECT_PMU") != "1":  # this machine: no PMU
        assert all(counters[e] is None for e in HARDWARE_EVENTS)


def test_stderr_goes_to_its_destination(tmp_path: Path) -> None:
    err = tmp_path / "err.txt"
    with err.open("wb") as f:
        run = run_under_perf(["sh", "-c", "echo to-stderr >&2"], stdout=subprocess.DEVNULL, stderr=f)
    assert run.ok
    assert "to-stderr" in err.read_text()


def test_env_and_cwd(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    env = dict(os.environ, COSCHED_TEST_VAR="xyz")
    with out.open("wb") as f:
        run = run_under_perf(["sh", "-c", 'echo "$COSCHED_TEST_VAR $(pwd)"'], env=env, cwd=tmp_path, stdout=f)
    assert run.ok
    assert out.read_text().strip() == f"xyz {tmp_path}"


def test_keeps_perf_output_when_asked(tmp_path: Path) -> None:
    csv = tmp_path / "perf.csv"
    run = run_under_perf(["true"], perf_output=csv, stdout=subprocess.DEVNULL)
    assert run.ok and "task-clock" in csv.read_text()


def test_non_zero_exit() -> None:
    run = run_under_perf(["sh", "-c", "exit 7"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert not run.ok and run.exit_status == 7
    assert "exit status 7" in run.describe_failure()
    assert run.stat is not None  # perf still counted


def test_killed_by_a_signal_is_a_failure() -> None:
    # perf itself returns 0 here: the signal is read from its psignal line
    run = run_under_perf(["sh", "-c", "kill -SEGV $$"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert not run.ok and run.exit_status == -11 and run.signal == 11
    assert "signal 11" in run.describe_failure()


def test_timeout_stops_the_command() -> None:
    run = run_under_perf(["sleep", "30"], timeout_s=0.5, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert not run.ok and run.timed_out
    assert run.wall_s < 20
    assert "timed out" in run.describe_failure()


def test_missing_command_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(ProfilerInputError, match="command not found"):
        run_under_perf(["no-such-command-cosched"])
    with pytest.raises(ProfilerInputError, match="command not found"):
        run_under_perf([str(tmp_path / "nothing-here")])
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\n")
    with pytest.raises(ProfilerInputError, match="not executable"):
        run_under_perf([str(script)])
    with pytest.raises(ProfilerInputError):
        resolve_command([])


def test_unexecutable_format_is_a_failure(tmp_path: Path) -> None:
    junk = tmp_path / "junk"
    junk.write_bytes(b"\x00\x01\x02 not a program")
    junk.chmod(0o755)
    run = run_under_perf([str(junk)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert not run.ok and run.exit_status != 0  # perf's execvp hands it to /bin/sh: 127


@needs_numactl
def test_bound_to_one_cpu(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    cpu = min(os.sched_getaffinity(0))
    with out.open("wb") as f:
        run = run_under_perf(["grep", "Cpus_allowed_list", "/proc/self/status"], launch_prefix=solo_prefix(LOCAL, [cpu]), bound_cpus=[cpu], stdout=f)
    assert run.ok and run.bound_cpus == (cpu,)
    assert out.read_text().split()[-1] == str(cpu)
    assert run.executed[run.executed.index("--") + 1:] == ("numactl", f"--physcpubind={cpu}", "--", "grep", "Cpus_allowed_list", "/proc/self/status")


def test_perf_version() -> None:
    assert perf_version().startswith("perf version")


def test_short_failing_commands_are_never_reported_as_success() -> None:
    """perf 6.1 returns 0 for a command that exits before perf waits for it (about 1 run in 50 here);
    the runner reaps such a command itself. Statistical: 20 runs each, all must be right."""
    for argv, expected in ((["false"], 1), (["sh", "-c", "kill -KILL $$"], -9)):
        statuses = {
            run_under_perf(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).exit_status for _ in range(20)
        }
        assert statuses == {expected}, (argv, statuses)
    children = Path(f"/proc/self/task/{os.getpid()}/children").read_text().split()
    zombies = [c for c in children if Path(f"/proc/{c}/stat").exists() and ") Z " in Path(f"/proc/{c}/stat").read_text()]
    assert zombies == []


@pytest.mark.skipif(
    shutil.which("localedef") is None or not Path("/usr/share/i18n/locales/de_DE").exists(),
    reason="needs localedef and the de_DE locale source",
)
def test_decimal_comma_locale_end_to_end(tmp_path: Path) -> None:
    """Under LC_ALL=de_DE.UTF-8 perf writes '123,45,msec,task-clock,...': still parsed right."""
    locales = tmp_path / "locales"
    locales.mkdir()
    made = subprocess.run(
        ["localedef", "-i", "de_DE", "-f", "UTF-8", str(locales / "de_DE.UTF-8")], capture_output=True, check=False
    )
    if not (locales / "de_DE.UTF-8").exists():
        pytest.skip(f"localedef failed: {made.stderr.decode(errors='replace')[:200]}")
    env = dict(os.environ, LOCPATH=str(locales), LC_ALL="de_DE.UTF-8")
    csv = tmp_path / "perf.csv"
    run = run_under_perf(["sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"], env=env, perf_output=csv)
    assert run.ok
    task_line = next(ln for ln in csv.read_text().splitlines() if "task-clock" in ln)
    assert task_line.count(",") > 6  # perf really wrote decimal commas
    task_clock = run.counters()["task-clock"]
    assert task_clock is not None and 0 < task_clock < run.wall_s * 1000 * 4
    assert run.stat is not None and run.stat.lines[1].percent_running == pytest.approx(100.0)
