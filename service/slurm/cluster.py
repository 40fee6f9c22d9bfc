"""A whole Slurm cluster on this machine, from Debian's packages: for the tests and for users to try cosched.

``up`` starts munged (its own key and socket), slurmctld and N ``slurmd -N nK`` (one port each, all at
127.0.0.1, each claiming the machine's CPUs), all in the foreground of a new session so their pids are
known at once; it records every pid (with its start time, so a reused pid is never signalled) in
STATE/cluster.json, then waits for ``scontrol ping`` and every slurmd to answer (a drained node counts and is
named). ``up`` again restarts only the daemons that died (a restarted slurmctld recovers its jobs from its state
directory); ``down`` cancels the cluster's jobs, then stops exactly the processes it started.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Callable

from pydantic import BaseModel, Field

from env.errors import CoschedError, InputError, RunError
from profiler.store import cosched_home
from service.slurm.clusterconf import (JOB_SUBMIT_LUA, PLAIN_PARTITION, ClusterSpec, node_names, plugstack_text,
                                       slurm_conf_text)

SLURM_PLUGIN_DIR = Path("/usr/lib/x86_64-linux-gnu/slurm-wlm")
_PROGRAMS = ("munged", "slurmctld", "slurmd", "scontrol", "sbatch", "squeue", "scancel", "sinfo")
_APT_HINT = "install them with 'make setup' (tools/setup-apt.sh) or 'apt-get install slurm-wlm munge libslurm-dev'"


class SlurmSetupError(CoschedError):
    """The local cluster cannot be started or reached; the message says why and what to do."""

    cli_exit_code = 1


def default_state_dir() -> Path:
    return cosched_home() / "slurm"


class Daemon(BaseModel):
    name: str  # munged, slurmctld, slurmd:n1, ...
    pid: int
    start_ticks: int = Field(description="the process's start time (/proc/PID/stat field 22): tells a reused pid apart")
    argv: list[str]


class ClusterState(BaseModel):
    """STATE/cluster.json: what ``up`` made, read by ``down``, the controller and the tests."""

    state_dir: str
    slurm_conf: str
    port: int
    nodes: list[str]
    cpus_per_node: int
    partition: str
    plain_partition: str
    cmax: int
    placement_dir: str
    plugin: str | None = Field(None, description="the SPANK plugin named in plugstack.conf; None when it is not built")
    daemons: list[Daemon] = Field(default_factory=list)

    def env(self) -> dict[str, str]:
        """The environment Slurm's commands need to talk to this cluster."""
        return {**os.environ, "SLURM_CONF": self.slurm_conf}


# ---------------------------------------------------------------------------------------------- processes


def _start_ticks(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Field 2 (comm) may hold spaces: the fields after it start after the last ')'.
    return int(stat[stat.rindex(")") + 2:].split()[19])


def alive(d: Daemon) -> bool:
    """True when the recorded process is still the one we started (same pid, same start time, not a zombie)."""
    ticks = _start_ticks(d.pid)
    if ticks != d.start_ticks:
        return False
    try:
        state = Path(f"/proc/{d.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _spawn(name: str, argv: list[str], log: Path, env: dict[str, str]) -> Daemon:
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True, close_fds=True)
    ticks = _start_ticks(proc.pid)
    # Popen keeps no reference we need: the daemon outlives this process and is reaped by init after we exit.
    return Daemon(name=name, pid=proc.pid, start_ticks=ticks or 0, argv=argv)


def _stop(d: Daemon, grace_s: float = 10.0) -> None:
    if not alive(d):
        return
    try:
        os.kill(d.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        _reap(d.pid)
        if not alive(d):
            return
        time.sleep(0.05)
    if alive(d):
        os.kill(d.pid, signal.SIGKILL)
        for _ in range(100):
            _reap(d.pid)
            if not alive(d):
                break
            time.sleep(0.02)


def _reap(pid: int) -> None:
    """Reap our own child (a daemon started by this very process, as a test fixture may do)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _wait(what: str, ready: Callable[[], bool], timeout_s: float, hint: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(0.1)
    raise SlurmSetupError(f"{what} did not happen within {timeout_s:.0f} s ({hint})")


# ---------------------------------------------------------------------------------------------- config


def check_installed() -> None:
    missing = [p for p in _PROGRAMS if shutil.which(p) is None]
    if not (SLURM_PLUGIN_DIR / "job_submit_lua.so").exists():
        missing.append("job_submit_lua.so (slurm-wlm's lua plugin)")
    if missing:
        raise SlurmSetupError(f"Slurm is not installed on this machine (missing: {', '.join(missing)}): {_APT_HINT}")


def _port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


def _dirs(state: Path) -> dict[str, Path]:
    return {k: state / k for k in ("etc", "munge", "ctld", "spool", "run", "log", "placements", "controller")}


# ---------------------------------------------------------------------------------------------- up / down


def load_state(state_dir: Path) -> ClusterState | None:
    path = state_dir / "cluster.json"
    if not path.exists():
        return None
    return ClusterState.model_validate_json(path.read_text())


def _save_state(st: ClusterState) -> None:
    path = Path(st.state_dir) / "cluster.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(st.model_dump_json(indent=2))
    os.replace(tmp, path)


def _scontrol_ping(st: ClusterState) -> bool:
    r = subprocess.run(["scontrol", "ping"], env=st.env(), capture_output=True, text=True, timeout=20)
    return r.returncode == 0 and " is UP" in r.stdout


def _sinfo(st: ClusterState, fmt: str) -> list[str]:
    r = subprocess.run(["sinfo", "-h", "-N", "-o", fmt], env=st.env(), capture_output=True, text=True, timeout=20)
    return r.stdout.splitlines()


def node_states(st: ClusterState) -> dict[str, str]:
    """Node name -> sinfo's long state (lower case, with its flag suffix such as '*' not responding)."""
    return {p[0]: p[1].lower() for p in (line.split("|") for line in _sinfo(st, "%N|%T")) if len(p) == 2}


# A node is up when its slurmd answers: idle, running jobs (of a previous life, after a restart), or drained by
# an operator or by Slurm itself (a drain outlives a restart of slurmctld; waiting for such a node to be idle
# would wait for ever). Not responding ('*'), down or unknown is not up.
_UP_STATES = ("idle", "mixed", "allocated", "completing", "drained", "draining", "drain", "reserved", "planned", "maint")


def _unready(st: ClusterState) -> dict[str, str]:
    """The nodes that are not up yet, with their states."""
    states = node_states(st)
    return {n: states.get(n, "missing") for n in st.nodes
            if states.get(n, "").endswith("*") or states.get(n, "").rstrip("~#!%$@^-") not in _UP_STATES}


def drained(st: ClusterState) -> dict[str, str]:
    """Drained or draining nodes -> the reason Slurm gives."""
    rows = (line.split("|", 2) for line in _sinfo(st, "%N|%T|%E"))
    return {p[0]: p[2] or "no reason given" for p in rows if len(p) == 3 and p[1].lower().startswith("drain")}


def _daemon_argv(st: ClusterState, name: str) -> list[str]:
    d = _dirs(Path(st.state_dir))
    if name == "munged":
        return ["munged", "--force", "--foreground", f"--key-file={d['munge'] / 'munge.key'}",
                f"--socket={d['munge'] / 'munge.socket'}", f"--pid-file={d['munge'] / 'munged.pid'}",
                f"--log-file={d['log'] / 'munged.log'}", f"--seed-file={d['munge'] / 'munged.seed'}"]
    if name == "slurmctld":
        return ["slurmctld", "-D", "-f", st.slurm_conf]
    node = name.split(":", 1)[1]
    return ["slurmd", "-D", "-f", st.slurm_conf, "-N", node]


def up(spec: ClusterSpec, progress: Callable[[str], None] = lambda s: None, timeout_s: float = 60.0) -> ClusterState:
    """Start (or complete) the local cluster; returns its state once ``scontrol ping`` and every slurmd answer."""
    check_installed()
    if spec.nodes < 1 or spec.nodes > 64:
        raise InputError(f"--nodes must be 1..64, not {spec.nodes}")
    if not 1 <= spec.cmax <= 64:
        raise InputError(f"--cmax must be 1..64, not {spec.cmax}")
    if not 1024 <= spec.port <= 65535 - spec.nodes - 1:
        raise InputError(f"--port must leave room for slurmctld and {spec.nodes} slurmd ports below 65536")
    if not JOB_SUBMIT_LUA.exists():
        raise SlurmSetupError(f"{JOB_SUBMIT_LUA} is missing: the checkout is incomplete")
    state_dir = spec.state_dir.resolve()
    cpus = spec.cpus_per_node or len(os.sched_getaffinity(0)) or 1
    st = load_state(state_dir)
    if st is not None and any(alive(d) for d in st.daemons):
        if st.nodes != node_names(spec.nodes) or st.port != spec.port:
            raise InputError(f"a cluster with {len(st.nodes)} nodes on port {st.port} is already up in {state_dir}: "
                             "'cosched slurm down' it first, or use another --state-dir")
        return _complete(st, progress, timeout_s)
    ports = [spec.port + k for k in range(spec.nodes + 1)]
    busy = [p for p in ports if _port_in_use(p)]
    if busy:
        raise SlurmSetupError(f"port{'s' if len(busy) > 1 else ''} {', '.join(map(str, busy))} "
                              f"in use (another Slurm or another local cluster?): choose another --port")
    dirs = _dirs(state_dir)
    for k, p in dirs.items():
        p.mkdir(parents=True, exist_ok=True)
        if k in ("munge", "log"):
            os.chmod(p, 0o700)  # munged refuses a key or log directory others can write to
    os.chmod(state_dir, 0o755)
    key = dirs["munge"] / "munge.key"
    if not key.exists():
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(1024))
    conf = dirs["etc"] / "slurm.conf"
    conf.write_text(slurm_conf_text(spec, cpus, dirs))
    (dirs["etc"] / "plugstack.conf").write_text(plugstack_text(spec, dirs["placements"]))
    # job_submit/lua reads job_submit.lua beside slurm.conf.
    shutil.copyfile(JOB_SUBMIT_LUA, dirs["etc"] / "job_submit.lua")
    st = ClusterState(state_dir=str(state_dir), slurm_conf=str(conf), port=spec.port, nodes=node_names(spec.nodes),
                      cpus_per_node=cpus, partition=spec.partition, plain_partition=PLAIN_PARTITION, cmax=spec.cmax,
                      placement_dir=str(dirs["placements"]),
                      plugin=str(spec.plugin) if spec.plugin is not None and spec.plugin.exists() else None)
    _save_state(st)
    return _complete(st, progress, timeout_s)


def _complete(st: ClusterState, progress: Callable[[str], None], timeout_s: float) -> ClusterState:
    """Start every daemon of ``st`` that is not running, then wait for the cluster to answer."""
    d = _dirs(Path(st.state_dir))
    running = {x.name: x for x in st.daemons if alive(x)}
    wanted = ["munged", "slurmctld", *(f"slurmd:{n}" for n in st.nodes)]
    env = {k: v for k, v in st.env().items() if not k.startswith("SLURM_") or k == "SLURM_CONF"}
    daemons: list[Daemon] = []
    for name in wanted:
        if name in running:
            daemons.append(running[name])
            continue
        progress(f"starting {name}")
        if name == "munged":
            sock = d["munge"] / "munge.socket"
            sock.unlink(missing_ok=True)
        daemon = _spawn(name, _daemon_argv(st, name), d["log"] / f"{name.replace(':', '-')}.out", env)
        daemons.append(daemon)
        st.daemons = daemons + [x for x in st.daemons if x.name not in {y.name for y in daemons}]
        _save_state(st)  # recorded at once: a failure below still lets 'down' stop what was started
        if name == "munged":
            _wait("munged's socket", lambda: (d["munge"] / "munge.socket").exists() or not alive(daemon), 20,
                  f"see {d['log'] / 'munged.log'}")
            if not alive(daemon):
                raise SlurmSetupError(f"munged exited at once: see {d['log'] / 'munged.log'} and {d['log'] / 'munged.out'}")
        elif name == "slurmctld":
            _wait("'scontrol ping' answering", lambda: not alive(daemon) or _scontrol_ping(st), timeout_s,
                  f"see {d['log'] / 'slurmctld.log'}")
            if not alive(daemon):
                raise SlurmSetupError(f"slurmctld exited at once: see {d['log'] / 'slurmctld.log'}")
    st.daemons = daemons
    _save_state(st)
    progress("waiting for every node's slurmd to answer")
    try:
        _wait(f"all {len(st.nodes)} nodes up", lambda: not _unready(st), timeout_s, "")
    except SlurmSetupError:
        late = ", ".join(f"{n} {s}" for n, s in _unready(st).items())
        raise SlurmSetupError(f"not every node answered within {timeout_s:.0f} s ({late}): "
                              f"see {d['log']}/slurmd-*.log, then 'cosched slurm up' again") from None
    for node, why in drained(st).items():
        progress(f"{node} is drained ({why}): 'scontrol update NodeName={node} State=RESUME' returns it to service")
    dead = [x.name for x in daemons if not alive(x)]
    if dead:
        raise SlurmSetupError(f"{', '.join(dead)} exited: see the logs in {d['log']}")
    return st


def down(state_dir: Path, progress: Callable[[str], None] = lambda s: None) -> bool:
    """Cancel the cluster's jobs and stop every daemon ``up`` started; False when nothing was up."""
    st = load_state(state_dir.resolve())
    if st is None or not any(alive(d) for d in st.daemons):
        return False
    ctld = next((d for d in st.daemons if d.name == "slurmctld"), None)
    if ctld is not None and alive(ctld):
        progress("cancelling the cluster's jobs")
        _cancel_all(st)
    for name in [d.name for d in st.daemons if d.name.startswith("slurmd:")] + ["slurmctld", "munged"]:
        for d in st.daemons:
            if d.name == name:
                progress(f"stopping {name} (pid {d.pid})")
                _stop(d)
    stepds = _our_stepds(st)  # steps of jobs slurmctld could not cancel (it was down): theirs is our cluster
    for pid in _with_descendants(stepds):
        progress(f"stopping a leftover job process (pid {pid})")
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    st.daemons = []
    _save_state(st)
    return True


def _with_descendants(roots: list[int]) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat[stat.rindex(")") + 2:].split()[1]), []).append(int(entry.name))
    out, todo = [], list(roots)
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _our_stepds(st: ClusterState) -> list[int]:
    """slurmstepd processes of this cluster: started by its slurmd, they carry its SLURM_CONF."""
    mine = f"SLURM_CONF={st.slurm_conf}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() != "slurmstepd":
                continue
            if mine in (entry / "environ").read_bytes().split(b"\0"):
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def _cancel_all(st: ClusterState, timeout_s: float = 15.0) -> None:
    env = st.env()
    r = subprocess.run(["squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True, timeout=20)
    ids = r.stdout.split()
    if not ids:
        return
    subprocess.run(["scancel", *ids], env=env, capture_output=True, timeout=20)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        r = subprocess.run(["squeue", "-h", "-t", "PD,R,CG,CF,S", "-o", "%i"], env=env, capture_output=True, text=True,
                           timeout=20)
        if r.returncode != 0 or not r.stdout.split():
            return
        time.sleep(0.2)


def describe(st: ClusterState) -> dict[str, object]:
    """What ``up`` prints: the cluster and how to talk to it."""
    return {"state_dir": st.state_dir, "slurm_conf": st.slurm_conf, "nodes": st.nodes, "cpus_per_node": st.cpus_per_node,
            "partition": st.partition, "plain_partition": st.plain_partition, "cmax": st.cmax,
            "placement_dir": st.placement_dir, "plugin": st.plugin,
            "daemons": [{"name": d.name, "pid": d.pid, "running": alive(d)} for d in st.daemons]}


def dumps(st: ClusterState) -> str:
    return json.dumps(describe(st), indent=2)


def cluster_for(state_dir: Path | None) -> ClusterState:
    """The cluster to talk to: the one in ``state_dir`` (default: the default state dir) that is up."""
    sd = (state_dir or default_state_dir()).resolve()
    st = load_state(sd)
    if st is None:
        raise RunError(f"no local cluster in {sd}: start one with 'cosched slurm up' (or give --state-dir)")
    return st
