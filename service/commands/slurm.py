"""``cosched slurm up|down|run|status``: a local Slurm cluster, and the window controller of a co-scheduling
partition (service/slurm/)."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from env.errors import InputError, RunError
from service.slurm import cluster as cl
from service.slurm import clusterconf as cc

_STATE_HELP = "the local cluster's state directory (default $COSCHED_HOME/slurm, i.e. ~/.local/share/cosched/slurm)"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("slurm", help="co-scheduling on a Slurm cluster: a local cluster, the window controller",
                       description="Slurm stays the scheduler: jobs submitted with 'sbatch --cosched' go to the "
                       "co-scheduling partition held (examples/slurm/job_submit.lua); 'cosched slurm run' plans them in "
                       "windows and releases each group together on one node, or (--mode continuous) releases jobs "
                       "onto a node at every job end, and cosched's SPANK plugin applies each job's placement there. 'up'/'down' run a whole cluster on this machine to try it.")
    verbs = p.add_subparsers(dest="slurm_verb", metavar="VERB", parser_class=type(p))
    verbs.required = True

    u = verbs.add_parser("up", help="start a local cluster: munged, slurmctld, N slurmd (idempotent)",
                         description="Start munged (own key and socket), slurmctld and N 'slurmd -N nK' on this machine "
                         "with state under --state-dir, the co-scheduling partition with OverSubscribe=FORCE:Cmax, "
                         "cosched's SPANK plugin and job_submit.lua; wait until 'scontrol ping' answers and the nodes are "
                         "idle. Run again, it restarts only daemons that died. Then: export SLURM_CONF=STATE/etc/slurm.conf")
    u.add_argument("--nodes", type=int, default=4, metavar="N", help="slurmd nodes n1..nN (default 4)")
    u.add_argument("--cpus-per-node", type=int, default=None, metavar="K", help="CPUs each node claims (default: this machine's)")
    u.add_argument("--port", type=int, default=cc.DEFAULT_PORT, help=f"slurmctld's port; node K uses port+K (default {cc.DEFAULT_PORT})")
    u.add_argument("--cmax", type=int, default=4, help="jobs at most sharing a node in the co-scheduling partition (default 4)")
    u.add_argument("--partition", default=cc.DEFAULT_PARTITION, help=f"the co-scheduling partition's name (default {cc.DEFAULT_PARTITION})")
    u.add_argument("--resctrl-root", default=None, help="resctrl root the plugin uses (default: its own, /sys/fs/resctrl)")
    u.add_argument("--state-dir", type=Path, default=None, help=_STATE_HELP)
    u.add_argument("--json", action="store_true", help="print the cluster as one JSON document")
    u.set_defaults(handler=_up)

    d = verbs.add_parser("down", help="cancel the local cluster's jobs and stop every daemon 'up' started",
                         description="Cancel the local cluster's jobs and stop the daemons 'up' started, by their "
                         "recorded pids. Nothing up: nothing to do (exit 0).")
    d.add_argument("--state-dir", type=Path, default=None, help=_STATE_HELP)
    d.set_defaults(handler=_down)

    r = verbs.add_parser("run", help="the window controller of a co-scheduling partition",
                         description="Watch the held jobs of PARTITION (submitted with --cosched), plan them in windows "
                         "of W (in process, or POST /schedule of --service), write each job's placement file, pin each "
                         "group's jobs to one free node and release them together. Its journal makes a restart safe: "
                         "no job is lost or started twice, and jobs it did not mark are never touched. Talks to the "
                         "cluster of $SLURM_CONF, else to the local cluster of --state-dir.")
    r.add_argument("--partition", default=cc.DEFAULT_PARTITION, help=f"the co-scheduling partition (default {cc.DEFAULT_PARTITION})")
    r.add_argument("--window", type=int, default=8, metavar="W", help="jobs planned together at most (default 8)")
    r.add_argument("--cmax", type=int, default=4, metavar="C", help="jobs at most in one group (default 4)")
    r.add_argument("--gather", type=float, default=2.0, metavar="S",
                   help="seconds a partial window waits for more jobs; in continuous mode, a job waits this long before it "
                   "takes a whole idle node alone (default 2)")
    r.add_argument("--poll", type=float, default=1.0, metavar="S", help="seconds between cycles (default 1)")
    r.add_argument("--stale-after", type=float, default=30.0, metavar="S",
                   help="a job whose end the SPANK plugin recorded S seconds ago and that a restarted slurmctld shows "
                   "running again is cancelled in Slurm so that its node frees (default 30)")
    r.add_argument("--service", default=None, metavar="URL", help="plan with the HTTP service at URL (default: in process)")
    r.add_argument("--plan-node", default="local", metavar="NODE",
                   help="the node kind plans are made for: 'local' (default; the partition's nodes are this machine's kind) or 'sim:NAME'")
    r.add_argument("--mode", choices=("groups", "continuous"), default="groups",
                   help="groups (default): windows planned into groups, each released together on a free node; "
                   "continuous: at every job end (the SPANK plugin's end record) a decision for that node starts "
                   "held jobs beside those still running, no barrier (docs/slurm.md)")
    r.add_argument("--policy", default=None, help="groups: the planning policy (default: as 'cosched schedule'); "
                   "continuous: the stream policy, rollout (default), greedy-continuous, packing or timeshare")
    r.add_argument("--no-learn-lengths", dest="learn_lengths", action="store_false",
                   help="continuous: decide with the profiles' lengths only (default: each program's time alone is "
                   "learned from its jobs that ended on the node, the plugin's start and end records; a job's own "
                   "'solo_s=SECONDS' in its --comment stands either way)")
    r.add_argument("--model", default=None, help="model file for the agent policy")
    r.add_argument("--pinrt-env", action="append", default=[], metavar="KEY=VALUE",
                   help="a PINRT_* setting for jobs run with --cosched=pinrt (repeatable)")
    r.add_argument("--once", action="store_true", help="plan the jobs held now, release them all as nodes free, then exit")
    r.add_argument("--state-dir", type=Path, default=None, help=_STATE_HELP + "; the journal and log are under STATE/controller")
    r.add_argument("--placement-dir", type=Path, default=None, help="where placement files go (default: the local cluster's)")
    r.set_defaults(handler=_run)

    s = verbs.add_parser("status", help="the controller's windows, groups and placements",
                         description="Show the controller's journal: each window's groups, their node and state, each "
                         "job's placement.")
    s.add_argument("--state-dir", type=Path, default=None, help=_STATE_HELP)
    s.add_argument("--json", action="store_true", help="print one JSON document")
    s.set_defaults(handler=_status)


def _say(msg: str) -> None:
    print(f"cosched slurm: {msg}", file=sys.stderr, flush=True)


def _up(args: argparse.Namespace) -> int:
    spec = cc.ClusterSpec(state_dir=args.state_dir or cl.default_state_dir(), nodes=args.nodes,
                          cpus_per_node=args.cpus_per_node, port=args.port, cmax=args.cmax, partition=args.partition,
                          resctrl_root=Path(args.resctrl_root) if args.resctrl_root else None)
    st = cl.up(spec, progress=_say)
    if args.json:
        print(cl.dumps(st))
    else:
        if st.plugin is None:
            _say(f"cosched's SPANK plugin is not built ({cc.SPANK_PLUGIN}): 'make native', then down and up again")
        print(f"cluster up: {len(st.nodes)} nodes ({', '.join(st.nodes)}), {st.cpus_per_node} CPUs each; "
              f"partitions {st.plain_partition} (default) and {st.partition} (OverSubscribe=FORCE:{st.cmax})")
        print(f"export SLURM_CONF={st.slurm_conf}")
    return 0


def _down(args: argparse.Namespace) -> int:
    sd = args.state_dir or cl.default_state_dir()
    if cl.down(sd, progress=_say):
        print(f"cluster in {sd.resolve()} stopped")
    else:
        print(f"no cluster up in {sd.resolve()}")
    return 0


def _controller_paths(args: argparse.Namespace) -> tuple[Path, dict[str, str], Path]:
    """(controller dir, the environment Slurm's commands get, the placement dir)."""
    sd = (args.state_dir or cl.default_state_dir()).resolve()
    st = cl.load_state(sd)
    env = dict(os.environ)
    if "SLURM_CONF" not in env:
        if st is None:
            raise InputError(f"no Slurm to talk to: set SLURM_CONF, or start a local cluster with 'cosched slurm up' "
                             f"(none in {sd})")
        env["SLURM_CONF"] = st.slurm_conf
    pdir = getattr(args, "placement_dir", None) or (Path(st.placement_dir) if st is not None else None)
    if pdir is None:
        raise InputError("--placement-dir is needed (the directory named placement_dir= in plugstack.conf)")
    return sd / "controller", env, Path(pdir)


def _run(args: argparse.Namespace) -> int:
    from service.slurm import planner as planners
    from service.slurm.controller import Controller, ControllerConfig
    from service.slurm.journal import Journal
    from service.slurm.slurmcmd import SlurmCommands

    if not 1 <= args.window <= 1024:
        raise InputError(f"--window must be 1..1024, not {args.window}")
    if not 1 <= args.cmax <= 64:
        raise InputError(f"--cmax must be 1..64, not {args.cmax}")
    if not args.stale_after > 0:
        raise InputError(f"--stale-after must be a number of seconds above 0, not {args.stale_after}")
    pinrt_env: dict[str, str] = {}
    for kv in args.pinrt_env:
        k, sep, v = kv.partition("=")
        if not sep or not k.startswith("PINRT_") or "\n" in v:
            raise InputError(f"--pinrt-env takes PINRT_NAME=VALUE, not {kv!r}")
        pinrt_env[k] = v
    if args.mode == "continuous":
        from service.decide import ONLINE_POLICIES

        if args.service:
            raise InputError("--mode continuous decides in process (service.decide, the code of POST /decide): "
                             "leave out --service, or use --mode groups")
        if args.policy is not None and args.policy not in ONLINE_POLICIES:
            raise InputError(f"--policy {args.policy!r} does not decide at events: choose {', '.join(ONLINE_POLICIES)}")
    cdir, env, pdir = _controller_paths(args)
    cdir.mkdir(parents=True, exist_ok=True)
    logf = open(cdir / "controller.log", "a", buffering=1)

    def log(msg: str) -> None:
        line = f"{datetime.datetime.now().isoformat(timespec='milliseconds')} {msg}"
        logf.write(line + "\n")
        print(f"cosched slurm run: {msg}", file=sys.stderr, flush=True)

    if args.service:
        plan = planners.over_http(args.service)
        plan_node = None
    else:
        from env.sim.nodes import load_node

        node = load_node(args.plan_node)  # bad names fail here, before any job is touched
        plan = planners.in_process(args.plan_node, args.policy if args.mode == "groups" else None, args.model)
        plan_node = node
    journal = Journal(cdir / "journal.sqlite")
    ctl = Controller(ControllerConfig(partition=args.partition, placement_dir=pdir, window=args.window, cmax=args.cmax,
                                      gather_s=args.gather, pinrt_env=pinrt_env, stale_after_s=args.stale_after,
                                      mode=args.mode, policy=args.policy if args.mode == "continuous" else None,
                                      learn_lengths=args.learn_lengths),
                     SlurmCommands(env), plan, journal, plan_node=lambda: plan_node, log=log)
    stopping = {"now": False}

    def _stop(signum: int, _frame: object) -> None:
        stopping["now"] = True

    signal.signal(signal.SIGTERM, _stop)
    log(f"controller started: partition {args.partition}, mode {args.mode}, W={args.window}, Cmax={args.cmax}, "
        f"{'planner' if args.mode == 'groups' else 'decisions'} {args.service or 'in process for ' + args.plan_node}, "
        f"journal {cdir / 'journal.sqlite'}")
    ctl.run(poll_s=args.poll, once=args.once, stop=lambda: stopping["now"])
    log("controller stopped")
    return 0


def status_document(cdir: Path, placement_dir: Path | None, live: dict[int, str] | None = None) -> dict[str, Any]:
    """The journal as a document; ``live``: Slurm's state of each job now, when Slurm answers."""
    from service.slurm import placement
    from service.slurm.journal import Journal

    path = cdir / "journal.sqlite"
    if not path.exists():
        return {"journal": str(path), "windows": []}
    j = Journal(path)
    try:
        groups = j.groups()
        windows = []
        for wid, created, plan_json in j.windows():
            plan = json.loads(plan_json)
            wg = []
            for g in (g for g in groups if g.window_id == wid):
                jobs = []
                for r in j.jobs_of(wid, g.idx):
                    lines = r.placement
                    if lines is None and placement_dir is not None and placement.path_for(placement_dir, r.job_id).exists():
                        lines = placement.path_for(placement_dir, r.job_id).read_text().splitlines()
                    jobs.append({"job_id": r.job_id, "profile": r.profile, "options": r.options, "status": r.status,
                                 "slurm_state": (live or {}).get(r.job_id),
                                 "placement": dict(ln.split("=", 1) for ln in lines) if lines else None,
                                 "note": r.note})
                wg.append({"index": g.idx, "node": g.node, "status": g.status, "solo": g.solo,
                           "predicted_makespan_s": g.predicted_s, "jobs": jobs})
            node = plan.get("node") if plan else None  # a window's plan names its node kind; a decision, its node
            windows.append({"id": wid, "created": created, "mode": plan.get("mode", "groups") if plan else "groups",
                            "policy": plan.get("policy") if plan else None,
                            "planned_for": node.get("name") if isinstance(node, dict) else node, "groups": wg})
        return {"journal": str(path), "windows": windows}
    finally:
        j.close()


def _status(args: argparse.Namespace) -> int:
    from service.slurm.slurmcmd import SlurmCommands

    sd = (args.state_dir or cl.default_state_dir()).resolve()
    st = cl.load_state(sd)
    env = dict(os.environ)
    if "SLURM_CONF" not in env and st is not None:
        env["SLURM_CONF"] = st.slurm_conf
    live = None
    if "SLURM_CONF" in env:
        try:
            live = {j.job_id: j.state for j in SlurmCommands(env, timeout_s=10).jobs()}
        except RunError as exc:  # status shows the journal even when Slurm does not answer
            _say(f"Slurm's job states not shown: {exc}")
    doc = status_document(sd / "controller", Path(st.placement_dir) if st is not None else None, live)
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    from rich.console import Console

    render_status(doc, Console())
    return 0


def render_status(doc: dict[str, Any], console: Any) -> None:
    """``status_document`` as a table for an 80-column terminal: window, group and job ids, nodes and group states
    whole (never cut); each job's placement in one cell (CPUs, memory policy, ``pinrt`` when the pinning runtime is
    loaded); a long profile, state or placement folds onto a second line rather than end in an ellipsis."""
    from rich import box
    from rich.table import Table

    if not doc["windows"]:
        console.print(f"no windows yet (journal {doc['journal']})")
        return
    table = Table(title=f"cosched slurm: {len(doc['windows'])} window(s)", box=box.SIMPLE_HEAD, pad_edge=False,
                  padding=(0, 1), collapse_padding=True)
    for col in ("win", "grp", "node", "group", "job", "profile", "state", "Slurm", "placement"):
        if col in ("profile", "placement"):  # folded onto more lines when the terminal is narrow
            table.add_column(col, overflow="fold", min_width=8)
        else:  # ids and short words: whole, never cut
            table.add_column(col, no_wrap=True, justify="right" if col in ("win", "grp", "job") else "left")
    for w in doc["windows"]:
        for g in w["groups"]:
            for k, jb in enumerate(g["jobs"]):
                p = jb["placement"] or {}
                place = " ".join([p.get("cpus", "whole-node"), p.get("mempolicy", "default")]
                                 + (["pinrt"] if p.get("pinrt", "0") not in ("0", "") else []))
                table.add_row(str(w["id"]) if k == 0 else "", str(g["index"]) if k == 0 else "",
                              (g["node"] or "-") if k == 0 else "", g["status"] if k == 0 else "", str(jb["job_id"]),
                              jb["profile"], jb["status"], (jb["slurm_state"] or "-").lower(), place)
    console.print(table)
