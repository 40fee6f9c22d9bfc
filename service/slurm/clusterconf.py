"""What the local cluster is: its spec, node names, slurm.conf and plugstack.conf (``cluster.up`` writes them).

examples/slurm/slurm.conf is the same shape for a real site.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

from env.plan.launch import PINRT_LIB

REPO = Path(__file__).resolve().parents[2]
SPANK_PLUGIN = REPO / "native" / "build" / "cosched_spank.so"
JOB_SUBMIT_LUA = REPO / "examples" / "slurm" / "job_submit.lua"
DEFAULT_PORT = 16817
DEFAULT_PARTITION = "cosched"
PLAIN_PARTITION = "batch"


@dataclass(frozen=True)
class ClusterSpec:
    state_dir: Path
    nodes: int = 4
    cpus_per_node: int | None = None  # default: the machine's online CPUs
    port: int = DEFAULT_PORT
    cmax: int = 4
    partition: str = DEFAULT_PARTITION
    plugin: Path | None = SPANK_PLUGIN
    pinrt_lib: Path = PINRT_LIB
    resctrl_root: Path | None = None


def node_names(n: int) -> list[str]:
    return [f"n{k}" for k in range(1, n + 1)]


def slurm_conf_text(spec: ClusterSpec, cpus: int, dirs: dict[str, Path]) -> str:
    """slurm.conf of the local cluster (examples/slurm/slurm.conf is the same shape for a real site)."""
    host = socket.gethostname().split(".")[0]
    names = node_names(spec.nodes)
    lines = [
        "# Written by 'cosched slurm up': a local cluster on one machine (state under this directory).",
        "ClusterName=cosched",
        f"SlurmctldHost={host}(127.0.0.1)",
        f"SlurmctldPort={spec.port}",
        "SlurmUser=root",
        "SlurmdUser=root",
        # cred_expire: a requeued job (e.g. an id a slurmd ran) waits this long to start again; default 120 s
        f"AuthInfo=socket={dirs['munge'] / 'munge.socket'},cred_expire=30",
        f"StateSaveLocation={dirs['ctld']}",
        f"SlurmdSpoolDir={dirs['spool']}/%n",
        f"SlurmctldPidFile={dirs['run']}/slurmctld.pid",
        f"SlurmdPidFile={dirs['run']}/slurmd-%n.pid",
        f"SlurmctldLogFile={dirs['log']}/slurmctld.log",
        f"SlurmdLogFile={dirs['log']}/slurmd-%n.log",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        # The machine's processes are tracked by their parent chain; binding by sched_setaffinity.
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/affinity",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        # Every slurmd sees the same (real) hardware: the node lines, not the hardware, say what a node has.
        "SlurmdParameters=config_overrides",
        "SchedulerType=sched/backfill",
        # Schedule batch jobs at once (the default lets slurmctld delay them up to 3 s to batch submissions):
        # a released group then starts in the next pass, which is what the controller's groups wait for.
        # bf_interval: a job whose begin time passes (a requeue's wait) starts at the next backfill pass or the
        # periodic one (30 and 60 s by default); a pass over a few nodes costs nothing.
        "SchedulerParameters=batch_sched_delay=0,bf_interval=5",
        "MpiDefault=none",
        "ReturnToService=2",
        "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none",
        "JobCompType=jobcomp/none",
        "MailProg=/bin/true",
        "InactiveLimit=0",
        "KillWait=2",
        "MinJobAge=600",  # finished jobs stay visible to squeue/scontrol for 10 min (tests, status)
        # Plain jobs are not requeued (after a slurmctld restart from older state one that had completed would run
        # again); job_submit.lua requeues co-scheduled ones, which the SPANK plugin never starts twice (docs/slurm.md).
        "JobRequeue=0",
        "SlurmdTimeout=60",
        "SlurmctldTimeout=60",
        f"PlugStackConfig={dirs['etc'] / 'plugstack.conf'}",
        "JobSubmitPlugins=lua",
    ]
    for k, name in enumerate(names):
        lines.append(f"NodeName={name} NodeHostname={host} NodeAddr=127.0.0.1 Port={spec.port + 1 + k} "
                     f"CPUs={cpus} State=UNKNOWN")
    nodelist = ",".join(names)
    lines.append(f"PartitionName={PLAIN_PARTITION} Nodes={nodelist} Default=YES MaxTime=INFINITE State=UP")
    # The co-scheduling partition: up to Cmax jobs share a node's CPUs; the controller places them apart.
    lines.append(f"PartitionName={spec.partition} Nodes={nodelist} Default=NO MaxTime=INFINITE State=UP "
                 f"OverSubscribe=FORCE:{spec.cmax}")
    return "\n".join(lines) + "\n"


def plugstack_text(spec: ClusterSpec, placement_dir: Path) -> str:
    """The SPANK plugin's line (see native/ for its options), or a comment when it is not built."""
    if spec.plugin is None or not spec.plugin.exists():
        return (f"# cosched's SPANK plugin is not built ({spec.plugin}): run 'make native', then "
                "'cosched slurm down' and 'cosched slurm up'.\n")
    args = [f"placement_dir={placement_dir}"]
    if spec.resctrl_root is not None:
        args.append(f"resctrl_root={spec.resctrl_root}")
    if spec.pinrt_lib.exists():
        args.append(f"pinrt_lib={spec.pinrt_lib}")
    # required: Slurm honours a failing hook only of a required plugin (--cosched=strict); the plugin fails a
    # task only when strict was asked for.
    return f"required {spec.plugin} {' '.join(args)}\n"
