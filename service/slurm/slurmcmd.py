"""Slurm's own commands, machine-readable: what the controller reads (jobs, nodes) and does (pin, release).

``squeue --json`` and ``sinfo --json`` (Slurm 22.05's OpenAPI v0.0.38 documents; ``squeue --json`` ignores
-p/-t filters there, so jobs are filtered here). Writes are ``scontrol update`` and one ``scontrol release``
per group (the group's jobs are released in one request, so one scheduling pass starts them together);
``scontrol hold`` and ``scancel`` only for a job that started (its start recorded by the SPANK plugin) and that
a restarted slurmctld shows pending, or running after its recorded end; ``scontrol write batch_script`` keeps a --wrap job's script, for its resubmission if Slurm loses it.
``SlurmAPI`` is the protocol the controller uses; bench/slurm_scale.py drives it with a simulated cluster.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from typing import Protocol

from env.errors import RunError

# Job states in which a job no longer runs or will run (squeue shows them until MinJobAge).
FINISHED = frozenset({"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
                      "DEADLINE", "OUT_OF_MEMORY", "SPECIAL_EXIT", "REVOKED"})
HELD_REASONS = frozenset({"JobHeldUser", "JobHeldAdmin"})
MARK = "cosched"  # the admin comment job_submit.lua gives the jobs the controller manages: 'cosched:OPTS'


class SlurmUnavailable(RunError):
    """slurmctld did not answer (down, restarting): the controller retries, changing nothing."""


@dataclass(frozen=True)
class SlurmJob:
    job_id: int
    name: str
    partition: str
    state: str  # PENDING, RUNNING, COMPLETED, ...
    reason: str
    priority: int
    admin_comment: str
    comment: str
    nodes: str
    submit_time: int
    start_time: int
    # What an operator needs to submit the job again if Slurm loses it (squeue's fields; command is the script
    # with its arguments, empty for --wrap).
    command: str = ""
    workdir: str = ""
    user: str = ""
    stdout: str = ""
    restarts: int = 0

    @property
    def managed(self) -> bool:
        """Marked by job_submit.lua for the controller (users cannot set an admin comment)."""
        return self.admin_comment == MARK or self.admin_comment.startswith(MARK + ":")

    @property
    def options(self) -> list[str]:
        """The job's --cosched options ('strict', 'pinrt')."""
        _, _, opts = self.admin_comment.partition(":")
        return [o for o in opts.split(",") if o]

    @property
    def held(self) -> bool:
        return self.state == "PENDING" and (self.priority == 0 or self.reason in HELD_REASONS)

    @property
    def finished(self) -> bool:
        return self.state in FINISHED

    def _comment(self, key: str) -> str | None:
        """The first non-empty value of 'KEY=VALUE' in the job's comment (words split by spaces or commas), or None."""
        for word in self.comment.replace(",", " ").split():
            k, sep, value = word.partition("=")
            if sep and k == key and value:
                return value
        return None

    @property
    def profile(self) -> str:
        """The profile the job asks for: 'profile=NAME' in its comment, else its job name."""
        return self._comment("profile") or self.name

    @property
    def solo_s(self) -> float | None:
        """The job's own time alone on the whole node, 'solo_s=SECONDS' in its comment (its user knows it better
        than its program's profile); None when absent or not seconds in (0, 1e8] (``bad_solo_s`` says so)."""
        try:
            v = float(self._comment("solo_s") or "nan")
        except ValueError:
            return None
        return v if 0 < v <= 1e8 else None

    @property
    def bad_solo_s(self) -> str | None:
        """The comment's solo_s when it is given and not seconds in (0, 1e8], else None."""
        raw = self._comment("solo_s")
        return raw if raw is not None and self.solo_s is None else None


@dataclass(frozen=True)
class SlurmNode:
    name: str
    cpus: int
    state: str  # idle, mixed, allocated, down, drained, ...
    partitions: tuple[str, ...]

    @property
    def idle(self) -> bool:
        return self.state == "idle"

    @property
    def unusable(self) -> bool:
        """Drained, down or failed: a job pinned to it does not start until an operator resumes it."""
        return any(w in self.state for w in ("drain", "down", "fail"))


class SlurmAPI(Protocol):
    def jobs(self) -> list[SlurmJob]: ...

    def nodes(self) -> list[SlurmNode]: ...

    def pin(self, job_id: int, node: str, cpus: int) -> None: ...

    def release(self, job_ids: list[int]) -> None: ...

    def cancel(self, job_id: int) -> None: ...


class JobGone(RunError):
    """A job the controller acts on no longer exists or is no longer pending (cancelled meanwhile)."""


class SlurmCommands:
    """SlurmAPI through squeue/sinfo/scontrol with the environment given (SLURM_CONF)."""

    def __init__(self, env: dict[str, str] | None = None, timeout_s: float = 30.0) -> None:
        self.env = env
        self.timeout_s = timeout_s

    def _run(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=self.timeout_s)
        except FileNotFoundError:
            raise RunError(f"{argv[0]} is not installed: install slurm-wlm (make setup)") from None
        except subprocess.TimeoutExpired:
            raise SlurmUnavailable(f"{' '.join(argv[:2])} did not answer within {self.timeout_s:.0f} s") from None

    def _json(self, argv: list[str]) -> dict:
        r = self._run(argv)
        if r.returncode != 0:
            raise SlurmUnavailable(f"{' '.join(argv)} failed: {_first_line(r.stderr or r.stdout)}")
        try:
            doc = json.loads(r.stdout)
        except json.JSONDecodeError:
            raise SlurmUnavailable(f"{' '.join(argv)} printed no JSON: {_first_line(r.stdout)}") from None
        # With slurmctld down, 22.05 still exits 0 and prints an empty list beside its errors: an empty queue
        # read as the truth would make every journaled job look cancelled.
        errors = doc.get("errors") or []
        if errors:
            e = errors[0]
            raise SlurmUnavailable(f"{argv[0]} --json: {e.get('description') or e.get('error') or e}")
        return doc

    def jobs(self) -> list[SlurmJob]:
        doc = self._json(["squeue", "--json"])
        return [SlurmJob(job_id=int(j["job_id"]), name=j.get("name") or "", partition=j.get("partition") or "",
                         state=j.get("job_state") or "", reason=j.get("state_reason") or "",
                         priority=int(j.get("priority") or 0), admin_comment=j.get("admin_comment") or "",
                         comment=j.get("comment") or "", nodes=j.get("nodes") or "",
                         submit_time=int(j.get("submit_time") or 0), start_time=int(j.get("start_time") or 0),
                         command=j.get("command") or "", workdir=j.get("current_working_directory") or "",
                         user=j.get("user_name") or "", stdout=j.get("standard_output") or "",
                         restarts=int(j.get("restart_cnt") or 0))
                for j in doc.get("jobs", [])]

    def nodes(self) -> list[SlurmNode]:
        doc = self._json(["sinfo", "--json"])
        # A drained node is 'idle' with the flag DRAIN: its state here is 'idle+drain', never idle.
        return [SlurmNode(name=n["name"], cpus=int(n.get("cpus") or 0),
                          state="+".join([(n.get("state") or "").lower(), *(f.lower() for f in n.get("state_flags") or ())]),
                          partitions=tuple(n.get("partitions") or ()))
                for n in doc.get("nodes", [])]

    def pin(self, job_id: int, node: str, cpus: int) -> None:
        """The job runs on ``node`` with all its CPUs (the partition lets Cmax jobs share them; the placement
        file narrows each job to its plan's CPUs)."""
        self._scontrol(["update", f"JobId={job_id}", f"ReqNodeList={node}", "NumNodes=1", f"NumCPUs={cpus}",
                        f"MinCPUsNode={cpus}"], job_id)

    def release(self, job_ids: list[int]) -> None:
        self._scontrol(["release", ",".join(map(str, job_ids))], job_ids[0] if len(job_ids) == 1 else None)

    def hold(self, job_id: int) -> None:
        self._scontrol(["hold", str(job_id)], job_id)

    def cancel(self, job_id: int) -> None:
        r = self._run(["scancel", str(job_id)])
        if r.returncode != 0:
            raise RunError(f"scancel {job_id}: {_first_line(r.stderr or r.stdout)}")

    def save_script(self, job_id: int, path: str) -> bool:
        """Writes the job's batch script (kept by slurmctld; a --wrap job has no file of its own) to ``path``."""
        r = self._run(["scontrol", "write", "batch_script", str(job_id), path])
        return r.returncode == 0

    def _scontrol(self, args: list[str], job_id: int | None) -> None:
        r = self._run(["scontrol", *args])
        if r.returncode == 0:
            return
        msg = _first_line(r.stderr or r.stdout)
        low = msg.lower()
        if "invalid job id" in low or "already finished" in low or "no longer pending" in low or "already completing" in low:
            raise JobGone(f"job {job_id if job_id is not None else args[-1]}: {msg}")
        if "unable to contact" in low or "connection refused" in low or "timed out" in low:
            raise SlurmUnavailable(f"scontrol {args[0]}: {msg}")
        raise RunError(f"scontrol {' '.join(args)}: {msg}")


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[0] if lines else "(no output)"
