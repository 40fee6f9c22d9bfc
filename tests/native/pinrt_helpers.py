"""Helpers for the pinning runtime's integration tests: run a real program
with and without libpinrt.so and sample its threads' CPU masks from outside
(/proc/PID/task/*/status, Cpus_allowed_list) while it runs."""
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "native" / "build"
LIB = BUILD / "libpinrt.so"
RUN = BUILD / "pinrt-run"
ACO = BUILD / "aco"
SPIN = BUILD / "spin"


def require_build():
    missing = [p for p in (LIB, RUN, ACO, SPIN) if not p.exists()]
    if missing:
        raise AssertionError(f"native build missing {missing}: run `make -C native` first")


def parse_cpulist(text):
    cpus = set()
    for part in text.strip().split(","):
        if not part:
            continue
        if "-" in part:
            a, b = part.split("-")
            cpus.update(range(int(a), int(b) + 1))
        else:
            cpus.add(int(part))
    return frozenset(cpus)


def allowed_cpus():
    return frozenset(os.sched_getaffinity(0))


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINRT_") and k != "LD_PRELOAD"}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def runtime_env(**pinrt):
    """Environment with the runtime preloaded; keys are PINRT_* without prefix."""
    env = clean_env(**{f"PINRT_{k.upper()}": v for k, v in pinrt.items()})
    env["LD_PRELOAD"] = str(LIB)
    return env


def _sample_tasks(pid):
    """{tid: (comm, cpus)} of the live threads of pid (best effort)."""
    out = {}
    base = f"/proc/{pid}/task"
    try:
        tids = os.listdir(base)
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"{base}/{tid}/status") as f:
                status = f.read()
        except OSError:
            continue
        comm, cpus = "", None
        for line in status.splitlines():
            if line.startswith("Name:"):
                comm = line.split(None, 1)[1] if len(line.split(None, 1)) > 1 else ""
            elif line.startswith("Cpus_allowed_list:"):
                cpus = parse_cpulist(line.split(":", 1)[1])
        if cpus is not None:
            out[int(tid)] = (comm, cpus)
    return out


class Result:
    def __init__(self, rc, out, err, samples):
        self.rc, self.out, self.err, self.samples = rc, out, err, samples

    def masks(self, include_manager=False):
        """Every (tid, cpus) sampled, the manager thread left out by default."""
        for snap in self.samples:
            for tid, (comm, cpus) in snap.items():
                if include_manager or comm != "pinrt-mgr":
                    yield tid, cpus

    def repinned(self, allowed):
        """True when some worker was seen on a strict subset of allowed."""
        return any(cpus < allowed for _, cpus in self.masks())

    def distinct_masks_per_thread(self):
        seen = {}
        for tid, cpus in self.masks():
            seen.setdefault(tid, set()).add(cpus)
        return seen


def run_sampled(cmd, env, period=0.02, timeout=300, comm=None):
    """Runs cmd, sampling its threads' masks until it exits. With comm, only
    snapshots taken once the main thread has that name count (a wrapper such
    as numactl execs the program under the same pid)."""
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    samples = []
    stop = threading.Event()

    def sampler():
        while not stop.is_set():
            snap = _sample_tasks(p.pid)
            if snap and (comm is None or snap.get(p.pid, ("", None))[0] == comm[:15]):
                samples.append(snap)
            time.sleep(period)

    th = threading.Thread(target=sampler, daemon=True)
    th.start()
    try:
        out, err = p.communicate(timeout=timeout)
    finally:
        stop.set()
        th.join()
        if p.poll() is None:
            p.kill()
            p.wait()
    return Result(p.returncode, out, err, samples)


def numactl_cmd(cpus, cmd):
    return ["numactl", f"--physcpubind={cpus}", "--"] + list(cmd)


def have(tool):
    return shutil.which(tool) is not None


def pinrt_lines(err):
    return [l for l in err.splitlines() if l.startswith("pinrt")]


def tmpfile(suffix):
    fd, path = tempfile.mkstemp(suffix=suffix, prefix="pinrt-test-")
    os.close(fd)
    return path
