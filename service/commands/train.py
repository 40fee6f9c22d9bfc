"""``cosched train --backend sim|real``: train the agent (training.train), write a model file, show progress."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from env.errors import InputError
from env.nodes import DEFAULT_SIM_NODE


def register(sub: argparse._SubParsersAction) -> None:
    from env.episode import OBS_LAYOUTS
    from training.finetune import ROOT_CHOICES
    from training.train import TrainConfig

    p = sub.add_parser("train", help="train the agent (discrete SAC) for a node; writes a model file",
                       description="Train the co-scheduling agent on the simulated node (fast) or on this node with "
                       "real runs of a window's jobs (slow; resumable; measured identical group configurations are "
                       "reused). Shows progress, evaluates periodically, checkpoints, draws the training curves and "
                       "ends with an evaluation table and the model file.")
    p.add_argument("--backend", choices=("sim", "real"), default="sim", help="sim (default) or real (this node)")
    p.add_argument("--node", default=None, help=f"sim: a simulated node (default {DEFAULT_SIM_NODE}), or local: this node's calibrated model (cosched calibrate) with jobs drawn around its own; real: local")
    p.add_argument("--steps", type=int, default=None, help="env steps to train for (default 30000 sim, 60 real; with --resume: the new total)")
    p.add_argument("--seed", type=int, default=1, help="seed of everything (default 1)")
    p.add_argument("--out", default=None, metavar="MODEL", help="model file to write (default RUN_DIR/model.npz)")
    p.add_argument("--run-dir", default=None, help="checkpoints, log, curves (default runs/train-<backend>-<node>-s<seed>)")
    p.add_argument("--resume", action="store_true", help="continue the run in --run-dir from its checkpoint")
    p.add_argument("--window-size", type=int, default=6, help="W, jobs per window (default 6)")
    p.add_argument("--cmax", default="4", help="Cmax of the training windows, comma-separated, cycled (default 4)")
    p.add_argument("--jobs", default=None, help="sim: training jobs, comma-separated (default: the paper's 12)")
    p.add_argument("--synthetic-jobs", type=int, default=0, metavar="N", help="sim: add N generated jobs (env/sim/synthetic.py, seeded by --seed) to the training jobs (default 0)")
    p.add_argument("--window", default=None, metavar="WINDOW.json", help="real: the window whose jobs are trained on (default examples/window.json)")
    p.add_argument("--reward", choices=("group", "paper"), default="group", help="group: final reward redistributed to the groups (default); paper: rw_i and rw_f")
    p.add_argument("--reward-scale", type=float, default=1.0, help="group reward: scale · (solo_g − makespan_g) / solo_total (default 1)")
    p.add_argument("--intermediate-weight", type=float, default=0.0, help="weight of the heuristic rw_i with --reward group (default 0)")
    p.add_argument("--eval-every", type=int, default=None, help="env steps between validation runs (default 2000 sim, 10 real)")
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--learning-starts", type=int, default=None)
    p.add_argument("--update-frequency", type=int, default=None, help="env steps per update")
    p.add_argument("--updates-per-step", type=int, default=None)
    p.add_argument("--lr", type=float, default=None, help="learning rate of actor, critics and α")
    p.add_argument("--entropy-ratio", type=float, default=None, help="target entropy = ratio · log(valid actions)")
    p.add_argument("--hidden", default=None, help="hidden layer sizes, comma-separated (default 256,256,256)")
    p.add_argument("--demos", type=int, default=0, help="sim: demonstration episodes from the search on training windows (default 0: plain SAC)")
    p.add_argument("--pretrain-updates", type=int, default=None, help="warm-start updates on the demonstrations (default 2000 with --demos)")
    p.add_argument("--bc-weight", type=float, default=1.0, help="behaviour-cloning weight on demonstrations (default 1)")
    p.add_argument("--demo-batch", type=int, default=32, help="demonstrations appended to each update's batch (default 32)")
    p.add_argument("--demo-noise", type=float, default=0.0, help="sim: probability of a random job-level action in a demonstration, labels stay the expert's (default 0)")
    p.add_argument("--demo-workers", type=int, default=min(2, os.cpu_count() or 1), help="sim: processes playing the demonstrations; the data is the same for any number (default: 2, or 1 on a 1-CPU machine)")
    p.add_argument("--ensemble", type=int, default=1, metavar="K", help="K > 1: train K agents (seeds SEED..SEED+K-1, one after another, same demonstrations) and distil them into one actor (default 1)")
    p.add_argument("--distill-windows", type=int, default=3000, help="--ensemble: training windows whose ensemble states the distilled actor learns on (default 3000)")
    p.add_argument("--distill-updates", type=int, default=10_000, help="--ensemble: updates of the distilled actor (default 10000; 0: no distillation, the model holds the K actors and the planner averages their logits)")
    p.add_argument("--finetune-windows", type=int, default=0, metavar="N", help="sim: fine-tune the final actor on N training windows by policy gradient on the simulated throughput (training/finetune.py; default 0: none)")
    p.add_argument("--finetune-samples", type=int, default=8, help="sim: sampled episodes per fine-tuning window, their mean the baseline (default 8)")
    p.add_argument("--finetune-lr", type=float, default=3e-5, help="sim: fine-tuning's learning rate, decaying linearly to 0 (default 3e-5)")
    p.add_argument("--finetune-roots", choices=ROOT_CHOICES, default=TrainConfig.finetune_roots,
                   help="sim: the window-wide schedule action in fine-tuning: sampled like the others, or every window "
                   "played from each schedule action of the expert's grid (compact and distributed) or from all six "
                   f"(a cost-weighted classification at step 0; default {TrainConfig.finetune_roots})")
    p.add_argument("--lookahead-rounds", type=int, default=TrainConfig.lookahead_rounds, metavar="R", help="sim: after fine-tuning, R rounds of one-step lookahead: the actor's best actions at every state completed by the actor and scored on the simulated node, the actor then moved towards the better ones (training/lookahead.py; default 0: none)")
    p.add_argument("--lookahead-windows", type=int, default=TrainConfig.lookahead_windows, help=f"sim: training windows a lookahead round (default {TrainConfig.lookahead_windows})")
    p.add_argument("--lookahead-k", type=int, default=TrainConfig.lookahead_k, help=f"sim: candidate actions a state (default {TrainConfig.lookahead_k})")
    p.add_argument("--lookahead-updates", type=int, default=TrainConfig.lookahead_updates, help=f"sim: updates a lookahead round (default {TrainConfig.lookahead_updates})")
    p.add_argument("--lookahead-lr", type=float, default=TrainConfig.lookahead_lr, help=f"sim: the lookahead phase's learning rate, decaying linearly to 0 (default {TrainConfig.lookahead_lr})")
    p.add_argument("--expert-grid", choices=("cores", "teacher"), default="cores", help="sim: the expert search's grid (default cores)")
    p.add_argument("--dagger", action="store_true", help="sim: label the states the agent visits with the expert's action (DAgger; needs --demos)")
    p.add_argument("--bc-batch", type=int, default=128, help="labelled states in the cloning term of each update (default 128)")
    p.add_argument("--warm-start-actor", choices=("sac+bc", "bc"), default="sac+bc", help="sim: the actor's loss in the warm start (default sac+bc; bc: cloning only)")
    p.add_argument("--n-validation", type=int, default=24, help="sim: validation windows (seeded, whole catalogue; the best validation mean is exported; default 24)")
    p.add_argument("--obs-layout", choices=OBS_LAYOUTS, default=TrainConfig.obs_layout,
                   help=f"observation layout (default {TrainConfig.obs_layout}; env.episode describes each)")
    p.add_argument("--no-eval", action="store_true", help="skip the final evaluation table")
    p.add_argument("--eval-windows", default=None, metavar="FILE", help="sim: windows of the final evaluation (default training/eval_windows.json)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(handler=run)


def _ints(text: str, what: str) -> tuple[int, ...]:
    try:
        vals = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise InputError(f"{what} takes integers separated by commas, not {text!r}") from None
    if not vals:
        raise InputError(f"{what} is empty")
    return vals


def _calibrated_local(synthetic: int, seed: int) -> str:
    """``--backend sim --node local``: this node's calibrated model ('cosched calibrate' writes it) with training
    jobs drawn around its own (``--synthetic-jobs N``, default 2 per job), written beside it; its sim:FILE."""
    from env.calibration.around import around
    from env.calibration.store import model_path
    from env.discover import local_node_id
    from env.nodes import load_node
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
    from training.train import TrainConfig, train

    real = args.backend == "real"
    node = args.node or ("local" if real else DEFAULT_SIM_NODE)
    synthetic = args.synthetic_jobs
    tag = node.replace(":", "-")
    if not real and node == "local":
        node = _calibrated_local(args.synthetic_jobs, args.seed)
        synthetic = 0  # drawn around the node's own jobs above, not from the catalogue's ranges
    sac = {}
    for key, val in (("batch_size", args.batch_size), ("learning_starts", args.learning_starts),
                     ("update_frequency", args.update_frequency), ("updates_per_step", args.updates_per_step),
                     ("target_entropy_ratio", args.entropy_ratio)):
        if val is not None:
            sac[key] = val
    if args.lr is not None:
        sac.update(lr_actor=args.lr, lr_critic=args.lr, lr_alpha=args.lr)
    if args.hidden:
        sac["hidden_sizes"] = list(_ints(args.hidden, "--hidden"))
    if real:
        # Real episodes are seconds to minutes each: learn from the first few, evaluate and checkpoint often.
        sac.setdefault("learning_starts", 20)
        sac.setdefault("updates_per_step", 8)
        sac.setdefault("batch_size", 32)
    cfg = TrainConfig(
        backend=args.backend, node=node, steps=args.steps or (60 if real else 30_000), seed=args.seed,
        window_size=args.window_size, cmax=_ints(args.cmax, "--cmax"),
        jobs=tuple(j.strip() for j in args.jobs.split(",") if j.strip()) if args.jobs else None,
        synthetic_jobs=synthetic,
        window_file=args.window, reward=args.reward, reward_scale=args.reward_scale, intermediate_weight=args.intermediate_weight,
        eval_every=args.eval_every or (10 if real else 2_000), checkpoint_every=10 if real else 10_000, sac=sac,
        demos=args.demos, demo_workers=args.demo_workers, ensemble=args.ensemble,
        distill_windows=args.distill_windows, distill_updates=args.distill_updates, pretrain_updates=args.pretrain_updates if args.pretrain_updates is not None else (2_000 if args.demos else 0),
        bc_weight=args.bc_weight, demo_batch=args.demo_batch, demo_noise=args.demo_noise, expert_grid=args.expert_grid,
        dagger=args.dagger, bc_batch=args.bc_batch, obs_layout=args.obs_layout, n_validation=args.n_validation, warm_start_actor=args.warm_start_actor,
        finetune_windows=args.finetune_windows, finetune_samples=args.finetune_samples, finetune_lr=args.finetune_lr,
        finetune_roots=args.finetune_roots, lookahead_rounds=args.lookahead_rounds,
        lookahead_windows=args.lookahead_windows, lookahead_k=args.lookahead_k, lookahead_updates=args.lookahead_updates,
        lookahead_lr=args.lookahead_lr,
    )
    run_dir = Path(args.run_dir or f"runs/train-{args.backend}-{tag}-s{args.seed}")
    out = Path(args.out) if args.out else run_dir / "model.npz"
    command = "cosched " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv and sys.argv[0].endswith("cosched") else None
    result = train(cfg, run_dir, out, resume=args.resume, progress=not args.quiet, final_eval=not args.no_eval,
                   command=command, eval_windows=args.eval_windows, steps_override=args.steps if args.resume else None)
    f = result.figures
    print(f"model: {out} ({f.get('model_id', '')[:19]}), trained for {'local' if real or tag == 'local' else node} "
          f"in {f['steps']} steps / {f['episodes']} episodes / {f['updates']} updates; "
          f"{f['wall_s']:.0f} s wall, {f['cpu_s']:.0f} s CPU{' (simulated)' if not real else ''}")
    ev = ", evaluation.json" if result.evaluation else ""
    if f.get("ensemble"):
        print(f"run directory: {run_dir} (figures.json{ev}; each agent's log.jsonl, curves.png and checkpoint.pt in members/K)")
    else:
        print(f"run directory: {run_dir} (log.jsonl, curves.png, checkpoint.pt{ev})")
    return 0
