"""Plans -> launch argv, enforcement with reasons, and a real numactl launch on this machine."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import pytest

from env.plan import actions as A
from env.plan.allocate import GroupState, allocate
from env.node.discover import discover
from env.errors import InputError
from env.real.executor import runs_command
from env.plan.launch import enforcement, launch_argv
from env.plan.models import Plan, Window, WindowJob
from env.sim.nodes import load_node
from env.plan.builder import PlanBuilder, check_plan_for_node
from env.node.resctrl import create_group, remove_group, schemata

LOCAL = discover("/")


def _alloc(node, memory, affinity="compact", cores=Fraction(1, 2)):
    return allocate(node, affinity, memory, A.JobAction(cores, Fraction(8, 22), 60, "balanced"), GroupState())


@pytest.mark.parametrize(
    "memory, option",
    [("first-touch", None), ("interleave", "--interleave=0"), ("local-alloc", "--membind=0")],
)
def test_argv_per_memory_policy(memory: str, option: str | None) -> None:
    alloc = _alloc(LOCAL, memory)
    argv = launch_argv(LOCAL, ["sysbench", "cpu", "run"], alloc, enforcement(LOCAL))
    expected = ["numactl", f"--physcpubind={alloc.cpus[0]}"] + ([option] if option else []) + ["--", "sysbench", "cpu", "run"]
    assert argv == expected


def test_two_domain_memory_options_cover_the_jobs_domains(fake_sysroot, which_all) -> None:
    node = discover(fake_sysroot(), which=which_all)
    alloc = _alloc(node, "interleave", affinity="distributed", cores=Fraction(1, 4))
    argv = launch_argv(node, ["prog"], alloc, enforcement(node), resctrl_group="/sys/fs/resctrl/g")
    assert argv[:4] == ["numactl", "--physcpubind=0-2,12-14", "--interleave=0-1", "--"]


def test_not_enforced_is_reported_not_launched() -> None:
    enf = enforcement(LOCAL)
    assert enf.cpus and enf.memory
    if not LOCAL.capabilities.l3_cat.available:
        assert not enf.l3 and "l3" in enf.reasons and enf.method is None
        argv = launch_argv(LOCAL, ["prog"], _alloc(LOCAL, "first-touch"), enf)
        assert "rdtset" not in argv and not any("resctrl" in a for a in argv)


def test_resctrl_and_rdtset_steps_on_a_rdt_node(fake_sysroot, which_all) -> None:
    node = discover(fake_sysroot(), which=which_all)
    alloc = _alloc(node, "first-touch", affinity="distributed", cores=Fraction(1, 4))
    enf = enforcement(node, "resctrl")
    assert enf.l3 and enf.mem_bw and enf.method == "resctrl"
    argv = launch_argv(node, ["prog", "x"], alloc, enf, resctrl_group="/sys/fs/resctrl/cosched-g0-a")
    i = argv.index("--")
    assert argv[i + 1].endswith("cosched-resctrl-exec") and argv[i + 2:] == ["/sys/fs/resctrl/cosched-g0-a", "--", "prog", "x"]
    enf = enforcement(node, "rdtset")
    argv = launch_argv(node, ["prog"], alloc, enf, mb_hw={0: 60, 1: 60})
    j = argv.index("rdtset")
    assert argv[j:] == ["rdtset", "-I", "-t", "l3=0xf;mba=60;cpu=0-2", "-t", "l3=0xf;mba=60;cpu=12-14", "-c", "0-2,12-14", "prog"]


def test_amd_without_bandwidth_is_not_enforced(fake_sysroot, which_all) -> None:
    node = discover(fake_sysroot(vendor="AuthenticAMD", cbm_mask="ffff"), which=which_all)
    enf = enforcement(node)
    assert enf.l3 and not enf.mem_bw and "memory_bandwidth_gbs" in enf.reasons["mem_bw"]


def test_pin_runtime_is_in_the_argv() -> None:
    argv = launch_argv(LOCAL, ["prog"], _alloc(LOCAL, "first-touch"), enforcement(LOCAL), pin_runtime=Path("/x/libpinrt.so"))
    assert argv[-3:] == ["env", "LD_PRELOAD=/x/libpinrt.so", "prog"]


def test_schemata_and_fake_resctrl_group(tmp_path: Path, fake_sysroot, which_all) -> None:
    node = discover(fake_sysroot(), which=which_all)
    text = schemata(node, {0: 0xF, 1: 0xF0}, {0: 60, 1: 40})
    assert text == "L3:0=f;1=f0\nMB:0=60;1=40\n"
    group = tmp_path / "cosched-g0-a"
    create_group(str(group), text)
    assert (group / "schemata").read_text() == "MB:0=60;1=40\n"  # written line by line, as resctrl wants
    with pytest.raises(Exception, match="already exists"):
        create_group(str(group), text)
    remove_group(str(group))
    assert not group.exists()
    remove_group(str(group))  # idempotent


def _plan(node, jobs: list[WindowJob], actions: list[int], schedule: int = 0) -> Plan:
    sched = A.decode(schedule)
    assert isinstance(sched, A.ScheduleAction)
    b = PlanBuilder(node=node, schedule=sched, max_concurrency=4, window_size=len(jobs))
    for job, a in zip(jobs, actions):
        assert b.place(job, a) is not None
    return b.build("hand")


def test_plan_document_and_node_check() -> None:
    jobs = [WindowJob(id="a", command=["sleep", "0"]), WindowJob(id="b", command=["sleep", "0"])]
    one_core = A.encode(A.JobAction(Fraction(1, 2), Fraction(4, 22), 100, "balanced"))
    plan = _plan(LOCAL, jobs, [one_core, one_core])
    assert plan.node.name == "local" and len(plan.groups) == 1
    assert plan.groups[0].jobs[0].cpus != plan.groups[0].jobs[1].cpus
    again = Plan.model_validate_json(plan.model_dump_json())
    assert again == plan
    check_plan_for_node(plan, LOCAL)
    with pytest.raises(InputError, match="not 'sim:reference'"):
        check_plan_for_node(plan, load_node("sim:reference"))
    doc = plan.model_dump()
    doc["groups"][0]["jobs"][0]["cpus"] = [4096]
    with pytest.raises(InputError, match="4096"):
        check_plan_for_node(Plan.model_validate(doc), LOCAL)


def test_a_real_launch_argv_runs_on_its_cpus() -> None:
    """numactl really binds: the child's allowed CPUs (from /proc) are the plan's."""
    job = WindowJob(id="sleeper", command=[sys.executable, "-c", "import time; time.sleep(3)"])
    last_cpu = max(LOCAL.cpus)
    # 1/8 of the node compact takes the first free CPU; occupy the others so the job lands on the last one.
    b = PlanBuilder(node=LOCAL, schedule=A.ScheduleAction("compact", "local-alloc"), max_concurrency=4, window_size=1)
    b.state.taken_cpus.update(c for c in LOCAL.cpus if c != last_cpu)
    assert b.place(job, A.encode(A.JobAction(Fraction(1, 8), Fraction(4, 22), 100, "balanced"))) is not None
    pj = b.build("hand").groups[0].jobs[0]
    assert pj.cpus == [last_cpu] and pj.launch[0] == "numactl"
    proc = subprocess.Popen(pj.launch)
    try:
        allowed = None
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if runs_command(proc.pid, pj.command, pj.launch):  # numactl has bound itself and exec'd the job
                status = Path(f"/proc/{proc.pid}/status").read_text()
                allowed = next(l.split(":")[1].strip() for l in status.splitlines() if l.startswith("Cpus_allowed_list"))
                break
            time.sleep(0.01)
        assert allowed == str(last_cpu)
    finally:
        proc.kill()
        proc.wait()


def test_window_validation_messages() -> None:
    from pydantic import ValidationError

    cases = [
        ({"jobs": [{"id": "a"}, {"id": "a"}]}, "repeated: a"),
        ({"jobs": [{"id": "bad id!"}]}, "jobs.0.id"),
        ({"jobs": [{"id": "a", "command": []}]}, "non-empty argv"),
        ({"jobs": [{"id": "a"}], "max_concurrency": 0}, "max_concurrency"),
        ({"jobs": [{"id": "a"}], "max_concurrency": 10_000}, "max_concurrency"),
        ({"jobs": []}, "jobs"),
        ({"jobs": [{"id": "a", "bogus": 1}]}, "bogus"),
    ]
    for doc, words in cases:
        with pytest.raises(ValidationError, match=words):
            Window.model_validate(doc)
    w = Window.model_validate({"jobs": [{"id": "a"}, {"id": "b", "command": ["x"]}]})
    with pytest.raises(InputError, match="jobs without a command .* a"):
        w.require_commands()
