"""Choosing the actor and writing it out: seeded validation windows of the training pool, the greedy baseline on
them, the greedy actor's validation every ``eval_every`` steps, and the end of a run: its figures, curves and the
model file (``cosched-model/2``, ``agent.modelfile``) of the best validated actor."""

from __future__ import annotations

import dataclasses
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from agent.setnet import ARCHITECTURE, SetNetShape
from env.episode.window import SET_MAX_WINDOW
from env.plan import actions
from training.setup import VALIDATION_SEED, Problem, RealProblem, make_problem, play

Args = Any  # the run's settings: training.set_sac.Args (not imported: set_sac imports this module)


def validation_windows(args: Args, problem: Problem) -> list[tuple[list[str], int]]:
    """Seeded windows per cell drawn from the training pool (the training programs and generated jobs), never from
    the held-out programs: the checkpoint is chosen on these, so bench/'s held-out windows (held-out programs in
    every window) play no part in choosing it. On the real node: the training window itself (its groups'
    measurements are reused)."""
    if isinstance(problem, RealProblem):
        return [([j.profile_name for j in problem.window.jobs], min(problem.window.max_concurrency, max(args.cmaxes)))]
    rng = random.Random(VALIDATION_SEED)
    distinct = sorted(set(problem.pool))
    out = []
    for w, c in args.eval_cells:
        for _ in range(args.eval_per_cell):
            names = rng.sample(distinct, w) if len(distinct) >= w else [rng.choice(distinct) for _ in range(w)]
            out.append((names, c))
    return out


def validate(problem: Problem, shape: SetNetShape, params: dict[str, np.ndarray], windows: list[tuple[list[str], int]],
             base: dict[str, Any], st: dict[str, Any], run_dir: Path, wall_s: float) -> dict[str, Any]:
    """The greedy actor on the validation windows: its record (mean throughput vs time sharing, per cell, cells under
    greedy), kept in ``st["evals"]``; the actor saved in RUN/actors/step-N.npz, and in RUN/best-actor.npz (and
    ``st["best"]``) when it is the best so far."""
    per_cell: dict[str, list[float]] = {}
    for names, cmax in windows:
        per_cell.setdefault(f"W{len(names)}C{cmax}", []).append(play(problem, shape, params, (names, cmax), None).throughput)
    cells = {k: float(np.mean(v)) for k, v in per_cell.items()}
    rec = {"kind": "eval", "step": st["step"], "wall_s": round(wall_s, 1),
           "agent": float(np.mean([t for v in per_cell.values() for t in v])), "cells": cells,
           "cells_below_greedy": sum(1 for k, v in cells.items() if v < base["greedy_cells"][k]),
           "baseline_greedy": base["greedy"]}
    st["evals"].append(rec)
    (run_dir / "actors").mkdir(exist_ok=True)  # every validated actor: what a shorter run would have chosen from
    np.savez(run_dir / "actors" / f"step-{st['step']}.npz", **params)
    if st["best"] is None or rec["agent"] > st["best"]["agent"]:
        st["best"] = rec
        np.savez(run_dir / "best-actor.npz", **params)
    return rec


def baselines(problem: Problem, windows: list[tuple[list[str], int]]) -> dict[str, Any]:
    """greedy on the validation windows: its mean and its mean per cell."""
    from env.plan.models import Window, WindowJob
    from env.planners.evaluate import evaluate

    real = isinstance(problem, RealProblem)
    docs = [Window(jobs=[problem.commands[n].model_copy(update={"id": f"v{i}-{k}", "profile": n}) if real
                         else WindowJob(id=f"v{i}-{k}", profile=n) for k, n in enumerate(names)], max_concurrency=c)
            for i, (names, c) in enumerate(windows)]
    ev = evaluate(docs, problem.node, ["greedy"], provider=problem.provider, backend=problem.backend if real else None)
    per: dict[str, list[float]] = {}
    for (names, c), w in zip(windows, ev["windows"]):
        per.setdefault(f"W{len(names)}C{c}", []).append(w["results"]["greedy"]["throughput_vs_timeshare"])
    return {"greedy": float(ev["mean"]["greedy"]), "greedy_cells": {k: float(np.mean(v)) for k, v in per.items()}}


def trained_for(problem: Problem) -> Any:
    """The node the model is for: the simulated node; this node (``local``) when trained on it for real or in its
    calibrated model (``cosched train --node local``)."""
    from agent.modelfile import TrainedFor
    from env.node.discover import node_id
    from env.sim.world import world_for
    from training.policies import node_shape

    name, nid = problem.node.name, node_id(problem.node)
    if problem.node.simulated:
        prov = getattr(world_for(problem.node).model, "provenance", None)
        if prov is not None and prov.source == "calibrated" and prov.backend == "real" and prov.measured_node_id:
            name, nid = "local", prov.measured_node_id
    else:
        name = "local"
    return TrainedFor(name=name, node_id=nid, shape=node_shape(problem.node))


def export(path: Path, params: dict[str, np.ndarray], args: Args, problem: Problem, shape: SetNetShape,
           figures: dict[str, Any], head: tuple[dict[str, np.ndarray], dict[str, Any]] | None = None) -> Any:
    """The model file: the actor, the group-cost head if any, and what they were trained for and how."""
    from agent.modelfile import write_set_model
    from env.sim.synthetic import is_synthetic
    from profiler.features import FEATURE_SET_ID

    path.parent.mkdir(parents=True, exist_ok=True)
    return write_set_model(path, params, group=head[0] if head else None, group_head=head[1] if head else None,
                           action_encoding=actions.ENCODING_VERSION, architecture=ARCHITECTURE,
                           net=shape.to_dict(), observation="set-v1", max_window=SET_MAX_WINDOW,
                           max_concurrency=max(args.cmaxes), trained_for=trained_for(problem),
                           feature_set=getattr(problem.setup.pipeline, "feature_set", FEATURE_SET_ID) or FEATURE_SET_ID,
                           feature_pipeline=problem.setup.pipeline.to_dict(),
                           training={"figures": figures, "args": json.loads(json.dumps(dataclasses.asdict(args))),
                                     "jobs": [j for j in dict.fromkeys(problem.pool) if not is_synthetic(j)],
                                     "command": " ".join(sys.argv), "feature_range": trained_range(problem)})


def trained_range(problem: Problem) -> dict[str, Any] | None:
    """The range of the training programs' features (``service.staleness`` reads it: a plan for programs outside it
    says so), None when their profiles are not at hand."""
    import math
    import warnings

    from profiler.features import VALUE_FEATURES, raw_features

    profiles = [i.profile for n in dict.fromkeys(problem.pool) if (i := problem.provider.get(n)) is not None
                and i.profile is not None]
    if not profiles:
        return None
    raw = np.vstack([raw_features(p) for p in profiles])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a feature never measured: all NaN
        lo, hi = np.nanmin(raw, axis=0), np.nanmax(raw, axis=0)
    clean = lambda a: [None if not math.isfinite(float(x)) else round(float(x), 6) for x in a]  # noqa: E731
    return {"features": list(VALUE_FEATURES), "lo": clean(lo), "hi": clean(hi)}


def finish(args: Args, problem: Problem, shape: SetNetShape, run_dir: Path, st: dict[str, Any], base: dict[str, Any],
           out: Path | None, progress: bool, head_proc: Any) -> dict[str, Any]:
    """The end of a run: the group-cost head (waited for), RUN/figures.json, RUN/curves.png, the model file."""
    from training.curves import plot_curves
    from training.group_head import group_head_phase

    with np.load(run_dir / "best-actor.npz") as z:
        best = {k: z[k] for k in z.files}
    figures = {"simulated": args.backend == "sim", "steps": st["step"], "episodes": st["episode"], "updates": st["updates"],
               "wall_s": round(st["wall_s"], 1), "selected": st["best"], "validation_baselines": base}
    waited = time.monotonic()
    head = group_head_phase(args, problem, run_dir, progress, head_proc)
    if head is not None:
        figures["group_head"] = head[1]["training"]["figures"]
        figures["head_wait_s"] = round(time.monotonic() - waited, 1)  # where the head outlasted the learner
    figures["total_wall_s"] = round(st["wall_s"] + figures.get("head_wait_s", 0.0), 1)
    (run_dir / "figures.json").write_text(json.dumps(figures, indent=1))
    plot_curves(run_dir / "log.jsonl", run_dir / "curves.png")
    if out is not None:
        export(out, best, args, problem, shape, figures, head)
    return figures


def export_only(args: Args, run: Path, out: Path) -> str:
    """``--export-only``: the model file from a run's best validated actor so far; returns what was written."""
    from training.group_head import group_head_phase

    if not (run / "best-actor.npz").exists():
        raise ValueError(f"--export-only needs {run}/best-actor.npz (a run that validated once)")
    problem = make_problem(args, run)
    evals = [json.loads(ln) for ln in (run / "log.jsonl").read_text().splitlines() if '"eval"' in ln]
    best = max(evals, key=lambda r: r["agent"])
    with np.load(run / "best-actor.npz") as z:
        params = {k: z[k] for k in z.files}
    head = group_head_phase(args, problem, run, progress=True)
    export(out, params, args, problem, args.shape(problem.d_token),
           {"simulated": args.backend == "sim", "selected": best, "stopped_early_at_step": evals[-1]["step"]}, head)
    return f"wrote {out} (the actor of step {best['step']}, validation {best['agent']:.3f})"
