"""The real node as a ``MeasuringBackend``: placements run as real processes, from one start.

Every placement of a measurement becomes one job of a one-group plan, launched the way every job is:
its argv from ``env.plan.launch`` (``numactl --physcpubind`` and the memory option; a resctrl group with its
L3 ways / MBA cap only on a node that has resctrl, else the placement is refused with the reason) and
run by the executor (``env.real.executor``: process groups, a timeout, cleanup, a journal; under perf, the true
status of a command that fails at once or is killed, as ``profiler.perfrun`` knows it). The built-in
programs are the project's own (``native/build``): ``cosched-bubble`` runs in the background and is
stopped (SIGTERM) when the foreground programs have ended; ``cosched-probe`` reports its own time;
``cosched-membench`` its GB/s or ns per load. A profiled job is its stored command. Foreground programs
run under ``perf stat`` when perf is here (software events only on a node without a PMU).

Times: a profiled job's is perf's ``duration_time`` (its own lifetime) when counted, else the executor's
wall time; the probe's is the time it prints (its work, not its set-up). ``node_seconds`` is the wall
time from the first start to the last exit (the bubble's stop included). The real node's noise is real:
``seed`` is accepted and ignored.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from env.plan.allocate import Allocation, GroupState, mba_hardware_value, place_mask
from env.errors import InputError, RunError
from env.real.executor import Executor, Interrupted, preflight
from env.plan.launch import enforcement, launch_argv
from env.plan.models import Enforcement, NodeRef, Plan, PlanGroup, PlanJob, SchedulePolicy
from env.node.spec import NodeSpec
from env.measure.probing import BUBBLE, BUILTINS, LATENCY, PROBE, STREAM, Measurement, Placement
from env.node.resctrl import group_path
from profiler.events import PERF_EVENTS, SOFTWARE_EVENTS
from profiler.perfcsv import parse_perf_csv

if TYPE_CHECKING:
    from env.measure.nodebench import NodeBenchReport

NATIVE_BUILD = Path(__file__).resolve().parents[2] / "native" / "build"
_PROGRAMS = {BUBBLE: "cosched-bubble", PROBE: "cosched-probe", STREAM: "cosched-membench", LATENCY: "cosched-membench"}
_KIND = {BUBBLE: "bubble", PROBE: "probe", STREAM: "stream", LATENCY: "latency"}


@dataclass(frozen=True)
class ProbeSizes:
    """How much work the built-in programs do (the defaults, on this 2-CPU node when idle: a probe of ~0.4 s, a
    STREAM over 3 arrays of 4 x L3 in ~0.7 s, 5 M dependent loads over 4 x L3 in ~1 s; tests pass smaller
    sizes). ``None``: the program's own default (from the L3 size)."""

    probe_rounds: int = 20
    probe_ws_mb: float | None = None
    bubble_max_mb: float | None = None
    stream_mb: float | None = None
    stream_reps: int = 5
    latency_mb: float | None = None
    latency_loads: int = 5_000_000


def missing_programs(build: Path = NATIVE_BUILD) -> list[str]:
    """The built-in programs not built yet (``make native`` builds them)."""
    return sorted({str(build / name) for name in _PROGRAMS.values() if not (build / name).is_file()})


def builtin_command(p: Placement, sizes: ProbeSizes, build: Path = NATIVE_BUILD) -> list[str]:
    """The argv of a built-in program for a placement (before the launch prefix)."""
    prog = str(build / _PROGRAMS[p.job])
    if p.job == BUBBLE:
        argv = [prog, "--level", f"{p.level:g}", "--threads", str(len(p.cpus))]
        return argv + (["--max-mb", f"{sizes.bubble_max_mb:g}"] if sizes.bubble_max_mb else [])
    if p.job == PROBE:
        return [prog, "--rounds", str(sizes.probe_rounds)] + (["--ws-mb", f"{sizes.probe_ws_mb:g}"] if sizes.probe_ws_mb else [])
    if p.job == STREAM:
        argv = [prog, "stream", "--threads", str(len(p.cpus)), "--reps", str(sizes.stream_reps)]
        return argv + (["--mb", f"{sizes.stream_mb:g}"] if sizes.stream_mb else [])
    argv = [prog, "latency", "--loads", str(sizes.latency_loads)]
    return argv + (["--mb", f"{sizes.latency_mb:g}"] if sizes.latency_mb else [])


def _check(node: NodeSpec, i: int, p: Placement, enf: Enforcement) -> None:
    what = f"placement {i} ({p.job})"
    if not p.cpus:
        raise InputError(f"{what} has no CPUs: give it at least one of {node.cpus}")
    bad = sorted(set(p.cpus) - set(node.cpus))
    if bad:
        raise InputError(f"{what} asks for CPUs {bad}, which this node does not have (it has {node.cpus})")
    if len(set(p.cpus)) != len(p.cpus):
        raise InputError(f"{what} lists a CPU twice: {list(p.cpus)}")
    if p.job == BUBBLE and (p.level is None or not 0.0 <= p.level <= 1.0):
        raise InputError(f"{what}: the bubble needs a pressure level in [0, 1], not {p.level}")
    if p.job != BUBBLE and p.level is not None:
        raise InputError(f"{what}: only the bubble takes a pressure level")
    domains = {d.id for d in node.numa}
    if p.memory == "bind" and p.memory_domain is None:
        raise InputError(f"{what}: memory 'bind' needs memory_domain (one of {sorted(domains)})")
    if p.memory_domain is not None and p.memory_domain not in domains:
        raise InputError(f"{what}: memory domain {p.memory_domain} does not exist here (domains {sorted(domains)})")
    if p.l3_ways is not None:
        if not enf.l3:
            raise InputError(f"{what} asks for {p.l3_ways} L3 ways, but this node cannot partition its L3: {enf.reasons.get('l3')}")
        most = min(d.ways for d in node.l3 if set(d.cpus) & set(p.cpus))
        least = node.cat.min_cbm_bits if node.cat else 1
        if not least <= p.l3_ways <= most:
            raise InputError(f"{what}: l3_ways must be from {least} to {most} on this node, not {p.l3_ways}")
    if p.mba_percent is not None:
        if not enf.mem_bw:
            raise InputError(f"{what} asks for an MBA cap of {p.mba_percent} %, but this node cannot cap bandwidth: {enf.reasons.get('mem_bw')}")
        if not 1 <= p.mba_percent <= 100:
            raise InputError(f"{what}: mba_percent must be from 1 to 100, not {p.mba_percent}")


def placement_allocation(node: NodeSpec, p: Placement, state: GroupState) -> Allocation:
    """A placement as the allocation ``env.plan.launch`` turns into argv. Memory: 'local' is the kernel's
    first touch, unless a domain is named (then it is bound there: how STREAM/LATENCY measure local vs
    remote); 'bind' binds to ``memory_domain``; 'interleave' spreads over every domain of the node.
    Ways: ``l3_ways`` contiguous ways of each L3 the CPUs touch, packed after the group's earlier masks;
    without ``l3_ways`` the placement shares the whole cache. MBA: ``mba_percent`` (default 100)."""
    cpu_domains = tuple(sorted({node.numa_of(c) for c in p.cpus}))
    if p.memory == "interleave":
        memory, numa = "interleave", tuple(d.id for d in node.numa)
    elif p.memory_domain is not None:
        memory, numa = "local-alloc", (p.memory_domain,)
    else:
        memory, numa = "first-touch", cpu_domains
    l3: dict[int, tuple[int, int]] = {}
    for d in sorted({node.l3_of(c) for c in p.cpus}):
        dom = next(x for x in node.l3 if x.id == d)
        ways = p.l3_ways if p.l3_ways is not None else dom.ways
        l3[d] = (ways, place_mask(node, d, ways, state) if p.l3_ways is not None else (node.cat.mask_int if node.cat else (1 << ways) - 1))
    return Allocation(
        cpus=tuple(sorted(p.cpus)),
        numa_nodes=numa,
        memory=memory,  # type: ignore[arg-type]
        l3=l3,
        mem_bw_percent={d: p.mba_percent if p.mba_percent is not None else 100 for d in cpu_domains},
    )


def perf_events(node: NodeSpec) -> tuple[str, ...]:
    """What perf can count here: the paper's events with a PMU, else the software ones."""
    if node.capabilities.perf_hw_counters.available:
        return PERF_EVENTS
    return tuple(e for e in PERF_EVENTS if e in SOFTWARE_EVENTS)


class RealMeasuringBackend:
    """``MeasuringBackend`` on this node. ``jobs`` maps a profiled job's name to its command (from the
    profile store, see ``profile_jobs``); ``work_dir`` keeps each measurement's files when it fails."""

    simulated = False

    def __init__(
        self,
        node: NodeSpec,
        jobs: dict[str, list[str]] | None = None,
        *,
        sizes: ProbeSizes = ProbeSizes(),
        work_dir: Path | None = None,
        timeout_s: float | None = 600.0,
        perf: str | None = "auto",
        build: Path = NATIVE_BUILD,
    ) -> None:
        self.node = node
        self._jobs = dict(jobs or {})
        self.sizes = sizes
        self.work_dir = work_dir
        self.timeout_s = timeout_s
        self.build = build
        self.perf = shutil.which("perf") if perf == "auto" else perf
        self.measurements = 0
        self.node_seconds = 0.0

    def shape(self) -> NodeSpec:
        return self.node

    def jobs(self) -> list[str]:
        return sorted(self._jobs)

    # -- the plan of a measurement (pure: tests check its argv on fake nodes) ------------------------

    def plan(self, group: Sequence[Placement], run_dir: Path | None = None) -> Plan:
        """The one-group plan that runs ``group``: every placement's launch argv, nothing started."""
        if not group:
            raise InputError("a measurement needs at least one placement")
        node = self.node
        base = enforcement(node, "resctrl")
        # Partition only when a placement asks for it: otherwise no resctrl group is made at all.
        enf = base.model_copy(update={
            "l3": base.l3 and any(p.l3_ways is not None for p in group),
            "mem_bw": base.mem_bw and any(p.mba_percent is not None for p in group),
        })
        for i, p in enumerate(group):
            _check(node, i, p, base)
        if all(p.job == BUBBLE for p in group):
            raise InputError("a measurement needs a program besides the bubble (it runs until the others end)")
        state = GroupState()
        jobs = []
        for i, p in enumerate(group):
            job_id = f"p{i}-{_KIND.get(p.job, 'job')}"
            if p.job in BUILTINS:
                command = builtin_command(p, self.sizes, self.build)
                if not Path(command[0]).is_file():
                    raise InputError(f"{command[0]} is not built: build the native programs with 'make native'")
            elif p.job in self._jobs:
                command = list(self._jobs[p.job])
            else:
                known = ", ".join(self.jobs()) or "none"
                raise InputError(f"placement {i}: no profiled job {p.job!r} on this node (known: {known}); profile it: cosched profile --name {p.job} -- CMD")
            alloc = placement_allocation(node, p, state)
            inner = command
            if self.perf and p.job != BUBBLE and run_dir is not None:
                inner = [self.perf, "stat", "-x", ",", "-e", ",".join(perf_events(node)), "-o", str(run_dir / f"{job_id}.perf"), "--", *command]
            mb_hw = {d: v for d, pct in alloc.mem_bw_percent.items() if (v := mba_hardware_value(node, d, pct)) is not None}
            argv = launch_argv(node, inner, alloc, enf, resctrl_group=group_path(node, 0, job_id) if enf.method == "resctrl" else None, mb_hw=mb_hw)
            jobs.append(PlanJob(
                id=job_id,
                profile=_KIND.get(p.job, p.job),
                command=command,
                cpus=list(alloc.cpus),
                numa_nodes=list(alloc.numa_nodes),
                memory=alloc.memory,
                l3={str(d): {"ways": w, "mask": f"{m:#05x}"} for d, (w, m) in alloc.l3.items()},  # type: ignore[misc]
                mem_bw_percent={str(d): v for d, v in alloc.mem_bw_percent.items()},
                launch=argv,
            ))
        # Placements may share CPUs (a job next to the bubble on the same core is time sharing): built
        # without the plan's one-CPU-one-job check, every job validated on its own above.
        return Plan.model_construct(
            node=NodeRef(**node.summary()),  # type: ignore[arg-type]
            policy="measure",
            model=None,
            window_size=len(jobs),
            max_concurrency=len(jobs),
            schedule_policy=SchedulePolicy(),
            groups=[PlanGroup(index=0, jobs=jobs)],
            excluded=[],
            enforcement=enf,
            pin_runtime=False,
            predicted_throughput_vs_timeshare=None,
            predictions_source=None,
        )

    # -- running one ---------------------------------------------------------------------------------

    def measure(self, group: Sequence[Placement], *, seed: int | None = None) -> Measurement:
        group = list(group)
        if self.work_dir is not None:
            self.work_dir.mkdir(parents=True, exist_ok=True)
        run_dir = Path(tempfile.mkdtemp(prefix="measure-", dir=self.work_dir))
        try:
            plan = self.plan(group, run_dir)
            preflight(plan, self.node)
            background = {j.id for p, j in zip(group, plan.groups[0].jobs) if p.job == BUBBLE}
            perf_jobs = {j.id: j.command[0] for j in plan.groups[0].jobs if self.perf and j.id not in background}
            t0 = time.monotonic()
            try:
                result = Executor(plan, self.node, run_dir, timeout_s=self.timeout_s, background=background,
                                  perf_jobs=perf_jobs).run()[0]
            except Interrupted:
                raise Interrupted(f"interrupted: the measurement was stopped, its programs too (its files: {run_dir})") from None
            node_seconds = time.monotonic() - t0
            out = self._read(group, plan, result.jobs, run_dir)
        except BaseException:
            if not any(run_dir.iterdir()):
                shutil.rmtree(run_dir, ignore_errors=True)
            raise
        shutil.rmtree(run_dir, ignore_errors=True)
        self.measurements += 1
        self.node_seconds += node_seconds
        return Measurement(times_s=out[0], node_seconds=node_seconds, counters=out[1], metric=out[2])

    def _read(self, group: list[Placement], plan: Plan, records: list, run_dir: Path):  # noqa: ANN202
        times: list[float | None] = []
        counters: list[dict[str, float | None] | None] = []
        metric: list[float | None] = []
        by_id = {r.id: r for r in records}
        fg_end = max(r.start_s + r.wall_s for p, r in zip(group, records) if p.job != BUBBLE)
        for p, job in zip(group, plan.groups[0].jobs):
            rec = by_id[job.id]
            if p.job == BUBBLE:
                if rec.start_s + rec.wall_s < fg_end - 0.05 and rec.signal is None and rec.exit_code is not None:
                    raise RunError(f"the bubble ({job.id}) ended before the programs it was to disturb (see {run_dir / (job.id + '.err')})")
                times.append(None)
                counters.append(None)
                metric.append(None)
                continue
            if rec.timed_out:
                raise RunError(f"{p.job} ({job.id}) ran past the {self.timeout_s:g} s timeout and was stopped (its files: {run_dir})")
            if rec.exit_code != 0:
                how = f"signal {rec.signal}" if rec.signal else f"exit status {rec.exit_code}"
                raise RunError(f"{p.job} ({job.id}) failed with {how} during a measurement (its stderr: {rec.stderr})")
            stat = self._perf(run_dir / f"{job.id}.perf")
            counters.append(stat)
            doc = _last_json(Path(rec.stdout)) if p.job in BUILTINS else None
            if p.job in BUILTINS and doc is None:
                raise RunError(f"{p.job} ({job.id}) printed no result line (its output: {rec.stdout})")
            if p.job == PROBE:
                times.append(float(doc["seconds"]))  # type: ignore[index]
            else:
                ns = stat.get("duration_time") if stat else None
                times.append(ns / 1e9 if ns else rec.wall_s)
            metric.append(float(doc["gbs"]) if p.job == STREAM else float(doc["ns_per_load"]) if p.job == LATENCY else None)  # type: ignore[index]
        return tuple(times), tuple(counters), tuple(metric)

    def _perf(self, path: Path) -> dict[str, float | None] | None:
        if not path.exists():
            return None
        text = path.read_text(errors="replace")
        if not any(ln.strip() and not ln.startswith("#") for ln in text.splitlines()):
            return None
        events = perf_events(self.node)
        return parse_perf_csv(text, source=str(path)).counters(events)


def _last_json(path: Path) -> dict | None:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.startswith("{")]
        return json.loads(lines[-1]) if lines else None
    except (OSError, ValueError):
        return None


def profile_jobs(node_id: str) -> dict[str, list[str]]:
    """The node's profiled jobs and their commands (the profile store, this node's profiles)."""
    from profiler.store import ProfileStore

    return {p.name: list(p.command) for p in ProfileStore().list(node_id)}


def local_backend(**kw: object) -> RealMeasuringBackend:
    """This node, its profiled jobs, measurement files under $COSCHED_HOME/measure."""
    from env.node.discover import discover, node_id
    from profiler.store import cosched_home

    node = discover()
    return RealMeasuringBackend(node, profile_jobs(node_id(node)), work_dir=cosched_home() / "measure", **kw)  # type: ignore[arg-type]


#: ``cosched node --bench --quick``: small arrays and few loads (seconds, not minutes; rougher figures).
QUICK_SIZES = ProbeSizes(probe_rounds=5, probe_ws_mb=8, stream_mb=16, stream_reps=2, latency_mb=16, latency_loads=500_000)


def bench_node(*, repeats: int = 3, quick: bool = False,
               progress: Callable[[str], None] | None = None) -> tuple[NodeBenchReport, Path]:
    """This node's microbenchmarks (``env.measure.nodebench``), stored under $COSCHED_HOME/node-bench for
    ``cosched calibrate``: (the report, the file it was stored in)."""
    from env.measure.nodebench import run_bench, save_bench
    from env.node.discover import discover, node_id
    from profiler.store import cosched_home

    node = discover()
    home = cosched_home()
    backend = RealMeasuringBackend(node, sizes=QUICK_SIZES if quick else ProbeSizes(), work_dir=home / "measure")
    result = run_bench(backend, node_id(node), repeats=repeats, progress=progress)
    return result, save_bench(result, home)
