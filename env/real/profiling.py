"""Profiling one command on this node (``cosched profile``): its solo profile, then (``--adapts``) whether it
adapts to CPUs taken from it while it runs (``profiler.adaptivity``), then (``--curves``) its interference curves.

``JobProfiling`` checks everything it can before any run (the command, the profile store, the log directory,
whether curves can be measured here), then ``solo`` runs the command alone on the whole node and on one core
under perf and stores the profile, and ``curves`` measures the command next to the pressure generator and the
reference probe (``env.measure.interference`` through the real ``MeasuringBackend``) and stores them.
The command's output goes to ``$COSCHED_HOME/logs/profile-NAME.{out,err}``.
``stored_measurements`` is what this node measured so far (curves, microbenchmarks), for ``cosched calibrate``.
"""

from __future__ import annotations

import statistics
from functools import partial
from typing import Callable

from env.errors import CoschedError, RunError
from env.node.discover import local_node_id
from env.plan.launch import solo_prefix
from env.sim.nodes import load_node
from profiler.errors import ProfilerError, ProfilerInputError, ProfilerRunError, StoreError
from profiler.interference import InterferenceProfile, NodeBench
from profiler.models import Profile
from profiler.perfrun import resolve_command
from profiler.profiling import Phase, profile_command
from profiler.store import ProfileStore, cosched_home


def why_no_curves() -> str | None:
    """Why this node cannot measure interference curves (checked before any run), or None."""
    from env.real.probes import missing_programs

    missing = missing_programs()
    if missing:
        raise ProfilerInputError(f"the interference curves need the native programs ({', '.join(missing)}): "
                                 "build them with 'make native', or profile without --curves")
    if len(load_node("local").cpus) < 2:
        return "this node has one CPU: the pressure generator and the probe need a second one"
    return None


class JobProfiling:
    """One command to profile as ``name`` on this node. ``interference``: also its curves (``curves_skipped`` says
    why they will not be, where this node cannot)."""

    def __init__(self, name: str, command: list[str], *, scale: bool = True, interference: bool = False,
                 adapts: bool = False, timeout_s: float | None = None) -> None:
        resolve_command(command)
        self.name, self.command, self.scale, self.timeout_s = name, command, scale, timeout_s
        node = load_node("local")
        #: why this node cannot measure whether the program adapts (None: it can, or it was not asked)
        self.adapts_skipped = ("this node has one CPU: there is nothing to take from a running program"
                               if adapts and len(node.cpus) < 2 else None)
        self.adapts = adapts and self.adapts_skipped is None
        self.store = ProfileStore()  # open (and check) the store before spending time on runs
        self.node_id = local_node_id()
        self.launcher = partial(solo_prefix, load_node("local"))
        self.interference = interference
        self.curves_skipped = why_no_curves() if interference else None
        logs = cosched_home() / "logs"
        try:
            logs.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the log directory {logs}: {exc.strerror or exc}") from None
        self.out_path, self.err_path = logs / f"profile-{name}.out", logs / f"profile-{name}.err"
        self.replaced = False  # a profile of this name on this node existed before

    @property
    def measures_curves(self) -> bool:
        return self.interference and self.curves_skipped is None

    def solo(self, on_phase: Callable[[Phase], None] | None = None) -> Profile:
        """The solo profile (whole node, then one core unless ``scale`` is off), not stored yet: see ``keep``."""
        try:
            with self.out_path.open("wb") as out, self.err_path.open("wb") as err:
                return profile_command(self.name, self.command, self.node_id, scale=self.scale, launcher=self.launcher,
                                       stdout=out, stderr=err, timeout_s=self.timeout_s, on_phase=on_phase)
        except ProfilerRunError as exc:
            raise type(exc)(f"{exc} (its output: {self.err_path})") from None

    def giveback(self, profile: Profile) -> Profile:
        """The solo profile with whether the program adapts (``profiler.adaptivity``: two more runs)."""
        from env.plan.allocate import dealt
        from profiler.adaptivity import probe_giveback

        node = load_node("local")
        kept = dealt(node, node.cpus, len(node.cpus) // 2)
        try:
            with self.out_path.open("ab") as out, self.err_path.open("ab") as err:
                probe = probe_giveback(self.command, self.launcher, kept, profile.duration_s, stdout=out, stderr=err,
                                       timeout_s=self.timeout_s)
        except ProfilerRunError as exc:
            raise type(exc)(f"{exc} (its output: {self.err_path})") from None
        return profile.model_copy(update={"giveback_ratio": round(probe.ratio, 4), "adapts": probe.adapts})

    def keep(self, profile: Profile) -> None:
        """Store the profile; curves stored for an earlier profile of the name go when none are measured now (they
        may not be this command's)."""
        self.replaced = self.store.get(self.name, self.node_id) is not None
        self.store.put(profile)
        if not self.measures_curves:
            self.store.delete_interference(self.name, self.node_id)

    def curves(self, say: Callable[[str], None]) -> InterferenceProfile:
        """The command's interference curves on this node, stored. Its solo profile is already stored when this runs:
        a failure says so."""
        from env.measure.interference import measure_interference
        from env.real.probes import RealMeasuringBackend

        backend = RealMeasuringBackend(load_node("local"), {self.name: self.command}, work_dir=cosched_home() / "measure",
                                       timeout_s=self.timeout_s if self.timeout_s is not None else 600.0)
        try:
            curves = measure_interference(backend, self.name, progress=say)
        except (CoschedError, ProfilerError) as exc:
            raise RunError(f"the interference curves of {self.name} failed: {exc} (its solo profile is stored; "
                           "profile again, or without --curves)") from None
        self.store.put_interference(curves)
        return curves


def stored_measurements(node_key: str) -> tuple[dict[str, InterferenceProfile], NodeBench | None]:
    """What this node already measured: each profiled job's curves ('cosched profile') and the median repeat of
    'cosched node --bench' (by local bandwidth), so a calibration costs only its co-run probes."""
    from env.measure.nodebench import load_bench

    profiles = ProfileStore().list_interference(node_key)
    report = load_bench(cosched_home(), node_key)
    bench = None
    if report is not None and report.runs:
        def local_bw(b: NodeBench) -> float:
            return statistics.median(d.bandwidth_gbs for d in b.domains if d.local)
        bench = sorted(report.runs, key=local_bw)[len(report.runs) // 2]
    return profiles, bench
