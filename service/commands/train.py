"""``cosched train``: the one training algorithm (``training.set_sac``: masked discrete SAC of the set-encoder
policy, with search distillation and DAgger where a node model exists) for a node; writes a model file."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from env.errors import InputError


def register(sub: argparse._SubParsersAction) -> None:
    from training.set_sac import add_arguments

    p = sub.add_parser("train", help="train the agent (discrete SAC) for a node; writes a model file",
                       description="Train the co-scheduling agent (one set-encoder policy for every window size and "
                       "Cmax) in a node model: sim:NAME, a node-model file sim:FILE, or local (this node's calibrated "
                       "model, 'cosched calibrate'); or on this node with real runs of a window's jobs (--backend "
                       "real; slow; resumable; measured identical groups are reused). Shows progress, validates "
                       "periodically, checkpoints, draws the training curves and writes the model file.")
    add_arguments(p)
    p.set_defaults(handler=run)


def _calibrated_local(synthetic: int, seed: int) -> str:
    """``--backend sim --node local``: this node's calibrated model ('cosched calibrate' writes it) with training
    jobs drawn around its own (``--synthetic-jobs N``, default 2 per job), written beside it; its sim:FILE."""
    from env.calibration.around import around
    from env.calibration.store import model_path
    from env.node.discover import local_node_id
    from env.sim.nodes import load_node
    from env.sim.world import world_for

    key = local_node_id()
    path = model_path(key)
    if not path.exists():
        raise InputError(f"this node ({key}) has no node model at {path}: run 'cosched calibrate' first (it measures "
                         "the node and writes it), or train with --backend real")
    model = world_for(load_node(f"sim:{path.resolve()}")).model
    if model is None or model.provenance.source != "calibrated":
        raise InputError(f"{path} is not a calibrated node model: run 'cosched calibrate' again")
    n = synthetic or 2 * len(model.jobs)
    derived = around(model, n, seed, source=str(path.resolve()))
    out = path.with_name(f"{path.stem}-train-s{seed}.json")
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    tmp.write_text(derived.model_dump_json(indent=1) + "\n")
    os.replace(tmp, out)
    print(f"training in the node model {path} ({len(model.jobs)} jobs measured on this node, {n} drawn around them: {out})",
          file=sys.stderr)
    return f"sim:{out.resolve()}"


def run(args: argparse.Namespace) -> int:
    from training.set_sac import args_from, export_only, main

    try:
        a = args_from(args)
    except ValueError as e:
        raise InputError(str(e)) from None
    tag = f"{a.backend}-{'local' if a.backend == 'real' else a.node.replace(':', '-')}"
    if a.backend == "sim" and a.node == "local":  # this node's calibrated model, its jobs and jobs drawn around them
        a.node = _calibrated_local(a.synthetic_jobs if args.synthetic_jobs is not None else 0, a.seed)
        a.synthetic_jobs = 0
        tag = "sim-local"
    run_dir = Path(args.run_dir or f"runs/train-{tag}-s{a.seed}")
    out = Path(args.out) if args.out else run_dir / "model.npz"
    if args.export_only:
        try:
            print(export_only(a, run_dir, out))
        except ValueError as e:
            raise InputError(str(e)) from None
        return 0
    f = main(a, run_dir, out=out, resume=args.resume, progress=not args.quiet)
    sel = f.get("selected") or {}
    label = "simulated" if a.backend == "sim" else "measured"
    print(f"model: {out}, trained for {'local' if a.backend == 'real' or tag == 'sim-local' else a.node} in {f['steps']} "
          f"steps / {f['episodes']} episodes / {f['updates']} updates, {f['total_wall_s']:.0f} s wall"
          + (f" (the group-cost head beside the learner, {f['head_wait_s']:.0f} s waited for)" if "head_wait_s" in f else "")
          + f"; the actor of step "
          f"{sel.get('step')} (validation {sel.get('agent', float('nan')):.3f} vs time sharing, greedy "
          f"{f['validation_baselines']['greedy']:.3f}, {label})")
    print(f"run directory: {run_dir} (log.jsonl, curves.png, checkpoint.pt, figures.json, actors/)")
    return 0
