"""``cosched train --ensemble K``: K SAC agents from K seeds, distilled into the one actor the model file ships
(``--distill-updates 0``: the file holds the K actors, whose logits the planner averages). With
``--finetune-windows`` the shipped actor(s) are then fine-tuned (``training.finetune``).

Why: each SAC run (demonstrations, warm start, SAC with DAgger; ``training.train``) generalises to new windows
with its own idiosyncratic errors, and runs of the same recipe differ by several points on held-out windows.
Averaging the logits of K actors cancels much of that (measured on the standard file, simulated: three runs at
86.3-88.0 % of best-found, their mean-logit ensemble 90.8 %). Serving K actors would cost K forward passes per
step, so the ensemble is *distilled* (policy distillation, Rusu et al. 2016): one actor of the spec's shape is
trained to match the ensemble's masked softmax (cross-entropy to the soft targets) on

* every labelled state of the demonstrations (the expert's distribution), and
* the ensemble's own states on ``distill_windows`` fresh training windows (its distribution; 10 % random
  job-level actions so that recoveries are seen too) — the same pool of jobs as training, never held-out ones.

The distilled actor is validated like any other and exported with the figures of the members, the ensemble
and itself; the final evaluation is the usual one. Members train one after another in ``RUN_DIR/members/k``
(seed = ``--seed`` + k) on the same demonstrations (played once, by member 0); each is resumable, and a finished
member is not trained again.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np


def train_ensemble(cfg: Any, run_dir: Path, out: Path | None, *, resume: bool, progress: bool, final_eval: bool,
                   command: str | None, eval_windows: str | None, say: Callable[[str], None]) -> Any:
    from agent.modelfile import load_model
    from env.episode import RewardConfig
    from training.train import TrainResult, _cpu_s, export, make_setup, train, validate

    t_wall, t_cpu = time.monotonic(), _cpu_s()
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(cfg.to_dict(), indent=1))
    members: list[Any] = []
    member_figs: list[dict[str, Any]] = []
    for k in range(cfg.ensemble):
        mdir = run_dir / "members" / str(k)
        mcfg = dataclasses.replace(cfg, seed=cfg.seed + k, ensemble=1, finetune_windows=0,
                                   lookahead_rounds=0)  # fine-tuned (and improved) below, once all are trained
        done = mdir / "figures.json"
        if done.exists() and (mdir / "model.npz").exists():
            say(f"ensemble member {k + 1}/{cfg.ensemble}: trained already ({mdir})")
        else:
            shared = run_dir / "members" / "0" / "demos.npz"
            if k and cfg.demos and shared.exists() and not (mdir / "demos.npz").exists():
                mdir.mkdir(parents=True, exist_ok=True)
                os.link(shared, mdir / "demos.npz")  # the same demonstrations for every member: played once
            say(f"ensemble member {k + 1}/{cfg.ensemble} (seed {mcfg.seed}) in {mdir}")
            train(mcfg, mdir, mdir / "model.npz", resume=resume and (mdir / "checkpoint.pt").exists(),
                  progress=progress, final_eval=False, say=say)
        members.append(load_model(mdir / "model.npz").layers)
        member_figs.append(json.loads(done.read_text()))

    reward = (RewardConfig(intermediate_weight=cfg.intermediate_weight, final_weight=0.0) if cfg.reward == "group"
              else RewardConfig())
    setup = make_setup(cfg, run_dir, reward, say)
    t_d = time.monotonic()
    member_vals = ", ".join(f"{f['selected'].get('agent', float('nan')):.3f}" for f in member_figs)
    distillation: dict[str, Any] | None = None
    finetuned: list[dict[str, Any]] = []
    lookahead: dict[str, Any] | None = None
    from training.finetune import finetune_phase, kept_validation

    if cfg.distill_updates:
        say(f"distilling the {cfg.ensemble} actors into one: states of the demonstrations and of the ensemble on "
            f"{cfg.distill_windows} training windows, {cfg.distill_updates} updates")
        obs, mask = distill_states(members, setup, cfg, run_dir / "members" / "0" / "demos.npz")
        student = distill(members, obs, mask, cfg.sac_config().hidden_sizes, updates=cfg.distill_updates, seed=cfg.seed)
        val_ens = validate(members[0], setup, cfg.window_size, members=members)
        val = validate(student, setup, cfg.window_size)
        say(f"validation (simulated): members {member_vals}; their ensemble {val_ens['agent']:.3f}; "
            f"the distilled actor {val['agent']:.3f}")
        distillation = {"states": int(len(obs)), "updates": cfg.distill_updates, "windows": cfg.distill_windows,
                        "wall_s": round(time.monotonic() - t_d, 1)}
        if cfg.finetune_windows:
            student, ft = finetune_phase(student, cfg, setup, run_dir, progress=progress, say=say)
            finetuned.append(ft)
            val = kept_validation(ft)
        if cfg.lookahead_rounds:
            from training.lookahead import lookahead_phase

            student, lookahead = lookahead_phase(student, cfg, setup, run_dir, progress=progress, say=say)
            val = {k: v for k, v in lookahead["evals"][-1].items() if k != "round"}
        actors = [student]
        selected_by = ("the distilled actor" + (", fine-tuned" if finetuned else "")
                       + (", improved by lookahead" if cfg.lookahead_rounds else "") + " (validation, greedy)")
    else:
        # --distill-updates 0: the model file holds the K actors (the planner averages their logits), each one
        # fine-tuned on its own seed. K forward passes per step instead of one (planning a W = 6 window measured
        # 1.9 ms for K = 3 against 0.77 ms for one actor).
        if cfg.finetune_windows:
            for k in range(cfg.ensemble):
                say(f"ensemble member {k + 1}/{cfg.ensemble}: fine-tuning")
                members[k], ft = finetune_phase(members[k], dataclasses.replace(cfg, seed=cfg.seed + k), setup,
                                                run_dir / "members" / str(k), progress=progress, say=say)
                finetuned.append(ft)
        val_ens = validate(members[0], setup, cfg.window_size, members=members)
        val = val_ens
        say(f"validation (simulated): members {member_vals}"
            + (" before fine-tuning, " + ", ".join(f"{f['kept_validation']:.3f}" for f in finetuned) + " after" if finetuned else "")
            + f"; their ensemble (the model) {val_ens['agent']:.3f}")
        actors = members
        selected_by = f"the ensemble of the {cfg.ensemble} actors" + (", each fine-tuned" if finetuned else "") + " (validation, greedy)"
    children = sum(f.get("children_cpu_s", 0.0) for f in member_figs)  # the demonstration workers (members run here)
    figures: dict[str, Any] = {
        "backend": cfg.backend,
        "simulated": cfg.backend == "sim",
        "ensemble": cfg.ensemble,
        "actors": len(actors),
        "steps": sum(f["steps"] for f in member_figs),
        "episodes": sum(f["episodes"] for f in member_figs),
        "updates": sum(f["updates"] for f in member_figs) + cfg.distill_updates,
        # members trained earlier (a resumed run) count with their own recorded time
        "wall_s": round(sum(f["wall_s"] for f in member_figs) + time.monotonic() - t_d, 1),
        "cpu_s": round(_cpu_s() - t_cpu, 1),
        "children_cpu_s": round(children, 1),
        "selected": {"by": selected_by, "kind": "eval", **val},
        "members": [{"seed": cfg.seed + k, "validation": f["selected"].get("agent"), "wall_s": f["wall_s"],
                     "steps": f["steps"]} for k, f in enumerate(member_figs)],
        "ensemble_validation": val_ens,
        "distillation": distillation,
        "finetune": finetuned or None,
        "lookahead": lookahead,
        "validation_baselines": member_figs[0].get("validation_baselines"),
        "command_wall_s": round(time.monotonic() - t_wall, 1),
    }
    evaluation = None
    model_path = out or run_dir / "model.npz"
    sac_cfg = cfg.sac_config()
    meta = export(model_path, actors[0], cfg, setup, sac_cfg, figures, command, more_members=actors[1:])
    if final_eval:
        from training.evaluation import final_evaluation

        evaluation = final_evaluation(model_path, setup, cfg, run_dir, windows_file=eval_windows, say=say)
        figures["evaluation"] = evaluation["summary"]
        meta = export(model_path, actors[0], cfg, setup, sac_cfg, figures, command, more_members=actors[1:])
    figures["model_id"] = meta.model_id
    (run_dir / "figures.json").write_text(json.dumps(figures, indent=1, default=float))
    return TrainResult(model_path, run_dir, figures, evaluation)


def distill_states(members: list[Any], setup: Any, cfg: Any, demos_path: Path) -> tuple[np.ndarray, np.ndarray]:
    """The states the student learns on: the demonstrations' labelled states and the ensemble's own."""
    from agent.policy import MeanLogits
    from env.episode import Episode
    from env.gym_env import _window_jobs
    from training.demos import sample_window

    ens = MeanLogits(members)
    obs_l, mask_l = [], []
    if demos_path.exists():
        from training.demos import load_demos

        _, labels = load_demos(demos_path)
        obs_l.append(labels.obs[: labels.size])
        mask_l.append(labels.mask[: labels.size])
    rng = random.Random(cfg.seed + 31_337)
    jobs = list(setup.jobs)
    O, M = [], []
    for i in range(cfg.distill_windows):
        cmax = cfg.cmax[i % len(cfg.cmax)]
        names = sample_window(rng, jobs, cfg.window_size)
        ep = Episode(setup.node, _window_jobs(names), [setup.provider.get(n) for n in names], max_concurrency=cmax,
                     window_size=cfg.window_size, n_features=setup.provider.n_features, obs_layout=setup.obs_layout)
        while not ep.done:
            m = ep.action_mask().astype(np.bool_)
            o = ep.observation()
            a = int(np.argmax(np.where(m, ens(o), -np.inf)))
            if m.sum() > 1:
                O.append(o)
                M.append(m)
                if ep.schedule_index is not None and rng.random() < 0.1:
                    valid = np.flatnonzero(m)
                    a = int(valid[rng.randrange(valid.size)])
            ep.step(a)
    if O:
        obs_l.append(np.asarray(O, np.float32))
        mask_l.append(np.asarray(M, np.bool_))
    return np.concatenate(obs_l), np.concatenate(mask_l)


def distill(members: list[Any], obs: np.ndarray, mask: np.ndarray, hidden: list[int], *, updates: int, seed: int,
            batch: int = 256, lr: float = 3e-4) -> list[tuple[np.ndarray, np.ndarray]]:
    """One actor (``hidden`` ReLU layers) trained to the ensemble's masked softmax on ``obs``: its layers as
    (weight (out, in), bias) float32, the model file's layout."""
    import torch

    from agent.policy import MeanLogits

    ens = MeanLogits(members)
    logits = np.concatenate([ens(obs[i: i + 4096]) for i in range(0, len(obs), 4096)])
    logits = np.where(mask, logits, -np.inf)
    logits -= logits.max(axis=1, keepdims=True)
    target = np.exp(logits)
    target /= target.sum(axis=1, keepdims=True)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    sizes = [obs.shape[1], *hidden, mask.shape[1]]
    layers: list[torch.nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    net = torch.nn.Sequential(*layers)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    obs_t, mask_t, target_t = torch.as_tensor(obs), torch.as_tensor(mask), torch.as_tensor(target, dtype=torch.float32)
    for _ in range(updates):
        idx = torch.as_tensor(rng.integers(0, len(obs), batch))
        out = net(obs_t[idx]).masked_fill(~mask_t[idx], -1e9)
        loss = -(target_t[idx] * torch.log_softmax(out, dim=1)).sum(dim=1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return [(m.weight.detach().numpy().astype(np.float32), m.bias.detach().numpy().astype(np.float32))
            for m in net if isinstance(m, torch.nn.Linear)]
