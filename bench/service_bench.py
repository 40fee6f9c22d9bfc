"""Load benchmark of the HTTP service: start-up, latency, throughput and memory of `cosched serve`, one worker.

    .venv/bin/python bench/service_bench.py [--repeat 3] [--concurrency 1,8,32] [--duration 5] [--json]

Each repetition starts `cosched serve --node sim:reference --workers 1` on a free loopback port (stderr, the
JSON access log, goes to a temporary file), times the start to its first 200 from /healthz (wall and the
service's CPU time: on a shared machine the wall time is mostly waiting for a CPU), then drives
POST /schedule from a separate process, `wrk` (one thread, a Lua script rotating W = 6 windows of catalogue
jobs), at each concurrency for a fixed duration after a short warm-up, reads the service's resident memory from
/proc/PID/status (VmRSS now, VmHWM peak) and stops it with SIGTERM. With several repetitions every figure is
the median over them. Two kinds of load: closed loop (each client sends again at once: throughput capacity; by
Little's law its latency is clients / throughput) and paced (--paced-clients clients offering --rate req/s
together with random think times: the latency a client sees at that load). The planner's own time per window
(plan_window in the bench's process) and the service's CPU time per request are printed too: they tell the
service's overhead from the planning, and they hold on a busy machine where wall-clock figures do not. Loopback only; bounded (about repeat x levels x (duration + warm-up) seconds).

Targets (the default greedy planner; this 2-CPU machine, shared, so figures are noisy): p50 <= 5 ms and
p99 <= 25 ms at 32 concurrent clients, >= 300 requests/s, ready within 2 s, resident memory <= 150 MB. With
``--model`` the service plans with agent-search, and the targets are agent-search's: p50 <= 60 ms for one client
(``--concurrency 1``), resident memory <= 150 MB.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
W = 6
TARGETS = {"p50_ms": 5.0, "p99_ms": 25.0, "rps": 300.0, "startup_s": 2.0, "rss_mb": 150.0}
#: The targets when the service plans with agent-search (a model is given): p50 of one client (closed loop,
#: --concurrency 1), resident memory.
SEARCH_TARGETS = {"p50_ms_one_client": 60.0, "rss_mb": 150.0}

LUA = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local bodies = {%s}
local i = 0
local mean_delay_ms = %s  -- 0: closed loop (each connection sends again at once); else paced, random think time
init = function(args) math.randomseed(os.time() + os.clock() * 1e6) end
if mean_delay_ms > 0 then
  delay = function() return math.floor(math.random() * 2 * mean_delay_ms) end
end
request = function()
  i = i %% #bodies + 1
  return wrk.format(nil, nil, nil, bodies[i])
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('{"requests": %%d, "duration_us": %%d, "p50_us": %%d, "p99_us": %%d, "max_us": %%d, ' ..
    '"connect_errors": %%d, "read_errors": %%d, "write_errors": %%d, "non_2xx": %%d, "timeouts": %%d}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), latency.max,
    e.connect, e.read, e.write, e.status, e.timeout))
end
"""


def windows(node: str, n: int = 16, seed: int = 7) -> list[dict]:
    """n windows of W catalogue jobs each (ids unique within a window), seeded."""
    sys.path.insert(0, str(ROOT))
    from env.sim.nodes import load_node
    from env.sim.catalogue import catalogue

    names = sorted(catalogue(load_node(node))) if node.startswith("sim:") else [f"job{i}" for i in range(20)]
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        picks = [rng.choice(names) for _ in range(W)]
        out.append({"jobs": [{"id": f"{p}-{k}", "profile": p, "command": [f"./{p}"]} for k, p in enumerate(picks)],
                    "max_concurrency": rng.choice([2, 3, 4])})
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port: int, path: str, timeout: float = 2.0) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def post(port: int, path: str, doc: dict) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("POST", path, body=json.dumps(doc), headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def rss_kb(pid: int) -> dict[str, int]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return fields


def cpu_s(pid: int) -> float:
    """utime + stime of a process (its CPU time: start-up on a busy machine is CPU-starved, this is not)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def planner_ms(node: str, bodies: list[dict], model: str | None) -> tuple[float, str]:
    """Median time of service.planning.plan_window alone, in this process (what the service adds is the rest)."""
    sys.path.insert(0, str(ROOT))
    from env.plan.models import Window
    from env.sim.nodes import load_node
    from service.api.served import load_served_model
    from service.planning import plan_window

    spec = load_node(node)
    served = load_served_model(model, spec)  # the service's own choice of policy and model
    docs = [Window.model_validate(b) for b in bodies]
    plan_window(docs[0], spec, policy=served.policy, model=served.loaded)
    times = []
    for d in docs * 2:
        t = time.perf_counter()
        plan_window(d, spec, policy=served.policy, model=served.loaded)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times), served.policy


def start_service(node: str, log: Path, model: str | None) -> tuple[subprocess.Popen, int, float]:
    port = free_port()
    cmd = [sys.executable, "-m", "service.cli", "serve", "--host", "127.0.0.1", "--port", str(port), "--node", node,
           "--workers", "1"] + (["--model", model] if model else [])
    env = {k: v for k, v in os.environ.items() if k != "COSCHED_TOKEN"}
    env.setdefault("COSCHED_HOME", str(log.parent / "home"))
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log.open("ab"))
    deadline = t0 + 30
    while time.perf_counter() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"service_bench: the service exited with {proc.returncode}; its log: {log}")
        try:
            if get(port, "/healthz", timeout=0.5)[0] == 200:
                return proc, port, time.perf_counter() - t0
        except OSError:
            pass
        time.sleep(0.005)
    proc.kill()
    raise SystemExit("service_bench: the service was not healthy within 30 s")


def stop_service(proc: subprocess.Popen) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def lua_script(workdir: Path, bodies: list[dict], connections: int, rate: float | None) -> Path:
    """The wrk script; with a rate, each connection waits a random think time (mean connections / rate)."""
    mean_delay_ms = 1000.0 * connections / rate if rate else 0.0
    path = workdir / f"windows-c{connections}-r{rate or 0:g}.lua"
    path.write_text(LUA % (", ".join(f"[==[{json.dumps(d)}]==]" for d in bodies), f"{mean_delay_ms:.3f}"))
    return path


def run_wrk(port: int, script: Path, connections: int, duration: float, threads: int) -> dict:
    cmd = ["wrk", "-t", str(min(threads, connections)), "-c", str(connections), "-d", f"{max(1, round(duration))}s", "--timeout", "5s",
           "-s", str(script), f"http://127.0.0.1:{port}/schedule"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 30)
    if out.returncode != 0:
        raise SystemExit(f"service_bench: wrk failed ({out.returncode}): {(out.stderr or out.stdout).strip()}")
    line = [x for x in out.stdout.splitlines() if x.startswith("{")][-1]
    doc = json.loads(line)
    seconds = doc["duration_us"] / 1e6
    return {
        "concurrency": connections,
        "requests": doc["requests"],
        "rps": doc["requests"] / seconds if seconds else 0.0,
        "p50_ms": doc["p50_us"] / 1000,
        "p99_ms": doc["p99_us"] / 1000,
        "max_ms": doc["max_us"] / 1000,
        "errors": doc["connect_errors"] + doc["read_errors"] + doc["write_errors"] + doc["timeouts"],
        "non_2xx": doc["non_2xx"],
    }


def one_run(args: argparse.Namespace, workdir: Path, bodies: list[dict]) -> dict:
    log = workdir / "service.log"
    proc, port, startup = start_service(args.node, log, args.model)
    try:
        startup_cpu = cpu_s(proc.pid)
        rss_start = rss_kb(proc.pid)
        time.sleep(args.settle)  # the service's background warm-up plan
        status, body = post(port, "/schedule", bodies[0])
        levels = []
        plan = [(c, None) for c in args.levels] + [(args.paced_clients, args.rate)]
        for c, rate in plan:
            script = lua_script(workdir, bodies, c, rate)
            run_wrk(port, script, c, args.warmup, args.threads)  # warm-up, not counted
            cpu0 = cpu_s(proc.pid)
            level = run_wrk(port, script, c, args.duration, args.threads)
            level["cpu_ms_per_request"] = (cpu_s(proc.pid) - cpu0) * 1000 / max(1, level["requests"])
            levels.append({**level, "offered_rps": rate})
        rss_end = rss_kb(proc.pid)
    finally:
        code = stop_service(proc)
    return {"startup_s": startup, "startup_cpu_s": startup_cpu, "sample_status": status, "sample_body": body.decode(errors="replace")[:300],
            "rss_start_mb": rss_start["VmRSS"] / 1024, "rss_mb": rss_end["VmRSS"] / 1024, "rss_peak_mb": rss_end["VmHWM"] / 1024,
            "levels": levels, "exit_code": code}


def median_of(runs: list[dict]) -> dict:
    med = statistics.median
    out = {k: med(r[k] for r in runs) for k in ("startup_s", "startup_cpu_s", "rss_start_mb", "rss_mb", "rss_peak_mb")}
    out["levels"] = []
    for i, level in enumerate(runs[0]["levels"]):
        row = {"concurrency": level["concurrency"], "offered_rps": level["offered_rps"]}
        for k in ("requests", "rps", "p50_ms", "p99_ms", "max_ms", "errors", "non_2xx", "cpu_ms_per_request"):
            row[k] = med(r["levels"][i][k] for r in runs)
        out["levels"].append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--node", default="sim:reference", help="node the service plans for (default sim:reference)")
    ap.add_argument("--model", default=None, help="model file for the service (default: none, greedy)")
    ap.add_argument("--concurrency", default="1,8,32", help="comma-separated numbers of concurrent connections")
    ap.add_argument("--duration", type=int, default=5, help="seconds of load per level (default 5)")
    ap.add_argument("--warmup", type=int, default=1, help="seconds of uncounted load before each level (default 1)")
    ap.add_argument("--paced-clients", type=int, default=32, help="clients of the paced level (default 32)")
    ap.add_argument("--rate", type=float, default=320.0,
                    help="req/s the paced clients offer together, random think times (default 320, just over the 300 target)")
    ap.add_argument("--settle", type=float, default=2.0, help="seconds between ready and load: the warm-up plan (default 2)")
    ap.add_argument("--threads", type=int, default=1, help="wrk threads (default 1: leave a CPU to the service)")
    ap.add_argument("--repeat", type=int, default=1, help="repetitions (fresh service each); figures are medians")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    args = ap.parse_args(argv)
    args.levels = [int(c) for c in args.concurrency.split(",") if c.strip()]
    if not shutil.which("wrk"):
        raise SystemExit("service_bench: 'wrk' not found (apt-get install wrk)")
    if not 1 <= args.repeat <= 10 or not 0 < args.duration <= 60 or not args.levels or min(args.levels) < 1 or max(args.levels) > 1024:
        raise SystemExit("service_bench: --repeat 1-10, --duration (0, 60], --concurrency 1-1024")

    docs = windows(args.node)
    plan_ms, policy = planner_ms(args.node, docs, args.model)
    with tempfile.TemporaryDirectory(prefix="cosched-bench-") as tmp:
        workdir = Path(tmp)
        runs = []
        for i in range(args.repeat):
            runs.append(one_run(args, workdir, docs))
            if not args.json:
                r = runs[-1]
                print(f"run {i + 1}/{args.repeat}: ready in {r['startup_s']:.2f} s, RSS {r['rss_mb']:.1f} MB, "
                      + ", ".join(f"c={x['concurrency']}{' paced' if x['offered_rps'] else ''}: p50 {x['p50_ms']:.2f} ms p99 {x['p99_ms']:.2f} ms {x['rps']:.0f} req/s"
                                  for x in r["levels"]), file=sys.stderr)
    result = median_of(runs)
    paced = result["levels"][-1]
    closed = [x for x in result["levels"][:-1] if x["concurrency"] == args.paced_clients] or result["levels"][-2:-1]
    capacity = max(x["rps"] for x in result["levels"][:-1]) if len(result["levels"]) > 1 else paced["rps"]
    result["capacity_rps"] = capacity
    one = [x for x in result["levels"] if x["concurrency"] == 1 and not x["offered_rps"]]
    if policy == "agent-search":  # the searching planner's targets: one client, memory, no torch
        checks = {"p50_ms_one_client": bool(one) and one[0]["p50_ms"] <= SEARCH_TARGETS["p50_ms_one_client"],
                  "rss_mb": result["rss_peak_mb"] <= SEARCH_TARGETS["rss_mb"]}
    else:
        checks = {}
    checks = checks or {
        "p50_ms": paced["p50_ms"] <= TARGETS["p50_ms"],
        "p99_ms": paced["p99_ms"] <= TARGETS["p99_ms"],
        "rps": paced["rps"] >= TARGETS["rps"] and (not closed or closed[0]["rps"] >= TARGETS["rps"]),
        "startup_s": result["startup_s"] <= TARGETS["startup_s"],
        "rss_mb": result["rss_peak_mb"] <= TARGETS["rss_mb"],
    }
    sample_status = runs[0]["sample_status"]
    doc = {"node": args.node, "window_size": W, "workers": 1, "repeat": args.repeat, "duration_s": args.duration,
           "sample_status": sample_status, "policy": policy, "planner_ms": plan_ms, **result,
           "targets": SEARCH_TARGETS if policy == "agent-search" else TARGETS, "meets": checks,
           "cpus": os.cpu_count(), "load_average": os.getloadavg()}
    if sample_status != 200:
        doc["warning"] = f"POST /schedule answered {sample_status}, not 200: the figures measure that answer, not planning " \
                         f"({runs[0]['sample_body']})"
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(f"cosched serve --node {args.node}{' --model ' + args.model if args.model else ''} --workers 1 (policy {policy}); W = {W} windows; wrk {args.threads} thread(s); "
              f"{args.duration:g} s a level; median of {args.repeat} run(s)")
        print(f"ready (first 200 from /healthz): {result['startup_s']:.2f} s ({result['startup_cpu_s']:.2f} s of CPU)   "
              f"resident memory: {result['rss_mb']:.1f} MB (at ready {result['rss_start_mb']:.1f} MB, peak {result['rss_peak_mb']:.1f} MB)")
        print(f"planner alone (plan_window in-process, median over the windows): {plan_ms:.2f} ms a window")
        print(f"{'clients':>8} {'load':>16} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'req/s':>8} {'requests':>9} {'non-2xx':>8} "
              f"{'errors':>7} {'CPU ms/req':>10}")
        for x in result["levels"]:
            load = f"paced {x['offered_rps']:g}/s" if x["offered_rps"] else "closed loop"
            print(f"{x['concurrency']:>8} {load:>16} {x['p50_ms']:>8.2f} {x['p99_ms']:>8.2f} {x['max_ms']:>8.1f} {x['rps']:>8.0f} "
                  f"{x['requests']:>9.0f} {x['non_2xx']:>8.0f} {x['errors']:>7.0f} {x['cpu_ms_per_request']:>10.2f}")
        print(f"machine load average during the runs: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs "
              "(others' work shares them: latencies and req/s suffer, CPU ms per request much less)")
        what = ("agent-search: p50 of one client <= 60 ms (closed loop, --concurrency 1), resident memory <= 150 MB"
                if policy == "agent-search" else
                f"latency: {args.paced_clients} clients paced at {args.rate:g} req/s; req/s: paced and closed loop")
        print(f"targets ({what}): " + ", ".join(f"{k} {'ok' if v else 'MISSED'}" for k, v in checks.items()))
        if "warning" in doc:
            print("WARNING: " + doc["warning"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
