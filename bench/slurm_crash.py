#!/usr/bin/env python3
"""Exactly once across crashes, on real daemons (measured): a stream of co-scheduled jobs (and a few plain ones)
through Slurm and the window controller, with the controller SIGKILLed mid-stream and restarted, then slurmctld
SIGKILLed (no state save, as in a real crash) and restarted from the state it last saved, while more jobs arrive.

For every job it counts how many times it ran (the 'start' lines of the job's own output, appended by every run)
and what the controller said of it. A job runs once; a job Slurm lost (no longer in its queue after the restart:
its id may now be another job's) is reported as lost by the controller's log, by its name; no job Slurm still
knows is left unrun; plain jobs are never journaled, placed or held. Prints one table (or --json).

slurmctld is killed at a moment when no released job is between its release and its launch (every running job has
started, none released waits to be allocated; the controller is paused with SIGSTOP for that moment, so that it
releases nothing meanwhile, and continued after the restart): a job caught between allocation and launch is
believed running by the restarted slurmctld, which requeues it only when its node next registers (measured: about
6.5 minutes later), and then it runs once; waiting for that is out of this bench's time. The wait is bounded
(--settle) and said in the output when it expired. So is the wait for the end (--end-wait): a job a slurmd refused
(it ran a job of that id before a restart gave the id again) is requeued by Slurm and waits its credential's life
and the next scheduling pass (about a minute on the local cluster) before it starts elsewhere.

    .venv/bin/python bench/slurm_crash.py [--jobs 24] [--plain 3] [--json]      # its own 4-node cluster, port 16880
    .venv/bin/python bench/slurm_crash.py --cluster STATE_DIR ...                # a cluster 'cosched slurm up' made
    .venv/bin/python bench/slurm_crash.py --mode continuous ...                  # the controller in continuous mode

Its own cluster profiles the 'nap' program once in a temporary COSCHED_HOME (a minute); needs 'make setup' and
'make native'.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from service.slurm import placement
from service.slurm.cluster import alive, drained, load_state

PORT = 16880
HELD = ("JobHeldUser", "JobHeldAdmin")
ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL")


class Run:
    def __init__(self, env: dict[str, str], state: Path, work: Path, seed: int, stale_after: float,
                 mode: str = "groups") -> None:
        self.env, self.state, self.work = env, state, work
        self.rng = random.Random(seed)
        st = load_state(state)
        if st is None:
            raise SystemExit(f"no cluster in {state}")
        self.st = st
        self.ctl_dir = work / "controller"  # cosched slurm run --state-dir WORK keeps its journal and log here
        self.jobs: dict[str, int] = {}  # tag -> the id Slurm gave it
        self.plain: list[str] = []
        self.ctl: subprocess.Popen[bytes] | None = None
        self.notes: list[str] = []
        self.unsettled: list[str] = []  # what settled() last found not settled
        self.stale_after = stale_after
        self.mode = mode
        self.t0 = time.time()
        self.run_id = f"{seed}{os.getpid() % 1000:03d}"  # job names unique to this run (a cluster may have older ones)

    # ------------------------------------------------------------------ Slurm and the controller

    def sh(self, *argv: str, check: bool = True) -> str:
        r = subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=60, check=False)
        if check and r.returncode != 0:
            raise SystemExit(f"{' '.join(argv[:3])} failed: {r.stderr.strip()}")
        return r.stdout

    def squeue(self) -> dict[str, dict]:
        """Slurm's jobs by name (each job's tag), or {} while slurmctld does not answer."""
        r = subprocess.run(["squeue", "--json"], env=self.env, capture_output=True, text=True, timeout=60, check=False)
        try:
            doc = json.loads(r.stdout)
        except json.JSONDecodeError:
            return {}
        if doc.get("errors"):
            return {}
        return {j["name"]: j for j in doc.get("jobs", [])}

    def submit(self, tag: str, seconds: float, cosched: bool) -> None:
        script = self.work / f"{tag}.sh"
        script.write_text("#!/bin/sh\n"
                          'echo "start $SLURM_JOB_ID $(date +%s.%N) $SLURMD_NODENAME"\n'
                          f"sleep {seconds}\n"
                          'echo "end $SLURM_JOB_ID $(date +%s.%N)"\n')
        argv = ["sbatch", "--parsable", "-J", tag, "-o", str(self.work / f"{tag}.out"), "--open-mode=append",
                "--comment", "profile=nap"]
        if cosched:
            argv.append("--cosched")
        else:
            argv += ["-p", self.st.plain_partition]
        jid = int(self.sh(*argv, str(script)).strip().split(";")[0])
        if cosched:
            self.jobs[tag] = jid
        else:
            self.plain.append(tag)

    def stream(self, prefix: str, n: int, gap_s: float, plain_every: int) -> None:
        for k in range(n):
            self.submit(f"{prefix}{k:02d}-{self.run_id}", self.rng.choice((1, 2, 3)), cosched=True)
            if plain_every and len(self.jobs) % plain_every == 0:
                self.submit(f"plain-{prefix}{k:02d}-{self.run_id}", 1, cosched=False)
            time.sleep(gap_s)

    def start_controller(self) -> None:
        self.ctl_dir.mkdir(parents=True, exist_ok=True)
        with open(self.ctl_dir / "stderr.txt", "ab") as err:
            self.ctl = subprocess.Popen(
                [sys.executable, "-m", "service.cli", "slurm", "run", "--state-dir", str(self.work), "--placement-dir",
                 self.st.placement_dir, "--poll", "0.3", "--gather", "0.5", "--window", "4",
                 "--stale-after", str(self.stale_after), "--mode", self.mode], env=self.env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)

    def log(self) -> str:
        p = self.ctl_dir / "controller.log"
        return p.read_text() if p.exists() else ""

    def kill_controller(self) -> None:
        assert self.ctl is not None
        os.kill(self.ctl.pid, signal.SIGKILL)
        self.ctl.wait(timeout=30)

    def started(self, tag: str, what: str = "start ") -> int:
        """How many times the job started (or, with what='end ', ended), from its own output."""
        p = self.work / f"{tag}.out"
        return sum(line.startswith(what) for line in p.read_text().splitlines()) if p.exists() else 0

    def wait(self, what: str, ready, timeout: float, why=None) -> bool:  # type: ignore[no-untyped-def]
        """Polls ready() until it holds; else a note of what did not happen in time (and why(), what is left)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return True
            time.sleep(0.3)
        self.notes.append(f"{what}: not within {timeout:.0f} s" + (f" ({why()})" if why else ""))
        return False

    def seen_all(self) -> bool:
        """The controller has journaled every co-scheduled job Slurm lists held (so a loss can be reported)."""
        path = self.ctl_dir / "journal.sqlite"
        if not path.exists():
            return False
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
        try:
            seen = {r[0] for r in db.execute("SELECT name FROM seen")}
        except sqlite3.Error:
            return False
        finally:
            db.close()
        q = self.squeue()
        return bool(q) and all(t in seen for t, j in q.items() if t in self.jobs and j["state_reason"] in HELD)

    def calm(self) -> bool:
        """No released job between its release and its launch: every job Slurm runs has started, and no released
        co-scheduled job waits to be allocated (one Slurm requeued waits for its begin time: a minute, not a moment)."""
        q = self.squeue()
        return bool(q) and all(self.started(t) > 0 for t, j in q.items()
                               if j["job_state"] == "RUNNING" and (t in self.jobs or t in self.plain)) and not any(
            j["job_state"] == "PENDING" and j["state_reason"] not in (*HELD, "BeginTime")
            for t, j in q.items() if t in self.jobs)

    def pause_controller(self, stop: bool) -> None:
        """SIGSTOP (stop) or SIGCONT: a paused controller releases nothing while slurmctld is killed."""
        assert self.ctl is not None
        os.kill(self.ctl.pid, signal.SIGSTOP if stop else signal.SIGCONT)

    def kill_slurmctld(self) -> None:
        ctld = next(d for d in self.st.daemons if d.name == "slurmctld")
        os.kill(ctld.pid, signal.SIGKILL)
        for _ in range(200):
            if not alive(ctld):
                break
            time.sleep(0.05)

    def restart_slurmctld(self) -> None:
        slurm_up(self.env, self.state, len(self.st.nodes), self.st.port)
        st = load_state(self.state)
        assert st is not None
        self.st = st

    # ------------------------------------------------------------------ the end

    def settled(self) -> bool:
        """Every job ran, ended or was reported; what is not yet is kept in self.unsettled for the timeout's note."""
        q = self.squeue()
        if not q:
            self.unsettled = ["squeue does not answer"]
            return False
        log = self.log()
        waiting = []
        for tag, jid in self.jobs.items():
            j = q.get(tag)
            if j is None:
                if f"({tag}, partition" not in log and not self.started(tag, "end "):
                    waiting.append(f"{tag} (job {jid}) gone from Slurm, not reported lost")
            elif j["job_state"] not in ENDED and not (j["state_reason"] in HELD and f"job {jid} started" in log):
                waiting.append(f"{tag} (job {jid}) {j['job_state']}, reason {j['state_reason']}, node "
                               f"{j.get('nodes') or '-'}, ran {self.started(tag)}x")
        # plain jobs: ran to their end (a restarted slurmctld may show one running for minutes after), or ended
        waiting += [f"{t} (plain) {q[t]['job_state']}" for t in self.plain
                    if t in q and not (self.started(t, "end ") or q[t]["job_state"] in ENDED)]
        self.unsettled = waiting
        return not waiting

    def outcome(self) -> dict:
        q = self.squeue()
        log = self.log()
        per_job = []
        for tag, jid in sorted(self.jobs.items()):
            j = q.get(tag)
            runs = self.started(tag)
            lost_line = next((ln for ln in log.splitlines() if f"({tag}, partition" in ln and "lost by Slurm" in ln), None)
            row = {"tag": tag, "job_id": jid, "runs": runs, "ends": self.started(tag, "end "),
                   "in_slurm": j is not None,
                   "slurm_state": j["job_state"] if j else None, "reported_lost": lost_line is not None,
                   "lost_line": lost_line,
                   "record": (Path(self.st.placement_dir) / "started" / f"{jid}.batch.0").exists()}
            if j is not None and runs == 0:  # known to Slurm, never ran: what Slurm and the controller say of it
                row.update(self.diagnose(jid, j, log))
            per_job.append(row)
        seen_names = set()
        path = self.ctl_dir / "journal.sqlite"
        if path.exists():
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            seen_names = {r[0] for r in db.execute("SELECT name FROM seen")}
            db.close()
        plain = [{"tag": t, "runs": self.started(t), "journaled": t in seen_names,
                  "state": q[t]["job_state"] if t in q else None, "partition": q[t]["partition"] if t in q else None}
                 for t in self.plain]
        counts = {
            "jobs": len(per_job),
            "ran_once": sum(p["runs"] == 1 for p in per_job),
            "ran_twice_or_more": sum(p["runs"] >= 2 for p in per_job),
            "lost_by_slurm": sum(not p["in_slurm"] for p in per_job),
            # Slurm lost their record after they had run to their end: nothing to resubmit, nothing reported
            "lost_after_their_end": sum(not p["in_slurm"] and p["ends"] > 0 for p in per_job),
            "lost_before_their_end": sum(not p["in_slurm"] and p["ends"] == 0 for p in per_job),
            "lost_before_their_end_reported": sum(not p["in_slurm"] and p["ends"] == 0 and p["reported_lost"]
                                                  for p in per_job),
            "lost_and_never_ran": sum(not p["in_slurm"] and p["runs"] == 0 for p in per_job),
            "known_to_slurm_unrun": sum(p["in_slurm"] and p["runs"] == 0 for p in per_job),
            "held_again_reported": log.count("a slurmctld restart brought it back"),
            # the plugin's refusals of this run (its records under the placement directory)
            "second_starts_refused": sum(r.time >= self.t0 for r in placement.refusals(Path(self.st.placement_dir))),
            "cancelled_stale": log.count("cancelled in Slurm so that its node frees"),
            "ids_reused": log.count("a new job with the id of a job Slurm lost"),
            "plain_jobs": len(plain),
            "plain_touched": sum(p["journaled"] or (p["partition"] not in (None, self.st.plain_partition)) for p in plain),
            "plain_ran_twice": sum(p["runs"] >= 2 for p in plain),
        }
        why = drained(self.st)
        counts["nodes_drained"] = len(why)
        return {"label": "measured (real slurmctld, slurmd and controller on this machine)", "counts": counts,
                "notes": self.notes, "jobs": per_job, "plain": plain, "drained": why,
                "drain_lines": self.ctld_lines(re.compile(r"Duplicate|drain", re.I)) if why else []}

    def ctld_lines(self, pat: re.Pattern) -> list[str]:
        """slurmctld's log lines of this run that match ``pat`` (the last 30)."""
        ctld_log = Path(self.st.state_dir) / "log" / "slurmctld.log"
        if not ctld_log.exists():
            return []
        since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(self.t0))
        return [ln for ln in ctld_log.read_text(errors="replace").splitlines() if pat.search(ln) and ln[1:20] >= since][-30:]

    def diagnose(self, jid: int, j: dict, log: str) -> dict:
        """Why a job Slurm knows never ran: its Slurm state, reason and node (squeue), the lines of the controller's
        log and of slurmctld's that name it, and the nodes' states."""
        word = re.compile(rf"(?<![\w.:-]){jid}(?![\w.:])")
        ctl = [ln for ln in log.splitlines() if word.search(ln.split(" ", 1)[-1])]
        ctld = self.ctld_lines(re.compile(rf"(JobId={jid}\b|job_id={jid}\b|JobId={jid}$)"))
        nodes = self.sh("sinfo", "-h", "-N", "-o", "%N|%T|%E", check=False).split()
        return {"slurm_reason": j.get("state_reason"), "slurm_nodes": j.get("nodes"),
                "slurm_required_nodes": j.get("required_nodes"), "slurm_priority": j.get("priority"),
                "controller_lines": ctl, "slurmctld_lines": ctld, "node_states": nodes}

    def clean(self) -> None:
        """Leaves the cluster as it found it: this run's jobs still queued cancelled, drained nodes resumed."""
        q = self.squeue()
        ids = [str(j["job_id"]) for t, j in q.items() if (t in self.jobs or t in self.plain) and j["job_state"] not in ENDED]
        if ids:
            self.sh("scancel", *ids, check=False)
        for node in drained(self.st):  # e.g. 'Duplicate jobid': a slurmd given an id it ran before
            self.sh("scontrol", "update", f"NodeName={node}", "State=RESUME", check=False)


def slurm_up(env: dict[str, str], state: Path, nodes: int, port: int) -> None:
    """'cosched slurm up' (start or restart what is down); its own message when it fails."""
    r = subprocess.run([sys.executable, "-m", "service.cli", "slurm", "up", "--nodes", str(nodes), "--port", str(port),
                        "--state-dir", str(state)], env=env, cwd=ROOT, capture_output=True, text=True, timeout=180)
    if r.returncode != 0:
        raise RuntimeError(f"cosched slurm up failed ({r.returncode}): {r.stderr.strip()}")


def scenario(run: Run, n: int, plain: int, settle: float, end_wait: float) -> dict:
    n1, n2 = n // 3, n // 3
    n3 = n - n1 - n2
    every = max(1, n // plain) if plain else 0
    run.start_controller()
    run.stream("a", n1, 0.3, every)
    run.wait("the controller's first release", lambda: "released" in run.log(), 60)
    run.kill_controller()  # SIGKILL mid-stream: its journal is all the next one knows
    run.start_controller()
    run.stream("b", n2, 0.3, every)
    run.wait("every job seen by the controller", run.seen_all, settle)
    run.pause_controller(True)
    try:
        run.wait("no job between its release and its launch", run.calm, settle)
        run.kill_slurmctld()  # no state save: it restarts from the state it saved seconds ago
        time.sleep(1.0)
        run.restart_slurmctld()
    finally:
        run.pause_controller(False)
    run.stream("c", n3, 0.3, every)
    run.wait("every job ran, ended or was reported", run.settled, end_wait, lambda: "; ".join(run.unsettled))
    out = run.outcome()
    if run.ctl is not None:
        run.ctl.send_signal(signal.SIGTERM)
        run.ctl.wait(timeout=60)
    run.clean()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=24, help="co-scheduled jobs in the stream (default 24)")
    ap.add_argument("--plain", type=int, default=3, help="plain jobs among them (default 3)")
    ap.add_argument("--cluster", type=Path, default=None, help="the state dir of a cluster 'cosched slurm up' made "
                    "(its COSCHED_HOME must hold a 'nap' profile); default: start one of 4 nodes on port 16880")
    ap.add_argument("--work", type=Path, default=None, help="where job scripts, outputs and the controller go")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--settle", type=float, default=30.0, help="seconds to wait for a calm moment to kill slurmctld")
    ap.add_argument("--end-wait", type=float, default=300.0, help="seconds to wait for every job to run, end or be "
                    "reported")
    ap.add_argument("--stale-after", type=float, default=8.0)
    ap.add_argument("--mode", choices=("groups", "continuous"), default="groups", help="the controller's mode")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.jobs < 3:
        raise SystemExit("--jobs must be at least 3")
    tmp = tempfile.TemporaryDirectory(prefix="slurm_crash.")
    work = (args.work or Path(tmp.name) / "work").resolve()
    work.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    own = args.cluster is None
    state = (Path(tmp.name) / "cluster" if own else args.cluster).resolve()
    if own:
        env["COSCHED_HOME"] = str(Path(tmp.name) / "home")
        slurm_up(env, state, 4, PORT)
    st = load_state(state)
    if st is None:
        raise SystemExit(f"no cluster in {state}")
    env["SLURM_CONF"] = st.slurm_conf
    try:
        if own:
            subprocess.run([sys.executable, "-m", "service.cli", "profile", "--name", "nap", "--", "python3", "-c",
                            "import time; time.sleep(1)"], env=env, cwd=ROOT, check=True, capture_output=True, timeout=600)
        t0 = time.monotonic()
        out = scenario(Run(env, state, work, args.seed, args.stale_after, args.mode), args.jobs, args.plain, args.settle,
                       args.end_wait)
        out["mode"] = args.mode
        out["wall_s"] = round(time.monotonic() - t0, 1)
        out["command"] = "bench/slurm_crash.py " + " ".join(sys.argv[1:])
    finally:
        if own:
            subprocess.run([sys.executable, "-m", "service.cli", "slurm", "down", "--state-dir", str(state)], env=env,
                           cwd=ROOT, capture_output=True, timeout=180, check=False)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    c = out["counts"]
    print(f"{c['jobs']} co-scheduled jobs, {c['plain_jobs']} plain; controller ({args.mode} mode) and slurmctld "
          f"SIGKILLed mid-stream ({out['label']}, {out['wall_s']} s)")
    for k, v in c.items():
        print(f"  {k:24s} {v}")
    for note in out["notes"]:
        print(f"  note: {note}")


if __name__ == "__main__":
    main()
