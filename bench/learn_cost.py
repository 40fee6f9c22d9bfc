"""What learning new programs from production runs costs: the time of the learned programs' fit (``planning_model``,
redone whenever the calibration data changes) on a home shaped like a real node's after a few profilings.

SIMULATED data, MEASURED time: a calibrated model (fitted to sim:variant-a, its node this machine's) and new programs
whose runs the node model itself makes from a known sensitivity (``--programs`` of them, each with one first run):
``--groups`` co-runs of two jobs started together and ``--continuous`` continuous runs of 8 jobs packed onto two CPUs
(each job starting when the last on its CPU ends, so jobs overlap in part). Prints the fit's time with and without
the continuous runs' records, the median of ``--repeats`` (each a fresh fit: what a command keeps for the next is
removed first), and each new program's fitted intensity beside its true one.

    .venv/bin/python bench/learn_cost.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def build_home(home: Path, calibrated: str, programs: int, groups: int, continuous: int, seed: int) -> dict[str, float]:
    """A home with a calibrated model of this node, ``programs`` new programs' first runs and their co-runs; returns
    each new program's true intensity."""
    import random

    from env.calibration.learned import Learner
    from env.calibration.runs import online_records
    from env.calibration.store import CalibrationStore, model_path
    from env.measure.probing import Placement
    from env.node.discover import local_node_id
    from env.sim.nodemodel import NodeModel
    from env.sim.nodes import load_node
    from env.sim.probes import GroupModel, timeline_times
    from profiler.interference import PlacementRecord, RunRecord
    from profiler.models import Profile
    from profiler.store import ProfileStore
    from service.cli import main

    os.environ["COSCHED_HOME"] = str(home)
    os.environ["COSCHED_MODELS_DIR"] = str(home / "no-shipped-models")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["calibrate", "--backend", "sim", "--node", "sim:variant-a", "--jobs", calibrated,
                     "--probes", "3", "--heldout", "3", "--repeats", "2", "--json"]) == 0
    doc = json.loads(Path(json.loads(out.getvalue())["out"]).read_text())
    node = load_node("local")
    doc["node"] = json.loads(node.model_dump_json())
    path = model_path(local_node_id())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    store = ProfileStore()
    for j in doc["jobs"]:
        store.put(Profile.model_validate({**j["profile"], "node_id": local_node_id(), "simulated": False}))
    cpus = node.cpus[:2]

    rng = random.Random(seed)
    learner = Learner(NodeModel.model_validate(doc))
    truth, params = {}, dict(learner.model.job_params())
    for i in range(programs):
        name, solo = f"new{i}", rng.uniform(1.5, 4.0)
        truth[name] = learner.grid[rng.randrange(4, len(learner.grid) - 2)]
        params[name] = learner.params(name, solo, 0.0, truth[name])
        store.put(Profile(name=name, node_id=local_node_id(), command=[f"/bin/{name}"], wall_s=solo,
                          counters={"task-clock": solo * 1000.0, "duration_time": solo * 1e9},
                          created_at=datetime.now(timezone.utc)))
    gm = GroupModel(learner.model.node, learner.model.params, params, learner.model.probe)
    names = list(params)
    records = []
    for _ in range(groups):
        a, b = rng.choice(list(truth)), rng.choice(names)
        t = gm.times([Placement(a, (cpus[0],)), Placement(b, (cpus[1],))])[0]
        records.append(RunRecord(kind="corun", group=[PlacementRecord(job=a, cpus=[cpus[0]]),
                                                      PlacementRecord(job=b, cpus=[cpus[1]])],
                                 times_s=[t[0], t[1]], node_seconds=max(t[0], t[1])))
    for _ in range(continuous):
        jobs = [rng.choice(names) for _ in range(8)]
        group = [Placement(j, (cpus[k % 2],)) for k, j in enumerate(jobs)]
        times = [gm.times([p])[0][0] for p in group]
        for _ in range(30):  # packed: each job starts when the last on its CPU ends; the times the model gives them
            free, starts = [0.0, 0.0], []
            for k, t in enumerate(times):
                starts.append(free[k % 2])
                free[k % 2] += t
            times = timeline_times(gm, group, starts, times)
        records += online_records([(j, [cpus[k % 2]], None, 100.0 + s, 100.0 + s + t)
                                   for k, (j, s, t) in enumerate(zip(jobs, starts, times))], simulated=True)
    CalibrationStore().add(local_node_id(), records, "run")
    return truth


def fit_seconds(repeats: int) -> tuple[float, list[float], object]:
    from env.calibration import learned
    from env.node.discover import local_node_id

    times = []
    for _ in range(repeats):
        learned._planning_model.cache_clear()
        kept = getattr(learned, "learned_cache_path", None)  # what a command keeps for the next: the fit is timed
        if kept is not None:
            kept(local_node_id()).unlink(missing_ok=True)
        t0 = time.process_time()
        got = learned.planning_model(local_node_id())
        times.append(time.process_time() - t0)
    return statistics.median(times), times, got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calibrated", default="EP,MG,CG,FT,IS,SP,fft,ocean_cp", help="the calibration's programs")
    ap.add_argument("--programs", type=int, default=6)
    ap.add_argument("--groups", type=int, default=32)
    ap.add_argument("--continuous", type=int, default=8, help="continuous runs of 8 jobs (each may be several records)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    from env.calibration.store import CalibrationStore
    from env.node.discover import local_node_id

    print("SIMULATED runs (the node model's, from known sensitivities); MEASURED fit time")
    for n_cont_runs in (a.continuous, 0):
        with tempfile.TemporaryDirectory() as tmp:
            truth = build_home(Path(tmp) / "home", a.calibrated, a.programs, a.groups, n_cont_runs, a.seed)
            runs = [s.record for s in CalibrationStore().runs(local_node_id())]
            n_cont = sum(1 for r in runs if r.start_s is not None)
            med, all_t, got = fit_seconds(a.repeats)
            print(f"{len(runs)} records ({n_cont} of {n_cont_runs} continuous runs): fit {med:.2f} s of CPU, "
                  f"median of {a.repeats} {[round(t, 2) for t in all_t]}")
            learned = {lj.name: lj for lj in got[2]}
            for name, k in truth.items():
                lj = learned[name]
                print(f"  {name}: true intensity {k:.4g}, fitted {lj.fitted_intensity:.4g}, {lj.coruns} co-runs, "
                      f"own error {lj.error_pct:.2f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
