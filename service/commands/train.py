"""``cosched train``: the one training algorithm (``training.set_sac``: masked discrete SAC of the set-encoder
policy, with search distillation and DAgger where a node model exists) for a node; writes a model file.

The options are this command's own (``OPTIONS``: each sets one field of ``training.set_sac.Args``, whose defaults
they keep; lists are comma-separated); ``python -m training.set_sac`` parses the same ``Args`` with tyro."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from env.errors import InputError

#: The options: flag, the ``Args`` field it sets, its kind (int, float, str; bool: --x / --no-x; ints: whole numbers
#: separated by commas; names: names separated by commas), help (an indented line goes on with it). Their defaults
#: are the fields'.
_TABLE = """
--backend               backend               str    sim: the node model (fast); real: this node, every group run for
                                                     real (slow)
--node                  node                  str    sim:NAME or sim:FILE (a node-model file), or local (this node's
                                                     calibrated model)
--window                window_file           str    real: the window document whose jobs are trained on (default
                                                     examples/window.json)
--seed                  seed                  int    seed of the run (networks, episodes, replay samples)
--steps                 total_steps           int    environment steps (transitions) to train for; with --resume the
                                                     new total
--windows               windows               ints   LO,HI: the training windows' sizes, uniform in [LO, HI]
--cmaxes                cmaxes                ints   the training windows' Cmax, comma-separated, uniform
--synthetic-jobs        synthetic_jobs        int    generated jobs beside the training programs (sim)
--jobs                  jobs                  names  training programs, comma-separated (default: the node's training
                                                     programs)
--reward-scale          reward_scale          float  the return is reward-scale x (1 - co-run time / time sharing)
--gamma                 gamma                 float  discount
--tau                   tau                   float  the target critics' soft update
--lr-actor              lr_actor              float  the actor's learning rate
--lr-critic             lr_critic             float  the critics' learning rate
--lr-alpha              lr_alpha              float  α's learning rate
--adam-eps              adam_eps              float  Adam's epsilon
--batch-size            batch_size            int    transitions a batch
--buffer-size           buffer_size           int    transitions the replay buffer holds
--learning-starts       learning_starts       int    steps of uniformly random valid actions first
--update-every          update_every          int    updates every this many steps
--updates-per-step      updates_per_step      int    updates each time
--target-entropy-ratio  target_entropy_ratio  float  α's target entropy: this x log(valid actions)
--initial-alpha         initial_alpha         float  α at the start
--d-model               d_model               int    the set encoder's width
--heads                 heads                 int    attention heads
--layers                layers                int    encoder layers
--d-ff                  d_ff                  int    the encoder's feed-forward width
--d-head-hidden         d_head_hidden         int    the action head's hidden width
--factored              factored              bool   the head also scores the actions' options
--search-every          search_every          int    one training episode in this many is also searched with the actor
                                                     (search distillation; 0: none)
--expert-max-window     expert_max_window     int    windows of up to this many jobs are labelled by the expert
                                                     (DAgger; 0: none)
--expert-grid           expert_grid           str    the expert's options: teacher (with ways and bandwidth) or cores
--soft-labels           soft_labels           float  temperature of the expert's soft join-or-skip labels (0: hard
                                                     labels)
--search-budget         search_budget         int    rollouts of the search distillation's search
--distill-coef          distill_coef          float  weight of the imitation loss in the actor's loss
--teacher-workers       teacher_workers       int    processes making the expert's labels and the searched plans (0:
                                                     in the learner's process)
--teacher-lag           teacher_lag           int    episodes after the episode they teach that the workers' lessons
                                                     are used
--group-groups          group_groups          int    the group-cost head (fitted beside the learner, in its own
                                                     process): random groups of the training jobs run on the node
                                                     model under every core split and schedule, to regress on; 0: no
                                                     head (the agent plans with the actor)
--group-epochs          group_epochs          int    the group-cost head's epochs over those groups
--eval-every            eval_every            int    validate every this many steps
--eval-per-cell         eval_per_cell         int    validation windows per (W, Cmax) cell
--checkpoint-every      checkpoint_every      int    checkpoint every this many steps
"""


def _options(table: str) -> dict[str, tuple[str, str, str]]:
    """flag -> (field, kind, help) from ``_TABLE``."""
    rows: list[list[str]] = []
    for ln in table.strip("\n").splitlines():
        if ln[:1].isspace():
            rows[-1][3] += " " + ln.strip()
        else:
            rows.append(ln.split(None, 3))
    return {flag: (name, kind, text) for flag, name, kind, text in rows}


OPTIONS = _options(_TABLE)
_TYPES = {"int": int, "float": float}


def register(sub: argparse._SubParsersAction) -> None:
    from training.set_sac import Args

    p = sub.add_parser("train", help="train the agent (discrete SAC) for a node; writes a model file",
                       description="Train the co-scheduling agent (one set-encoder policy for every window size and "
                       "Cmax) in a node model: sim:NAME, a node-model file sim:FILE, or local (this node's calibrated "
                       "model, 'cosched calibrate'); or on this node with real runs of a window's jobs (--backend "
                       "real; slow; resumable; measured identical groups are reused). Shows progress, validates "
                       "periodically, checkpoints, draws the training curves and writes the model file.")
    p.add_argument("--run-dir", default=None, help="checkpoints, log, curves (default runs/train-<backend>-<node>-s<seed>)")
    p.add_argument("--out", default=None, metavar="MODEL", help="model file to write (default RUN_DIR/model.npz)")
    p.add_argument("--resume", action="store_true", help="continue the run in --run-dir from its checkpoint")
    p.add_argument("--export-only", action="store_true",
                   help="write --out from RUN_DIR's best validated actor so far (a run stopped early), train nothing")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--refresh", action="store_true",
                   help="this node's model again (what a plan asks for when its programs lie outside what the model "
                   "was trained on): --node local with make run's short recipe (6000 steps, windows of 2-8 jobs, a "
                   "group-cost head on 4000 groups; a few minutes) in the calibrated node model with every program "
                   "profiled since, written to $COSCHED_HOME/models/<node id>.npz, where it plans by default")
    defaults = Args()
    for flag, (name, kind, text) in OPTIONS.items():
        default = getattr(defaults, name)
        text += f" (default {','.join(map(str, default)) if isinstance(default, tuple) else default})" if default is not None else ""
        if kind == "bool":
            p.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction, default=None, help=text)
        else:
            p.add_argument(flag, dest=name, type=_TYPES.get(kind, str), default=None, help=text)
    p.set_defaults(handler=run)


def _ints(text: str, what: str) -> tuple[int, ...]:
    try:
        vals = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise InputError(f"{what} takes whole numbers separated by commas, not {text!r}") from None
    if not vals:
        raise InputError(f"{what} is empty")
    return vals


def training_args(ns: argparse.Namespace) -> Any:
    """The run's ``Args`` from the options given (a real run's defaults where none is given); a resumed or exported
    run keeps its own settings, only its length may change. ``InputError`` names the bad option."""
    from training.set_sac import REAL_DEFAULTS, Args, saved_args

    kw: dict[str, Any] = {}
    for flag, (name, kind, _) in OPTIONS.items():
        value = getattr(ns, name, None)
        if value is None:
            continue
        if kind == "ints":
            value = _ints(value, flag)
        elif kind == "names":
            value = tuple(j.strip() for j in value.split(",") if j.strip())
        kw[name] = value
    if "windows" in kw and len(kw["windows"]) != 2:
        raise InputError(f"--windows takes LO,HI (e.g. 2,12), not {ns.windows!r}")
    if kw.get("backend") == "real":
        kw = {**REAL_DEFAULTS, **kw}
    if getattr(ns, "refresh", False):
        if kw.get("backend", "sim") != "sim" or kw.get("node", "local") != "local":
            raise InputError("--refresh trains this node's model in its calibrated node model: it takes no --backend "
                             "real and no other --node")
        kw = {**REFRESH_RECIPE, "cmaxes": tuple(range(1, min(4, _local_cpus()) + 1)), **kw, "node": "local"}
    try:
        if ns.run_dir and (ns.resume or ns.export_only):
            saved = saved_args(Path(ns.run_dir), kw.get("total_steps"))
            if saved is not None:
                return saved
        return Args(**kw)
    except ValueError as e:
        raise InputError(str(e)) from None


#: ``--refresh``: make run's short recipe (tools/run-example.sh), options given on the command line still win.
REFRESH_RECIPE = {"total_steps": 6000, "windows": (2, 8), "learning_starts": 1000, "eval_every": 2000, "seed": 1,
                  "group_groups": 4000, "group_epochs": 20}


def _local_cpus() -> int:
    from env.sim.nodes import load_node

    return len(load_node("local").cpus)


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
    from env.calibration.learned import planning_model

    got = planning_model(key)  # with every program profiled since (learned from its production runs)
    if got is not None:  # the programs learned since are trained on like the calibrated ones
        model = got[1].model_copy(update={"jobs": [j.model_copy(update={"role": "train"}) if j.suite == "learned" else j
                                                   for j in got[1].jobs]})
    n = synthetic or 2 * len(model.jobs)
    derived = around(model, n, seed, source=str(path.resolve()))
    out = path.with_name(f"{path.stem}-train-s{seed}.json")
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    tmp.write_text(derived.model_dump_json(indent=1) + "\n")
    os.replace(tmp, out)
    print(f"training in the node model {path} ({len(model.jobs)} jobs measured on this node, {n} drawn around them: {out})",
          file=sys.stderr)
    return f"sim:{out.resolve()}"


def _cmaxes_for_node(a: Any, *, explicit: bool) -> Any:
    """``a`` with its training Cmax values bounded by the node's CPUs (a group runs each job on CPUs of its own),
    said in one line; a Cmax given on the command line beyond them is bad input."""
    import dataclasses

    from env.sim.nodes import load_node

    try:
        n_cpus = len(load_node("local" if a.backend == "real" else a.node).cpus)
    except (InputError, ValueError, OSError):
        return a  # the node is judged where the run loads it, with its own message
    kept = tuple(c for c in a.cmaxes if c <= n_cpus)
    if kept == tuple(a.cmaxes):
        return a
    flag = ",".join(map(str, a.cmaxes))
    if explicit:
        raise InputError(f"--cmaxes {flag}: the node has {n_cpus} CPUs, so at most {n_cpus} jobs run at once; "
                         f"give --cmaxes {','.join(map(str, kept)) or '1'}")
    print(f"training Cmax {','.join(map(str, kept))} (not {flag}): the node has {n_cpus} CPUs, at most {n_cpus} jobs "
          "at once", file=sys.stderr)
    return dataclasses.replace(a, cmaxes=kept, eval_cells=tuple(c for c in a.eval_cells if c[1] <= n_cpus))


def run(args: argparse.Namespace) -> int:
    import dataclasses

    from training.policies import user_models_dir
    from training.set_sac import export_only, main

    a = training_args(args)
    tag = f"{a.backend}-{'local' if a.backend == 'real' else a.node.replace(':', '-')}"
    if a.backend == "sim" and a.node == "local":  # this node's calibrated model, its jobs and jobs drawn around them
        a = dataclasses.replace(a, node=_calibrated_local(a.synthetic_jobs if args.synthetic_jobs is not None else 0, a.seed),
                                synthetic_jobs=0)
        tag = "sim-local"
    if not (args.resume or args.export_only):
        a = _cmaxes_for_node(a, explicit=args.cmaxes is not None)
    run_dir = Path(args.run_dir or f"runs/train-{tag}-s{a.seed}")
    out = Path(args.out) if args.out else run_dir / "model.npz"
    if args.refresh and not args.out:
        from env.node.discover import local_node_id

        out = user_models_dir() / f"{local_node_id()}.npz"
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
    print(f"run directory: {run_dir} (log.jsonl, tensorboard/, curves.png, checkpoint.pt, figures.json, actors/)")
    print(f"plan with it: --model {out}, or copy it into {user_models_dir()}/ to make it the default for its node")
    return 0
