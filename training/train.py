"""Training the agent (``cosched train``): masked discrete SAC (``agent.sac``) on the gym env, sim or real.

One loop for both backends (``training.setup`` says what each trains on):

* every episode is one window planned by the agent's behaviour policy (``Agent.explore``) in
  ``env.gym_env.CoScheduleEnv``; its transitions go to the replay buffer through ``Agent.record`` (which runs
  the updates that are due) once the episode is over, because of the reward below;
* **reward** (``--reward group``, the default): the final reward is *redistributed* to the groups. The total
  co-run time is the sum of the group makespans, so the step that closes group g gets
  ``scale · (solo_g − makespan_g) / solo_total`` (solo_g: the group's jobs' solo times). The episode's
  return is ``scale · (1 − CoRunTime / SoloRunTime)``, a monotone function of the paper's
  ``rw_f = (SoloRunTime / CoRunTime − 1) · 100`` for a window, but credit reaches the decisions of each group
  directly instead of only through the critic's bootstrap. The heuristic guide ``rw_i`` is added with
  ``--intermediate-weight`` (default 0: the redistributed reward is dense already). ``--reward paper`` uses
  the env's own rewards (``0.1·rw_i`` per allocation, ``rw_f`` at the end), scaled by ``--paper-scale``.
  A truncated episode (the env's step limit, only reachable by skipping in circles) ends with ``-scale``;
* **periodic evaluation** every ``--eval-every`` env steps: the greedy actor (and ``fifo``) plans the
  validation windows (sim: seeded windows of the whole catalogue, held-out jobs included, not the standard
  evaluation file); the actor with the best validation mean is the one exported;
* **checkpoints** (``run_dir/checkpoint.pt``, ``Agent.save_checkpoint`` plus ``trainer.json``) between episodes
  every ``--checkpoint-every`` steps and at the end: ``--resume`` continues exactly (same episodes, same
  updates); the JSONL log is cut back to the checkpoint;
* **progress**: a rich bar with the running figures (return, throughput vs time sharing, α, losses, last
  validation) and ``run_dir/log.jsonl`` (one record per episode and per evaluation);
* **the end**: curves (``run_dir/curves.png``), the final evaluation table (``training.evaluation``) and the
  model file (``agent.modelfile``: actor weights, feature pipeline, action encoding, W, Cmax, node, figures).

Everything is seeded: env resets with ``seed + episode``, the agent's RNGs from ``SACConfig.seed``, torch
single-threaded (bit-identical models for one seed on one machine).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import resource
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from env.episode import RewardConfig
from env.errors import InputError

TRAINER_FORMAT = "cosched-trainer/1"


@dataclass
class TrainConfig:
    """Everything a training run depends on (saved in ``run_dir/config.json`` and in the model file)."""

    backend: str = "sim"  # "sim" | "real"
    node: str = "sim:reference"  # sim:NAME; the real backend always trains for 'local'
    steps: int = 30_000  # env steps (transitions)
    seed: int = 1
    window_size: int = 6
    cmax: tuple[int, ...] = (4,)  # Cmax of the training episodes, cycled; the model's limit is the largest
    jobs: tuple[str, ...] | None = None  # sim: training job names (default: the paper's 12)
    synthetic_jobs: int = 0  # sim: generated jobs (env.sim.synthetic, seeded by --seed) added to the training jobs
    window_file: str | None = None  # real: the window whose jobs are trained on (default examples/window.json)
    reward: str = "group"  # "group" (redistributed final reward) | "paper" (the env's rw_i / rw_f)
    reward_scale: float = 1.0  # group reward (larger scales saturate the softmax early: see the README): scale · (solo_g − makespan_g) / solo_total
    intermediate_weight: float = 0.0  # weight of the heuristic rw_i in the group reward
    paper_scale: float = 0.1  # paper reward: multiplied by this
    eval_every: int = 2_000  # env steps between validation runs
    n_validation: int = 24
    checkpoint_every: int = 10_000
    real_timeout_s: float | None = 600.0
    demos: int = 0  # sim: demonstration episodes from the search on training windows (training.demos); 0: plain SAC
    pretrain_updates: int = 0  # warm-start updates on the demonstrations alone
    bc_weight: float = 1.0  # weight of the behaviour-cloning term on demonstrations in the actor loss
    demo_batch: int = 32  # demonstration transitions appended to every update's batch
    demo_workers: int = 2  # sim: processes playing the demonstrations (same data for any number; the search is the cost)
    demo_noise: float = 0.0  # sim: probability of a random job-level action in a demonstration (DART); labels stay the expert's
    expert_grid: str = "cores"  # sim: the expert's search grid (training.demos.expert_grid)
    dagger: bool = False  # sim: label every state the agent visits with the expert's action (DAgger) for the cloning term
    bc_batch: int = 128  # labels (demonstrations' and DAgger's) in the cloning term of each update
    obs_layout: str = "queue-v2"  # env.episode.OBS_LAYOUTS
    ensemble: int = 1  # K > 1: K agents (seeds seed..seed+K-1) distilled into one actor (training.distill)
    distill_windows: int = 3000  # ensemble: fresh training windows whose ensemble states the student learns on
    distill_updates: int = 10_000  # ensemble: the student's updates
    warm_start_actor: str = "sac+bc"  # the actor's loss in the warm start: SAC's plus cloning, or cloning only ("bc")
    finetune_windows: int = 0  # sim: windows of on-policy fine-tuning of the final actor (training.finetune); 0: none
    finetune_samples: int = 8  # sim: sampled episodes per fine-tuning window
    finetune_lr: float = 3e-5  # sim: fine-tuning's learning rate (decays linearly to 0)
    finetune_roots: str = "sampled"  # sim: training.finetune.ROOT_CHOICES (the schedule action sampled, or each enumerated)
    lookahead_rounds: int = 0  # sim: rounds of one-step lookahead improvement after fine-tuning (training.lookahead); 0: none
    lookahead_windows: int = 2_000  # sim: training windows a lookahead round
    lookahead_k: int = 4  # sim: candidates a state (the actor's k best actions)
    lookahead_updates: int = 1_000  # sim: updates a lookahead round
    lookahead_lr: float = 5e-5  # sim: the lookahead phase's learning rate (decays linearly to 0)
    sac: dict[str, Any] = field(default_factory=dict)  # SACConfig overrides

    def __post_init__(self) -> None:
        if self.backend not in ("sim", "real"):
            raise InputError(f"--backend {self.backend!r}: choose sim or real")
        if self.reward not in ("group", "paper"):
            raise InputError(f"--reward {self.reward!r}: choose group or paper")
        if not self.cmax or any(c < 1 for c in self.cmax):
            raise InputError("--cmax takes values of at least 1")
        if self.warm_start_actor not in ("sac+bc", "bc"):
            raise InputError(f"--warm-start-actor {self.warm_start_actor!r}: choose sac+bc or bc")
        if self.dagger and not self.demos:
            raise InputError("--dagger labels states for the cloning term: it needs --demos")
        if self.demos and self.backend != "sim":
            raise InputError("demonstrations come from the search on the simulated node: --demos is for --backend sim")
        if self.synthetic_jobs and self.backend != "sim":
            raise InputError("generated jobs exist on the simulated node: --synthetic-jobs is for --backend sim")
        if self.ensemble < 1 or self.ensemble > 16:
            raise InputError("--ensemble takes 1 to 16 agents")
        if self.distill_windows < 0 or self.distill_updates < 0:
            raise InputError("--distill-windows and --distill-updates must be 0 or more (--distill-updates 0: the "
                             "model holds the K actors themselves)")
        if self.demo_workers < 1:
            raise InputError("--demo-workers must be at least 1")
        if self.synthetic_jobs < 0:
            raise InputError("--synthetic-jobs must be 0 or more")
        if self.finetune_windows and self.backend != "sim":
            raise InputError("fine-tuning scores thousands of episodes on the simulated node: --finetune-windows is for --backend sim")
        if self.finetune_windows < 0 or self.finetune_samples < 2 or not self.finetune_lr > 0:
            raise InputError("--finetune-windows must be 0 or more, --finetune-samples at least 2 (their mean is the "
                             "baseline) and --finetune-lr above 0")
        if self.lookahead_rounds:
            from training.lookahead import LookaheadConfig

            if self.backend != "sim":
                raise InputError("the lookahead phase scores every candidate action on the simulated node: "
                                 "--lookahead-rounds is for --backend sim")
            if self.ensemble > 1 and not self.distill_updates:
                raise InputError("--lookahead-rounds improves the one shipped actor: with --ensemble, keep distillation "
                                 "on (--distill-updates above 0)")
            try:
                LookaheadConfig(rounds=self.lookahead_rounds, windows=self.lookahead_windows, k=self.lookahead_k,
                                updates=self.lookahead_updates, lr=self.lookahead_lr)
            except ValueError:
                raise InputError("--lookahead-rounds must be 0 or more, --lookahead-windows and --lookahead-updates at "
                                 "least 1, --lookahead-k at least 2 and --lookahead-lr above 0") from None
        if self.finetune_windows:
            from training.finetune import ROOT_CHOICES, FinetuneConfig, root_actions

            if self.finetune_roots not in ROOT_CHOICES:
                raise InputError(f"--finetune-roots takes one of {', '.join(ROOT_CHOICES)}, not {self.finetune_roots!r}")
            roots = root_actions(self.finetune_roots, self.expert_grid)
            try:
                FinetuneConfig(samples=self.finetune_samples, roots=roots)
            except ValueError:
                raise InputError(f"--finetune-roots {self.finetune_roots} plays each window from {len(roots)} schedule "
                                 f"actions: --finetune-samples must be a multiple of {len(roots)}, at least "
                                 f"{2 * len(roots)} (two episodes from each)") from None
        if self.window_size < 1 or self.steps < 1:
            raise InputError("--window-size and --steps must be at least 1")
        self.cmax = tuple(int(c) for c in self.cmax)
        if self.jobs is not None:
            self.jobs = tuple(self.jobs)

    def sac_config(self) -> Any:
        from agent.sac import SACConfig

        base = dict(DEFAULT_SAC)
        base.update(self.sac)
        base["seed"] = self.seed
        try:
            return SACConfig.from_dict(base)
        except (TypeError, ValueError) as exc:
            raise InputError(f"SAC settings: {exc}") from None

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["cmax"] = list(self.cmax)
        d["jobs"] = list(self.jobs) if self.jobs else None
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TrainConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in d.items() if k in known}
        kw["cmax"] = tuple(kw.get("cmax", (4,)))
        return cls(**kw)


#: The SAC settings training uses unless told otherwise (agent.sac.SACConfig's defaults otherwise).
DEFAULT_SAC: dict[str, Any] = {
    "batch_size": 64,
    "learning_starts": 2_000,
    "update_frequency": 1,
    "updates_per_step": 1,
    "gamma": 0.99,
    "target_entropy_ratio": 0.3,
    "buffer_size": 200_000,
}


@dataclass
class TrainResult:
    model_path: Path | None
    run_dir: Path
    figures: dict[str, Any]
    evaluation: dict[str, Any] | None


# ------------------------------------------------------------------------------------------ helpers
def _episode_seed(seed: int, episode: int) -> int:
    return int(np.random.SeedSequence([seed, episode]).generate_state(1)[0])


def _cpu_s() -> float:
    return time.process_time()


def _children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class _Log:
    """run_dir/log.jsonl: one JSON record per line, flushed per record."""

    def __init__(self, path: Path, keep_until_step: int | None) -> None:
        self.path = path
        if keep_until_step is not None and path.exists():
            kept = [ln for ln in path.read_text().splitlines() if ln.strip() and json.loads(ln).get("step", 0) <= keep_until_step]
            path.write_text("".join(ln + "\n" for ln in kept))
        elif keep_until_step is None:
            path.write_text("")
        self.f = open(path, "a", encoding="utf-8")

    def write(self, rec: dict[str, Any]) -> None:
        self.f.write(json.dumps(rec, allow_nan=False, default=float) + "\n")
        self.f.flush()

    def close(self) -> None:
        self.f.close()


def _finite(x: float) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None


# ------------------------------------------------------------------------------------- one episode
def group_rewards(trans: list[list[Any]], closed: list[int], ep: Any, makespans: list[float], cfg: "TrainConfig") -> None:
    """Add the redistributed final reward: the step that closed group g gets
    ``scale · (solo_g − makespan_g) / solo_total`` (transition[3] is the reward; ``closed[t]``: groups closed
    after step t). Only for ``cfg.reward == 'group'``."""
    if cfg.reward != "group":
        return
    solo_total = ep.solo_total_s()
    if len(makespans) != ep.groups_closed:
        raise RuntimeError(f"{len(makespans)} makespans for {ep.groups_closed} groups")
    solo_g = [0.0] * len(makespans)
    for s, g in enumerate(ep.group_of):
        solo_g[g] += ep.infos[s].solo_s
    t_prev = 0
    for t, c in enumerate(closed):
        for g in range(t_prev, c):  # the groups this step closed
            trans[t][3] += cfg.reward_scale * (solo_g[g] - makespans[g]) / solo_total
        t_prev = c


def run_training_episode(agent: Any, env: Any, cfg: TrainConfig, expert: Any = None) -> dict[str, Any]:
    """One exploring episode; its transitions are recorded (updates run) once it is over. With an ``expert``
    (DAgger) every visited state with a choice is labelled with the expert's action for the cloning term."""
    obs, info = env.reset(seed=_episode_seed(cfg.seed, agent.episodes))
    mask = np.asarray(info["action_mask"]).astype(np.bool_)
    trans: list[list[Any]] = []
    closed: list[int] = []
    while True:
        if expert is not None and mask.sum() > 1:
            agent.add_label(obs, mask, expert.action(env.episode))  # DAgger: the expert's action in the agent's state
        a = agent.explore(obs, mask)
        next_obs, r, terminated, truncated, info = env.step(a)
        next_mask = np.asarray(info["action_mask"]).astype(np.bool_)
        r = float(r) * (cfg.paper_scale if cfg.reward == "paper" else 1.0)
        trans.append([obs, mask, a, r, next_obs, next_mask, bool(terminated)])
        closed.append(env.episode.groups_closed)
        obs, mask = next_obs, next_mask
        if terminated or truncated:
            break
    ep = env.episode
    thr = info.get("throughput_vs_timeshare")
    if truncated and not terminated:
        trans[-1][3] += -cfg.reward_scale
        trans[-1][6] = True  # a dead end: no bootstrap
    elif cfg.reward == "group":
        group_rewards(trans, closed, ep, info["makespans"], cfg)
    ret = 0.0
    last = None
    for o, m, a, r, no, nm, term in trans:
        ret += r
        last = agent.record(o, m, a, r, no, nm, term) or last
    agent.episodes += 1
    out: dict[str, Any] = {"return": ret, "length": len(trans), "throughput": _finite(thr) if thr is not None else None,
                           "groups": ep.groups_closed, "truncated": bool(truncated and not terminated)}
    if last:
        out.update({k: last[k] for k in ("critic_loss", "actor_loss", "alpha_loss", "entropy", "q_taken", "bc_loss") if k in last})
    out["alpha"] = agent.alpha
    return out


# ---------------------------------------------------------------------------------------- validation
def validate(layers: list[tuple[np.ndarray, np.ndarray]], setup: Any, window_size: int,
             members: Any = None) -> dict[str, Any]:
    """The greedy actor (and fifo) on the validation windows: mean throughput vs time sharing. ``members``: an
    ensemble's actors (their mean logits) instead of ``layers``."""
    from env.episode import plan_window
    from training.policies import ActorChooser

    out: dict[str, Any] = {}
    for name, fifo in (("agent", False), ("fifo", True)):
        thr = []
        for w in setup.validation:
            plan = plan_window(w, setup.node, setup.provider, ActorChooser(layers, fifo=fifo, members=members), policy=name,
                               window_size=window_size, obs_layout=setup.obs_layout).plan
            solo = sum(setup.provider.get(j.profile_name).solo_s for j in w.jobs)
            thr.append(solo / sum(setup.backend.evaluate(plan, seed=0)))
        out[name] = float(np.mean(thr))
    return out


def validation_baselines(setup: Any, window_size: int) -> dict[str, float]:
    """Greedy and time sharing on the validation windows (cheap; for the running figures)."""
    if setup.backend.name != "sim":
        return {}
    from env.baselines import PlanContext, get_policy

    out = {}
    for name in ("greedy",):
        pol = get_policy(name)
        thr = []
        for i, w in enumerate(setup.validation):
            ctx = PlanContext(node=setup.node, provider=setup.provider, seed=i, window_size=window_size)
            plan = pol.plan(w, ctx)
            solo = sum(setup.provider.get(j.profile_name).solo_s for j in w.jobs)
            thr.append(solo / sum(setup.backend.evaluate(plan, seed=0)))
        out[name] = float(np.mean(thr))
    return out


# ---------------------------------------------------------------------------------------- progress
class _Progress:
    """A rich progress bar with the running figures (stderr); plain lines when stderr is not a terminal."""

    def __init__(self, total: int, start: int, enabled: bool, title: str) -> None:
        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self.bar = None
        self.last_line = 0.0
        if enabled and self.tty:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            self.bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                TimeRemainingColumn(), TextColumn("{task.fields[figures]}"), console=Console(stderr=True),
                                refresh_per_second=4)
            self.bar.start()
            self.task = self.bar.add_task(title, total=total, completed=start, figures="")
        self.title = title
        self.total = total

    def update(self, step: int, figures: str) -> None:
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(self.task, completed=min(step, self.total), figures=figures)
        elif time.monotonic() - self.last_line > 30:
            self.last_line = time.monotonic()
            print(f"{self.title}: step {step}/{self.total} {figures}", file=sys.stderr, flush=True)

    def say(self, text: str) -> None:
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.console.print(text)
        else:
            print(text, file=sys.stderr, flush=True)

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _figures_text(ema: dict[str, float], val: dict[str, Any] | None, alpha: float, base: dict[str, float]) -> str:
    parts = [f"ret {ema.get('return', float('nan')):.2f}", f"thr {ema.get('throughput', float('nan')):.3f}", f"α {alpha:.3g}"]
    if "critic_loss" in ema:
        parts.append(f"Lq {ema['critic_loss']:.3g} Lπ {ema['actor_loss']:.3g}")
    if val:
        parts.append(f"val {val['agent']:.3f}" + (f" (greedy {base['greedy']:.3f})" if "greedy" in base else ""))
    return " · ".join(parts)


# ------------------------------------------------------------------------------------------- train
def train(cfg: TrainConfig, run_dir: str | os.PathLike[str], out: str | os.PathLike[str] | None, *,
          resume: bool = False, progress: bool = True, final_eval: bool = True, command: str | None = None,
          eval_windows: str | None = None, say: Callable[[str], None] | None = None,
          steps_override: int | None = None) -> TrainResult:
    import torch

    from agent.sac import Agent

    torch.set_num_threads(1)  # reproducible, and the machine is shared
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if resume and cfg.ensemble == 1 and (run_dir / "members").is_dir():  # an ensemble run: its saved config
        cfg = TrainConfig.from_dict(json.loads((run_dir / "config.json").read_text()))
    if cfg.ensemble > 1:
        from training.distill import train_ensemble

        if not resume and (run_dir / "members").is_dir():
            raise InputError(f"{run_dir} holds an ensemble run already: pass --resume to continue it, or another --run-dir")
        return train_ensemble(cfg, run_dir, Path(out) if out else None, resume=resume, progress=progress,
                              final_eval=final_eval, command=command, eval_windows=eval_windows,
                              say=say or (lambda text: print(text, file=sys.stderr, flush=True) if progress else None))
    ckpt, state_path, cfg_path = run_dir / "checkpoint.pt", run_dir / "trainer.json", run_dir / "config.json"
    if resume:
        if not (ckpt.exists() and state_path.exists() and cfg_path.exists()):
            raise InputError(f"--resume: no checkpoint in {run_dir} (train without --resume first)")
        saved = TrainConfig.from_dict(json.loads(cfg_path.read_text()))
        if steps_override:
            saved.steps = steps_override  # --steps with --resume: the new total
        cfg = saved
    else:
        if ckpt.exists():
            raise InputError(f"{run_dir} holds a checkpoint already: pass --resume to continue it, or another --run-dir")
    cfg_path.write_text(json.dumps(cfg.to_dict(), indent=1))
    sac_cfg = cfg.sac_config()
    reward = (RewardConfig(intermediate_weight=cfg.intermediate_weight, final_weight=0.0) if cfg.reward == "group"
              else RewardConfig())
    bar_holder: list[_Progress] = []

    def _say(text: str) -> None:
        if bar_holder:
            bar_holder[0].say(text)
        elif say is not None:
            say(text)
        elif progress:
            print(text, file=sys.stderr, flush=True)

    setup = make_setup(cfg, run_dir, reward, _say)
    envs = {c: setup.make_env(c) for c in cfg.cmax}
    obs_dim = envs[cfg.cmax[0]].observation_space.shape[0]

    from training.demos import DemoAgent

    agent_cls = DemoAgent if cfg.demos else Agent
    if resume:
        agent = agent_cls.load_checkpoint(ckpt)
        st = json.loads(state_path.read_text())
        if st.get("format") != TRAINER_FORMAT:
            raise InputError(f"{state_path}: not a {TRAINER_FORMAT} state")
        best_layers = _load_layers(run_dir / "best-actor.npz") if (run_dir / "best-actor.npz").exists() else None
    else:
        agent = agent_cls(obs_dim, sac_cfg)
        st = {"format": TRAINER_FORMAT, "wall_s": 0.0, "cpu_s": 0.0, "children_cpu_s": 0.0, "best": None, "evals": [],
              "next_eval": cfg.eval_every, "next_ckpt": cfg.checkpoint_every, "ema": {}}
        best_layers = None
    log = _Log(run_dir / "log.jsonl", agent.global_step if resume else None)
    base = st.get("val_baselines")
    if base is None:
        base = validation_baselines(setup, cfg.window_size)
        st["val_baselines"] = base
    bar = _Progress(cfg.steps, agent.global_step, progress, f"training for {setup.trained_for_name} ({cfg.backend} backend)")
    bar_holder.append(bar)
    if resume:
        bar.say(f"resumed {run_dir} at step {agent.global_step} (episode {agent.episodes})")
    ema: dict[str, float] = st.get("ema", {})
    t_wall, t_cpu, t_child = time.monotonic(), _cpu_s(), _children_cpu_s()
    expert = None
    if cfg.demos:
        _with_demos(agent, cfg, setup, run_dir, st, log, bar)
        if st.get("best") is not None and (run_dir / "best-actor.npz").exists():
            best_layers = _load_layers(run_dir / "best-actor.npz")
        if cfg.dagger:
            from training.demos import make_expert

            expert = make_expert(setup, cfg)

    def elapsed() -> tuple[float, float, float]:
        return (st["wall_s"] + time.monotonic() - t_wall, st["cpu_s"] + _cpu_s() - t_cpu,
                st["children_cpu_s"] + _children_cpu_s() - t_child)

    def save_checkpoint() -> None:
        w, c, ch = elapsed()
        agent.save_checkpoint(ckpt)
        snap = dict(st, wall_s=w, cpu_s=c, children_cpu_s=ch, ema=ema)
        tmp = state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(snap, indent=1))
        os.replace(tmp, state_path)

    last_val = st["evals"][-1] if st["evals"] else None
    try:
        while agent.global_step < cfg.steps:
            env = envs[cfg.cmax[agent.episodes % len(cfg.cmax)]]
            fig = run_training_episode(agent, env, cfg, expert)
            for k, v in fig.items():
                if isinstance(v, (int, float)) and v is not None and not isinstance(v, bool):
                    ema[k] = v if k not in ema else 0.98 * ema[k] + 0.02 * v
            w, c, ch = elapsed()
            log.write({"kind": "episode", "step": agent.global_step, "episode": agent.episodes, "updates": agent.updates,
                       "wall_s": round(w, 3), "cpu_s": round(c, 3), **{k: v for k, v in fig.items() if v is not None}})
            if agent.global_step >= st["next_eval"] or agent.global_step >= cfg.steps:
                layers = agent.actor.layers_numpy()
                val = validate(layers, setup, cfg.window_size)
                rec = {"kind": "eval", "step": agent.global_step, "episode": agent.episodes, "wall_s": round(w, 3),
                       "cpu_s": round(c, 3), **val, **{f"baseline_{k}": v for k, v in base.items()}}
                log.write(rec)
                st["evals"].append(rec)
                last_val = rec
                if st["best"] is None or val["agent"] > st["best"]["agent"]:
                    st["best"] = rec
                    best_layers = layers
                    _save_layers(run_dir / "best-actor.npz", layers)
                while st["next_eval"] <= agent.global_step:
                    st["next_eval"] += cfg.eval_every
                if cfg.backend == "real":
                    rb = setup.backend
                    bar.say(f"step {agent.global_step}: validation {val['agent']:.3f} (fifo {val['fifo']:.3f}); "
                            f"real groups executed {rb.runs}, reused from measurements {rb.reused}")
            if agent.global_step >= st["next_ckpt"] or (cfg.backend == "real"):
                save_checkpoint()
                while st["next_ckpt"] <= agent.global_step:
                    st["next_ckpt"] += cfg.checkpoint_every
            bar.update(agent.global_step, _figures_text(ema, last_val, agent.alpha, base))
        save_checkpoint()
    finally:
        bar.stop()
        log.close()
    wall, cpu, child = elapsed()
    if best_layers is None:
        best_layers = agent.actor.layers_numpy()
    ft_figs = None
    if cfg.finetune_windows:
        from training.finetune import finetune_phase, kept_validation

        best_layers, ft_figs = finetune_phase(best_layers, cfg, setup, run_dir, progress=progress, say=_say)
        wall, cpu, child = elapsed()
    la_figs = None
    if cfg.lookahead_rounds:
        from training.lookahead import lookahead_phase

        best_layers, la_figs = lookahead_phase(best_layers, cfg, setup, run_dir, progress=progress, say=_say)
        wall, cpu, child = elapsed()
    figures: dict[str, Any] = {
        "backend": cfg.backend,
        "simulated": cfg.backend == "sim",
        "steps": agent.global_step,
        "episodes": agent.episodes,
        "updates": agent.updates,
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "children_cpu_s": round(child, 1),
        "selected": {"by": "best validation mean (greedy actor)", **(st["best"] or {})},
        "validation_baselines": base,
        "last_validation": last_val,
    }
    if ft_figs is not None:
        figures["finetune"] = ft_figs
        figures["selected"] = {"by": "the fine-tuned actor (validation, greedy)", "kind": "eval", **kept_validation(ft_figs)}
    if la_figs is not None:
        figures["lookahead"] = la_figs
        figures["selected"] = {"by": "the actor after the lookahead rounds (validation, greedy)", "kind": "eval",
                               **{k: v for k, v in la_figs["evals"][-1].items() if k != "round"}}
    if cfg.backend == "real":
        rb = setup.backend
        figures["real_groups"] = {"executed": rb.runs, "reused_measurements": rb.reused,
                                  "measured_configurations": len(rb.measurements),
                                  "note": "a group whose configuration was measured before is not run again: its measured makespan is reused"}
    plot_curves(run_dir / "log.jsonl", run_dir / "curves.png", title=f"{cfg.backend}:{setup.trained_for_name}")
    evaluation = None
    model_path = Path(out) if out else None
    if model_path is not None:
        meta = export(model_path, best_layers, cfg, setup, sac_cfg, figures, command)
        if final_eval:
            from training.evaluation import final_evaluation

            evaluation = final_evaluation(model_path, setup, cfg, run_dir, windows_file=eval_windows, say=_say)
            figures["evaluation"] = evaluation["summary"]
            meta = export(model_path, best_layers, cfg, setup, sac_cfg, figures, command)
        if model_path.resolve() != (run_dir / "model.npz").resolve():  # --out may be RUN_DIR/model.npz itself
            shutil.copyfile(model_path, run_dir / "model.npz")
        figures["model_id"] = meta.model_id
    (run_dir / "figures.json").write_text(json.dumps(figures, indent=1, default=float))
    return TrainResult(model_path, run_dir, figures, evaluation)


def _with_demos(agent: Any, cfg: TrainConfig, setup: Any, run_dir: Path, st: dict[str, Any], log: "_Log", bar: "_Progress") -> None:
    """Make (or load) the demonstrations, attach them, and run the warm start once."""
    from training.demos import load_demos, make_demos, save_demos

    path = run_dir / "demos.npz"
    extra = cfg.steps if cfg.dagger else 0
    if path.exists():
        demos, labels = load_demos(path, extra_labels=extra)
    else:
        t0 = time.monotonic()
        bar.say(f"demonstrations: the expert (search on the '{cfg.expert_grid}' grid) plays {cfg.demos} training windows (simulated)")
        demos, labels = make_demos(setup, cfg, cfg.demos, seed=cfg.seed + 99_991, workers=cfg.demo_workers,
                                   on_progress=lambda i: bar.update(0, f"demonstrations {i}/{cfg.demos}"))
        save_demos(demos, labels, path)
        demos, labels = load_demos(path, extra_labels=extra)
        bar.say(f"demonstrations: {len(demos)} transitions, {len(labels)} labelled states in {time.monotonic() - t0:.0f} s")
    agent.attach_demos(demos, labels, bc_weight=cfg.bc_weight, demo_batch=cfg.demo_batch, bc_batch=cfg.bc_batch)
    agent.clone_only_warm_start = cfg.warm_start_actor == "bc"
    if not st.get("pretrained") and cfg.pretrain_updates:
        figs: dict[str, float] = {}
        for i in range(cfg.pretrain_updates):
            figs = agent.pretrain_update(agent.cfg.batch_size)
            if (i + 1) % 500 == 0:
                bar.update(0, f"warm start {i + 1}/{cfg.pretrain_updates} bc {figs.get('bc_loss', float('nan')):.3f}")
        log.write({"kind": "pretrain", "step": 0, "updates": cfg.pretrain_updates,
                   **{k: v for k, v in figs.items() if k in ("bc_loss", "critic_loss", "actor_loss", "alpha")}})
        st["pretrained"] = True
        layers = agent.actor.layers_numpy()
        val = validate(layers, setup, cfg.window_size)
        bar.say(f"after the warm start: validation {val['agent']:.3f} (fifo {val['fifo']:.3f})")
        rec = {"kind": "eval", "step": 0, "episode": 0, "wall_s": 0.0, "cpu_s": 0.0, **val}
        log.write(rec)
        st["evals"].append(rec)
        if st["best"] is None or val["agent"] > st["best"]["agent"]:  # the warm-started actor is a candidate too
            st["best"] = rec
            _save_layers(run_dir / "best-actor.npz", layers)
            st["warm_start_best"] = True


def make_setup(cfg: TrainConfig, run_dir: Path, reward: RewardConfig, say: Callable[[str], None]) -> Any:
    from env.nodes import load_node
    from training.setup import real_setup, sim_setup

    if cfg.backend == "sim":
        node = load_node(cfg.node)
        if not node.name.startswith("sim:"):
            raise InputError(f"--backend sim trains for a simulated node (sim:NAME), not {cfg.node!r}")
        setup = sim_setup(node, window_size=cfg.window_size, cmaxes=cfg.cmax, jobs=cfg.jobs,
                          n_validation=cfg.n_validation, reward=reward, obs_layout=cfg.obs_layout,
                          synthetic=(cfg.synthetic_jobs, cfg.seed))
        from env.sim.world import world_for

        prov = getattr(world_for(node).model, "provenance", None)
        if prov is not None and prov.source == "calibrated" and prov.backend == "real" and prov.measured_node_id:
            # trained in the model of a real node (cosched train --node local): the agent is that node's
            setup.trained_for_name = "local"
            setup.extra["node_id"] = prov.measured_node_id
        return setup
    if cfg.node not in ("local", "sim:reference"):  # sim:reference is only the parser's default
        raise InputError(f"--backend real trains for this node ('local'), not {cfg.node!r}")
    return real_setup(cfg.window_file, run_dir, window_size=cfg.window_size, cmaxes=cfg.cmax, reward=reward, say=say,
                      timeout_s=cfg.real_timeout_s, obs_layout=cfg.obs_layout)


def export(path: Path, layers: list, cfg: TrainConfig, setup: Any, sac_cfg: Any, figures: dict[str, Any],
           command: str | None, more_members: Sequence[list] = ()) -> Any:
    from agent.modelfile import TrainedFor, write_model
    from env.actions import ENCODING_VERSION
    from env.discover import node_id
    from env.sim.synthetic import is_synthetic
    from profiler.features import FEATURE_SET_ID
    from training.policies import node_shape

    path.parent.mkdir(parents=True, exist_ok=True)
    nid = setup.extra.get("node_id") or node_id(setup.node)
    training = {"figures": figures, "config": cfg.to_dict(), "sac": sac_cfg.to_dict(), "command": command,
                "jobs": [j for j in dict.fromkeys(setup.jobs) if not is_synthetic(j)],
                "synthetic_jobs": {"n": cfg.synthetic_jobs, "seed": cfg.seed} if cfg.synthetic_jobs else None, "reward": {"kind": cfg.reward, "scale": cfg.reward_scale,
                                                      "intermediate_weight": cfg.intermediate_weight}}
    return write_model(path, layers, action_encoding=ENCODING_VERSION, window_size=cfg.window_size,
                       max_concurrency=max(cfg.cmax),
                       trained_for=TrainedFor(name=setup.trained_for_name, node_id=nid, shape=node_shape(setup.node)),
                       feature_set=getattr(setup.pipeline, "feature_set", FEATURE_SET_ID) or FEATURE_SET_ID,
                       feature_pipeline=setup.pipeline.to_dict(), training=json.loads(json.dumps(training, default=float)),
                       more_members=more_members)


def _save_layers(path: Path, layers: list) -> None:
    arrays = {f"{i}.{k}": a for i, (w, b) in enumerate(layers) for k, a in (("w", w), ("b", b))}
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, **arrays)
    os.replace(tmp, path)


def _load_layers(path: Path) -> list:
    with np.load(path, allow_pickle=False) as z:
        n = len(z.files) // 2
        return [(z[f"{i}.w"], z[f"{i}.b"]) for i in range(n)]


# ------------------------------------------------------------------------------------------ curves
def plot_curves(log_path: Path, png: Path, title: str = "") -> None:
    """Training curves from the JSONL log: return, throughput (training episodes and validation), α, losses."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    recs = [json.loads(ln) for ln in log_path.read_text().splitlines() if ln.strip()]
    eps = [r for r in recs if r["kind"] == "episode"]
    evs = [r for r in recs if r["kind"] == "eval"]
    if not eps:
        return

    def smooth(y: list[float], k: int = 50) -> np.ndarray:
        y = np.asarray(y, float)
        if len(y) < k:
            return y
        c = np.cumsum(np.insert(y, 0, 0.0))
        s = (c[k:] - c[:-k]) / k
        return np.concatenate([np.full(k - 1, np.nan), s])

    x = [r["step"] for r in eps]
    fig, ax = plt.subplots(2, 2, figsize=(12, 7))
    ax[0, 0].plot(x, smooth([r["return"] for r in eps]), color="tab:blue")
    ax[0, 0].set_title("episode return (moving mean of 50)")
    thr = [(r["step"], r["throughput"]) for r in eps if r.get("throughput") is not None]
    if thr:
        ax[0, 1].plot([a for a, _ in thr], smooth([b for _, b in thr]), label="training episodes (exploring)", color="tab:gray")
    if evs:
        ax[0, 1].plot([r["step"] for r in evs], [r["agent"] for r in evs], "o-", label="validation: agent", color="tab:red")
        ax[0, 1].plot([r["step"] for r in evs], [r["fifo"] for r in evs], "s--", label="validation: fifo", color="tab:orange")
        if "baseline_greedy" in evs[-1]:
            ax[0, 1].axhline(evs[-1]["baseline_greedy"], color="tab:green", linestyle=":", label="validation: greedy")
    ax[0, 1].axhline(1.0, color="black", linewidth=0.7)
    ax[0, 1].set_title("throughput vs time sharing")
    ax[0, 1].legend(fontsize=8)
    ax[1, 0].plot(x, [r.get("alpha", np.nan) for r in eps], color="tab:purple")
    ax[1, 0].set_yscale("log")
    ax[1, 0].set_title("α (entropy temperature)")
    for key, label in (("critic_loss", "critic loss"), ("actor_loss", "actor loss"), ("bc_loss", "cloning loss (demonstrations)")):
        pts = [(r["step"], r[key]) for r in eps if r.get(key) is not None]
        if pts:
            ax[1, 1].plot([a for a, _ in pts], smooth([b for _, b in pts]), label=label)
    ax[1, 1].set_title("losses (moving mean)")
    ax[1, 1].legend(fontsize=8)
    for a in ax.flat:
        a.set_xlabel("env steps")
    fig.suptitle(f"training {title}" + (" (simulated)" if title.startswith("sim") else " (measured)"))
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)
