"""A simulated Slurm cluster behind the controller's ``SlurmAPI``: no daemons, simulated time.

For bench/slurm_scale.py (the controller against 1,000 nodes) and for the controller's tests of what real
daemons make hard to time (a job cancelled between planning and start, a crash between two Slurm calls).
It models only what the controller sees: held jobs of job_submit.lua, pin (ReqNodeList, whole-node CPUs),
release (a released job starts at the next ``advance`` if its node has room for it: at most Cmax jobs),
runtimes, and node states. Labelled simulated wherever its figures are shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from service.slurm.slurmcmd import JobGone, SlurmJob, SlurmNode


@dataclass
class _Job:
    job: SlurmJob
    runtime_s: float
    node: str | None = None
    end_s: float | None = None


@dataclass
class SimCluster:
    n_nodes: int
    cpus: int = 2
    partition: str = "cosched"
    cmax: int = 4
    now: float = 0.0
    _jobs: dict[int, _Job] = field(default_factory=dict)
    _next_id: int = 1
    calls: list[tuple[str, tuple[int, ...], str | None]] = field(default_factory=list)  # (verb, job ids, node)

    def __post_init__(self) -> None:
        self.node_names = [f"n{k}" for k in range(1, self.n_nodes + 1)]

    # ------------------------------------------------------------------ what users and job_submit.lua do

    def submit(self, name: str, runtime_s: float = 1.0, *, cosched: str | None = "", comment: str = "") -> int:
        jid = self._next_id
        self._next_id += 1
        managed = cosched is not None
        job = SlurmJob(job_id=jid, name=name, partition=self.partition if managed else "batch", state="PENDING",
                       reason="JobHeldUser" if managed else "Priority", priority=0 if managed else 1,
                       admin_comment=f"cosched:{cosched}" if managed else "", comment=comment, nodes="",
                       submit_time=int(self.now), start_time=0)
        self._jobs[jid] = _Job(job, runtime_s)
        return jid

    def cancel(self, jid: int) -> None:
        j = self._jobs[jid]
        j.job = replace(j.job, state="CANCELLED", reason="None")

    # ------------------------------------------------------------------ SlurmAPI

    def jobs(self) -> list[SlurmJob]:
        return [j.job for j in self._jobs.values()]

    def nodes(self) -> list[SlurmNode]:
        busy: dict[str, int] = {}
        for j in self._jobs.values():
            if j.job.state == "RUNNING" and j.node:
                busy[j.node] = busy.get(j.node, 0) + 1
        return [SlurmNode(name=n, cpus=self.cpus, state="allocated" if busy.get(n) else "idle",
                          partitions=(self.partition, "batch")) for n in self.node_names]

    def pin(self, job_id: int, node: str, cpus: int) -> None:
        j = self._jobs.get(job_id)
        if j is None or j.job.state != "PENDING":
            raise JobGone(f"job {job_id}: Job has already finished")
        j.node = node
        self.calls.append(("pin", (job_id,), node))

    def release(self, job_ids: list[int]) -> None:
        gone = [i for i in job_ids if i not in self._jobs or self._jobs[i].job.state in ("CANCELLED", "COMPLETED")]
        for i in job_ids:
            if i not in gone:
                j = self._jobs[i]
                if j.job.state == "PENDING":
                    j.job = replace(j.job, priority=1, reason="None")
        self.calls.append(("release", tuple(i for i in job_ids if i not in gone), None))
        if gone:
            raise JobGone(f"job {gone[0]}: Job has already finished")

    # ------------------------------------------------------------------ time

    def advance(self, dt: float) -> None:
        """Start released jobs (Slurm's scheduling pass), move time, end jobs whose runtime is over."""
        running: dict[str, int] = {}
        for j in self._jobs.values():
            if j.job.state == "RUNNING" and j.node:
                running[j.node] = running.get(j.node, 0) + 1
        for j in self._jobs.values():
            if j.job.state == "PENDING" and j.job.priority > 0 and j.node and running.get(j.node, 0) < self.cmax:
                running[j.node] = running.get(j.node, 0) + 1
                j.end_s = self.now + j.runtime_s
                j.job = replace(j.job, state="RUNNING", nodes=j.node, start_time=int(self.now))
        self.now += dt
        for j in self._jobs.values():
            if j.job.state == "RUNNING" and j.end_s is not None and j.end_s <= self.now:
                j.job = replace(j.job, state="COMPLETED")

    def clock(self) -> float:
        return self.now

    def started(self, jid: int) -> int:
        """How many times the job was released (the controller must never release one twice)."""
        return sum(1 for verb, ids, _ in self.calls if verb == "release" and jid in ids)
