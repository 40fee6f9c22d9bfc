"""One training algorithm for the set-encoder policy: masked discrete SAC on the simulated node, top to bottom.

    .venv/bin/python -m training.set_sac --run-dir RUN [--steps N] [--seed S] [--out MODEL.npz] [--resume]

Read it like CleanRL's ``sac_atari.py``: the hyperparameters (``Args``, a dataclass that tyro makes the command
line of; ``cosched train`` builds the same ``Args`` from its own options), the losses, then ``main``: the run
directory, the networks (``agent.setnet_torch.SetNet``: one actor, two critics, two target critics, all the same
network), the replay buffers, and the loop: play an episode in the gymnasium environment with the actor's masked
softmax, store its transitions, update.

* Episodes: ``env.episode.gym_env.SetCoScheduleEnv`` (``training.setup``): ``reset`` draws a training window of W
  jobs (W uniform in ``windows``), Cmax uniform in ``cmaxes``, from the training programs and generated jobs, with
  the episode's generator (seeded by the run's seed and the episode's number), and plays it on
  ``env.episode.planning.set_episode`` (the one episode factory the planner uses too); ``step`` takes an action that
  ``info["action_mask"]`` allows.
* Reward: the step that closes group g gets ``reward_scale · (solo_g − makespan_g) / solo_total``, makespans
  from the simulated node (``GroupEvaluator``, the model ``best-found`` searches) or measured (``--backend real``).
  The return is ``reward_scale · (1 − CoRunTime / SoloRunTime)``: the paper's final reward, shared among the groups.
* Learner: discrete SAC with masks (``agent.sac.masked_policy``: masked logits, guarded p·Q and p·log p), the
  next state's mask in the buffer (``training.buffer``), twin critics, automatic α toward
  ``target_entropy_ratio · log n_valid``.
* Teaching (sim, ``training.teacher``): the expert's label in every state the actor visits (DAgger, W ≤
  ``expert_max_window``) or a plan searched with the actor (larger windows) join a demonstration buffer the actor's
  loss imitates (``imitation_loss``), made in worker processes beside the learner when asked.
* Validation every ``eval_every`` steps (``training.validation``): the greedy actor on seeded windows of the
  training pool (never the held-out programs) at W ∈ {4, 6, 8, 12} × Cmax ∈ {2, 3, 4}; the best actor is kept (and
  each validated actor in ``RUN/actors/step-N.npz``) and exported.
* The group-cost head (``training.group_head``) does not depend on the actor: it is fitted in a process beside
  the one-threaded learner, on the other core, and costs wall time only where it outlasts the learner.
* Progress: a line every 1,000 steps (training episodes' throughput, α, time spent and to go) and one a validation.
  ``RUN/log.jsonl`` has one record per episode and validation, ``RUN/tensorboard`` the same curves
  (``training.curves``); the end writes ``RUN/figures.json``, ``RUN/curves.png`` and the model file.
* Checkpoints (``RUN/checkpoint.pt``: networks, optimizers, α, buffers, counters, RNG states) every
  ``checkpoint_every`` steps; ``--resume`` continues from it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import tyro

from agent.setnet import SetNetShape
from env.episode.window import SET_CONTEXT_NAMES, SET_MAX_CMAX, SET_MAX_WINDOW
from env.plan import actions
from training.buffer import Replay, batch_tensors
from training.curves import RunLog
from training.setup import make_problem, play
from training.teacher import Lesson, Teacher
from training.validation import (
    baselines,
    export_only,
    finish,
    validate,
    validation_windows,
)


@dataclass
class Args:
    """Every setting of a training run (saved in RUN/args.json and in the model file)."""

    backend: str = "sim"  # sim: the node model (sim:NAME or a node-model file sim:FILE); real: this node, measured
    node: str = "sim:reference"  # sim:NAME or sim:FILE (a node-model file)
    # real: the window whose jobs are trained on (default examples/window.json)
    window_file: Annotated[str | None, tyro.conf.arg(aliases=("--window",))] = None
    seed: int = 1  # the networks', the episodes' and the replay samples' seed
    # environment steps (with --resume: the new total); measured: with the head, 5,000-20,000 plan alike
    # (docs/training.md, commit 0b0caf3)
    total_steps: Annotated[int, tyro.conf.arg(aliases=("--steps",))] = 15_000
    windows: tuple[int, int] = (2, 12)  # W of the training windows: uniform in [lo, hi]
    cmaxes: tuple[int, ...] = (1, 2, 3, 4)  # Cmax of the training windows: uniform among these
    synthetic_jobs: int = 1_000  # generated jobs beside the paper's 12 training programs (env.sim.synthetic)
    jobs: tuple[str, ...] | None = None  # training programs (default: the paper's 12)
    reward_scale: float = 10.0  # the return is reward_scale x (1 - co-run time / time sharing)
    gamma: float = 1.0  # episodes are short and the return is the objective itself
    tau: float = 0.005  # the target critics' soft update
    lr_actor: float = 3e-4
    lr_critic: float = 3e-4
    lr_alpha: float = 3e-4
    adam_eps: float = 1e-4
    batch_size: int = 128  # transitions a batch (and demonstrations a batch)
    buffer_size: int = 50_000  # transitions the replay buffer (and the demonstration buffer) holds
    learning_starts: int = 2_000  # steps of uniformly random valid actions first
    update_every: int = 2  # updates every this many steps
    updates_per_step: int = 1  # updates each time (a real run: several per expensive step)
    target_entropy_ratio: float = 0.03  # measured: 0.1 with distillation let α run away (0.04 -> 0.9), fighting the labels
    initial_alpha: float = 0.05  # α at the start
    d_model: int = 32  # measured: 64 wide costs 4x the update time on one core (80 ms at batch 128)
    heads: int = 4
    layers: int = 2
    d_ff: int = 64
    d_head_hidden: int = 64
    factored: bool = False  # the head also scores the actions' options (agent.setnet); measured not better yet (docs/training.md)
    # search distillation (expert iteration): one training episode in ``search_every`` is also searched by
    # env.planners.search guided by the current actor (``search_budget`` rollouts, scored on the node model); the best plan
    # found joins the replay buffer and a demonstration buffer, and the actor's loss adds
    # ``distill_coef`` x the cross-entropy to its actions. 0 / 0.0 turn it off (SAC alone).
    search_every: int = 1
    # DAgger: windows of up to ``expert_max_window`` jobs have every state the actor visits labelled with the
    # expert's action (training.expert: the best-found DP completed from that state; its cost grows as 2^W, so
    # larger windows are left to the search distillation above); the labels join the demonstration buffer.
    # 0 turns it off.
    expert_max_window: int = 8
    expert_grid: str = "teacher"  # the expert's options (training.expert.expert_grid): with ways and bandwidth, or cores only
    # cost-sensitive labels: where the expert's choice is join-or-skip, the label of skip is soft,
    # sigmoid((t_join - t_skip) / (soft_labels * t)) (training.expert.skip_target); 0: the expert's action, one-hot
    soft_labels: float = 0.0
    search_budget: int = 8  # the search distillation's rollouts
    distill_coef: float = 5.0  # weight of the imitation loss in the actor's loss
    # the expert's labels and the searched plans are made by ``teacher_workers`` processes beside the learner and
    # used ``teacher_lag`` episodes after the episode they teach (a fixed lag: the run is the same whatever the
    # timing); 0 workers: in the learner's process, at once (lag 0)
    teacher_workers: int = 0
    teacher_lag: int = 4
    # the group-cost head (training.group_head), fitted beside the learner on ``group_groups`` exactly-costed random
    # groups of the training pool for ``group_epochs``; the agent plans with it (agent.grouping). 0 groups: no head
    group_groups: int = 80_000
    group_epochs: int = 40
    eval_every: int = 5_000  # validate every this many steps
    eval_per_cell: int = 4  # validation windows per (W, Cmax) cell
    checkpoint_every: int = 10_000  # checkpoint every this many steps
    # validation cells (W, Cmax); empty: W in {4, 6, 8, 12} x Cmax in {2, 3, 4}, those the training windows cover
    eval_cells: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        if self.backend not in ("sim", "real"):
            raise ValueError(f"--backend {self.backend!r}: choose sim or real")
        if self.backend == "real" and (self.search_every or self.expert_max_window):
            raise ValueError("--backend real has no node model to search or label with: give --search-every 0 "
                             "--expert-max-window 0 (or calibrate the node and train --backend sim --node local)")
        if self.backend == "real" and self.teacher_workers:
            raise ValueError("--teacher-workers is for --backend sim (a real run has no expert or search to teach with)")
        if self.teacher_workers < 0 or self.teacher_lag < 0:
            raise ValueError(f"--teacher-workers {self.teacher_workers} / --teacher-lag {self.teacher_lag}: need >= 0")
        if not 0.0 <= self.soft_labels <= 1.0:
            raise ValueError(f"--soft-labels {self.soft_labels}: a temperature in [0, 1] (0: hard labels)")
        if self.group_groups < 0 or self.group_epochs < 1:
            raise ValueError(f"--group-groups {self.group_groups} / --group-epochs {self.group_epochs}: need >= 0 / >= 1")
        if self.backend == "real" and self.synthetic_jobs:
            raise ValueError("--synthetic-jobs is for --backend sim (real training runs the window's own jobs)")
        if self.backend == "real" and self.group_groups:
            raise ValueError("--group-groups is for --backend sim (the group head is fitted on a node model): give "
                             "--group-groups 0, or calibrate the node and train --backend sim --node local")
        lo, hi = self.windows
        if not 1 <= lo <= hi <= SET_MAX_WINDOW:
            raise ValueError(f"windows {self.windows}: need 1 <= lo <= hi <= {SET_MAX_WINDOW}")
        if not self.cmaxes or not all(1 <= c <= SET_MAX_CMAX for c in self.cmaxes):
            raise ValueError(f"cmaxes {self.cmaxes}: each in 1..{SET_MAX_CMAX}")

    def resolved(self) -> Args:
        """These settings with the validation cells filled in where none are given (the run saves these): W in
        {4, 6, 8, 12} x Cmax in {2, 3, 4}, those the training windows cover."""
        if self.eval_cells:
            return self
        lo, hi = self.windows
        ws = [w for w in (4, 6, 8, 12) if lo <= w <= hi] or sorted({lo, hi})
        cs = [c for c in (2, 3, 4) if c in self.cmaxes] or sorted(set(self.cmaxes))
        return dataclasses.replace(self, eval_cells=tuple((w, c) for w in ws for c in cs))

    def shape(self, d_token: int) -> SetNetShape:
        return SetNetShape(d_token=d_token, d_context=len(SET_CONTEXT_NAMES), d_model=self.d_model, heads=self.heads,
                           layers=self.layers, d_ff=self.d_ff, d_head_hidden=self.d_head_hidden,
                           n_factors=ACTION_FACTORS.shape[1] if self.factored else 0)


def action_factors() -> np.ndarray:
    """(257, options) 0/1: which options (affinity, memory policy, core fraction, way fraction, bandwidth cap,
    split, skip) each action of env.plan.actions is made of; the network's factored head sums their scores."""
    options = [("affinity", x) for x in actions.AFFINITIES] + [("memory", x) for x in actions.MEMORY_POLICIES] + \
        [("cores", x) for x in actions.CORE_FRACTIONS] + [("ways", x) for x in actions.WAY_FRACTIONS] + \
        [("bw", x) for x in actions.BW_PERCENTS] + [("split", x) for x in actions.SPLITS] + [("skip", None)]
    col = {o: i for i, o in enumerate(options)}
    m = np.zeros((actions.N_ACTIONS, len(options)), np.float32)
    for a in range(actions.N_ACTIONS):
        act = actions.decode(a)
        if isinstance(act, actions.ScheduleAction):
            keys = [("affinity", act.affinity), ("memory", act.memory)]
        elif isinstance(act, actions.JobAction):
            keys = [("cores", act.cores), ("ways", act.ways), ("bw", act.bw_percent), ("split", act.split)]
        else:
            keys = [("skip", None)]
        for k in keys:
            m[a, col[k]] = 1.0
    return m


ACTION_FACTORS = action_factors()


# ------------------------------------------------------------------------------------------------ losses
def imitation_loss(p: Any, log_p: Any, action: Any, soft: Any) -> Any:
    """The actor's cross-entropy to the demonstrations (mean over the batch). ``soft`` -1: the demonstrated action's.
    ``soft`` q in [0, 1] (a join-or-skip state, ``training.expert.skip_target``): the cross-entropy of the
    join-or-skip marginal to (1 - q, q), plus, where the demonstration joins, that of its option among the job's
    actions, -log p(a | join). With q = 0 or 1 it equals the hard cross-entropy -log p(a)."""
    import torch

    lp_a = log_p.gather(1, action[:, None])[:, 0]
    p_skip = p[:, actions.SKIP].clamp(1e-7, 1.0 - 1e-7)
    lp_join = torch.log1p(-p_skip)
    joins = (action != actions.SKIP).to(p.dtype)
    q = soft.clamp(min=0.0)
    cost = -(q * torch.log(p_skip) + (1.0 - q) * lp_join) - joins * (lp_a - lp_join)
    return torch.where(soft >= 0, cost, -lp_a).mean()


def sac_losses(nets: tuple[Any, ...], log_alpha: Any, s: tuple, s2: tuple, mask: Any, nmask: Any, act: Any, rew: Any,
               done: Any, gamma: float, target_entropy_ratio: float) -> dict[str, Any]:
    """Masked discrete SAC's three losses on one batch, from the networks as they are (``nets``: actor, q1, q2
    and the target critics, each a function of a batch of states). The critic target runs over the actions valid
    in the *next* state (its mask); α's target entropy is ``target_entropy_ratio · log n_valid`` per state."""
    import torch

    from agent.sac import masked_policy

    actor, q1, q2, q1_t, q2_t = nets
    alpha = log_alpha.exp().detach()
    with torch.no_grad():  # r + γ(1 − done) Σ_a' p(a'|s')[min Q'(s', a') − α log p(a'|s')]
        p2, lp2 = masked_policy(actor(*s2), nmask)
        v2 = (p2 * (torch.min(q1_t(*s2), q2_t(*s2)) - alpha * lp2)).sum(-1)
        target = rew + gamma * (1.0 - done) * v2
    qa1, qa2 = q1(*s), q2(*s)
    q1_loss = ((qa1.gather(1, act[:, None]).squeeze(1) - target) ** 2).mean()
    q2_loss = ((qa2.gather(1, act[:, None]).squeeze(1) - target) ** 2).mean()
    p, lp = masked_policy(actor(*s), mask)
    actor_loss = (p * (alpha * lp - torch.min(qa1, qa2).detach())).sum(-1).mean()
    entropy = -(p * lp).sum(-1).detach()
    target_h = target_entropy_ratio * torch.log(mask.sum(-1).clamp(min=1).float())
    alpha_loss = (log_alpha * (entropy - target_h)).mean()
    return {"critic_loss": q1_loss + q2_loss, "q1_loss": q1_loss, "q2_loss": q2_loss, "actor_loss": actor_loss,
            "alpha_loss": alpha_loss, "entropy": entropy.mean(), "target_entropy": target_h.mean()}


class Learner:
    """The actor, the twin critics and their targets (``agent.setnet_torch.SetNet`` each), their optimizers and α;
    ``update`` is one gradient step of each loss and the targets' soft update."""

    NETS = ("actor", "q1", "q2", "q1_t", "q2_t")
    OPTIMIZERS = ("actor_opt", "critic_opt", "alpha_opt")

    def __init__(self, shape: SetNetShape, args: Args) -> None:
        import torch

        from agent.setnet_torch import SetNet

        self.args = args
        self.actor, self.q1, self.q2, self.q1_t, self.q2_t = (SetNet(shape) for _ in range(5))
        if shape.n_factors:
            for net in (self.actor, self.q1, self.q2, self.q1_t, self.q2_t):
                net.action_factors.copy_(torch.from_numpy(ACTION_FACTORS))
        self.q1_t.load_state_dict(self.q1.state_dict())
        self.q2_t.load_state_dict(self.q2.state_dict())
        self.log_alpha = torch.tensor(math.log(args.initial_alpha), requires_grad=True)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=args.lr_actor, eps=args.adam_eps)
        self.critic_opt = torch.optim.Adam([*self.q1.parameters(), *self.q2.parameters()], lr=args.lr_critic,
                                           eps=args.adam_eps)
        self.alpha_opt = torch.optim.Adam([self.log_alpha], lr=args.lr_alpha, eps=args.adam_eps)

    def update(self, rb: Replay, demos: Replay, rng: np.random.Generator) -> dict[str, float]:
        import torch

        from agent.sac import masked_policy

        a = self.args
        b = rb.sample(a.batch_size, rng)
        loss = sac_losses((self.actor, self.q1, self.q2, self.q1_t, self.q2_t), self.log_alpha, batch_tensors(b, ""),
                          batch_tensors(b, "n"), torch.from_numpy(b["mask"]), torch.from_numpy(b["nmask"]),
                          torch.from_numpy(b["action"]), torch.from_numpy(b["reward"]), torch.from_numpy(b["done"]),
                          a.gamma, a.target_entropy_ratio)
        distill = torch.zeros(())
        if a.distill_coef > 0 and demos.size >= a.batch_size:  # cross-entropy to the expert's / search's actions
            db = demos.sample(a.batch_size, rng)
            dp, dlp = masked_policy(self.actor(*batch_tensors(db, "")), torch.from_numpy(db["mask"]))
            distill = imitation_loss(dp, dlp, torch.from_numpy(db["action"]), torch.from_numpy(db["soft"]))
        for opt, x in ((self.critic_opt, loss["critic_loss"]), (self.actor_opt, loss["actor_loss"] + a.distill_coef * distill),
                       (self.alpha_opt, loss["alpha_loss"])):
            opt.zero_grad()
            x.backward()
            opt.step()
        with torch.no_grad():
            for net, tgt in ((self.q1, self.q1_t), (self.q2, self.q2_t)):
                for p_, t_ in zip(net.parameters(), tgt.parameters()):
                    t_.mul_(1.0 - a.tau).add_(p_, alpha=a.tau)
        return {"critic_loss": float(loss["critic_loss"].detach()), "actor_loss": float(loss["actor_loss"].detach()),
                "alpha": float(self.log_alpha.exp().detach()), "entropy": float(loss["entropy"]),
                "distill": float(distill.detach())}

    def state_dict(self) -> dict[str, Any]:
        return {**{k: getattr(self, k).state_dict() for k in self.NETS + self.OPTIMIZERS},
                "log_alpha": self.log_alpha.detach().clone()}

    def load_state_dict(self, d: dict[str, Any]) -> None:
        import torch

        for k in self.NETS + self.OPTIMIZERS:
            getattr(self, k).load_state_dict(d[k])
        with torch.no_grad():
            self.log_alpha.copy_(d["log_alpha"])


# ------------------------------------------------------------------------------------------------ main
def main(args: Args, run_dir: Path, *, out: Path | None = None, resume: bool = False, progress: bool = True) -> dict[str, Any]:
    """Train (or, with ``resume``, go on training from RUN_DIR's checkpoint) to ``args.total_steps``; write the
    run's files and, given ``out``, the model file. Returns the run's figures."""
    import torch

    from training.group_head import (
        start_group_head,  # lazily: it sets the BLAS thread counts where it is first
    )

    args = args.resolved()
    torch.set_num_threads(1)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "args.json").write_text(json.dumps(dataclasses.asdict(args), indent=1))
    problem = make_problem(args, run_dir)
    shape = args.shape(problem.d_token)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)  # the replay samples; each episode has its own generator
    sac = Learner(shape, args)
    rb = Replay(args.buffer_size, args.windows[1], problem.d_token, len(SET_CONTEXT_NAMES))
    demos = Replay(args.buffer_size, args.windows[1], problem.d_token, len(SET_CONTEXT_NAMES))  # labels, teachers' plans
    st: dict[str, Any] = {"step": 0, "episode": 0, "updates": 0, "next_eval": args.eval_every, "best": None,
                          "wall_s": 0.0, "evals": []}
    ckpt = run_dir / "checkpoint.pt"
    if resume and ckpt.exists():
        d = torch.load(ckpt, map_location="cpu", weights_only=False)
        sac.load_state_dict(d)
        rb.load_state_dict(d["buffer"])
        demos.load_state_dict(d["demos"])
        rng.bit_generator.state = d["rng"]
        torch.set_rng_state(d["torch_rng"])
        st = d["state"]
    val = validation_windows(args, problem)
    base = baselines(problem, val)
    t0, wall0 = time.monotonic(), st["wall_s"]
    expert = None
    if args.expert_max_window:
        from training.expert import Expert, expert_grid

        expert = Expert(problem.node, expert_grid(args.expert_grid))
    teacher = Teacher(problem, shape, args, expert)
    teacher.resume(st.pop("unanswered", []))
    head_proc = start_group_head(args, run_dir, progress)  # beside the learner, on the core it leaves free
    log = RunLog(run_dir, st["step"] if resume else None)  # after the teacher's fork: the writer has a thread

    last: dict[str, float] = {}
    recent: list[float] = []  # the last 100 training episodes' throughput, for the progress line
    recent_searched: list[float] = []  # and the teacher's plans' (of the windows taught, ``teacher_lag`` episodes back)
    next_ckpt = (st["step"] // args.checkpoint_every + 1) * args.checkpoint_every
    next_say, start_step = st["step"] + 1_000, st["step"]
    while st["step"] < args.total_steps:
        params = sac.actor.export() if st["step"] >= args.learning_starts else None  # None: random valid actions
        ep = play(problem, shape, params, None, np.random.default_rng([args.seed, st["episode"]]))
        w, lesson = len(ep.jobs), None
        if expert is not None and w <= args.expert_max_window:  # DAgger: the expert labels the actor's states
            lesson = Lesson(tuple(ep.jobs), ep.max_concurrency, True, actions=tuple(int(t[2]) for t in ep.transitions))
        elif params is not None and args.search_every and st["episode"] % args.search_every == 0:
            lesson = Lesson(tuple(ep.jobs), ep.max_concurrency, False, params=params)  # search distillation
        taught = []  # the lessons answered now: their window's W and Cmax and the teacher's plan's throughput
        for done_lesson, (labels, strans, softs, searched) in teacher.ask(lesson) if lesson is not None else []:
            taught.append({"W": len(done_lesson.names), "cmax": done_lesson.cmax, "throughput": searched})
            recent_searched = (recent_searched + [searched])[-100:]
            for state, mask, a, soft in labels:  # the actor's states, the expert's actions
                demos.add((state, mask, a, 0.0, state, mask, True), soft)
            for tr, soft in zip(strans, softs):  # the teacher's own plan: a demonstration, and off-policy transitions
                demos.add(tr, soft)
                rb.add(tr)
        for tr in ep.transitions:
            rb.add(tr)
            st["step"] += 1
            if st["step"] >= args.learning_starts and st["step"] % args.update_every == 0:
                for _ in range(args.updates_per_step):
                    last = sac.update(rb, demos, rng)
                    st["updates"] += 1
        st["episode"] += 1
        recent = (recent + [ep.throughput])[-100:]
        if progress and st["step"] >= next_say:
            spent = time.monotonic() - t0
            eta = spent / max(st["step"] - start_step, 1) * (args.total_steps - st["step"])
            print(f"step {st['step']}/{args.total_steps} (episode {st['episode']}, {st['updates']} updates): training "
                  f"episodes {np.mean(recent):.3f} vs time sharing"
                  + (f" (searched {np.mean(recent_searched):.3f})" if recent_searched else "")
                  + f", alpha {last.get('alpha', args.initial_alpha):.4f}; {spent:.0f} s, about {eta:.0f} s to go", flush=True)
            next_say += 1_000
        log.episode({"kind": "episode", "step": st["step"], "W": w, "cmax": ep.max_concurrency,
                     "throughput": ep.throughput, "taught": taught, **last})
        if st["step"] >= st["next_eval"] or st["step"] >= args.total_steps:
            rec = validate(problem, shape, sac.actor.export(), val, base, st, run_dir, wall0 + time.monotonic() - t0)
            log.validation(rec)
            st["next_eval"] += args.eval_every
            if progress:
                print(f"step {st['step']}: validation {rec['agent']:.3f} (greedy {base['greedy']:.3f}; cells under "
                      f"greedy {rec['cells_below_greedy']}), alpha {last.get('alpha', float('nan')):.4f}, "
                      f"{rec['wall_s']:.0f} s", flush=True)
        log.flush()
        if st["step"] >= next_ckpt:
            st["wall_s"] = wall0 + time.monotonic() - t0
            save_checkpoint(ckpt, sac, rb, demos, rng, st, teacher.unanswered())
            next_ckpt += args.checkpoint_every
    st["wall_s"] = wall0 + time.monotonic() - t0
    save_checkpoint(ckpt, sac, rb, demos, rng, st, teacher.unanswered())
    teacher.close()
    log.close()
    return finish(args, problem, shape, run_dir, st, base, out, progress, head_proc)


def save_checkpoint(path: Path, sac: Learner, rb: Replay, demos: Replay, rng: np.random.Generator, st: dict[str, Any],
                    unanswered: list[Lesson]) -> None:
    """RUN/checkpoint.pt, whole or not at all: the learner, the buffers, the generators, the counters and the
    teacher's unanswered lessons (``st["unanswered"]``, asked again on resume)."""
    import torch

    tmp = path.with_suffix(".tmp")
    torch.save({**sac.state_dict(), "buffer": rb.state_dict(), "demos": demos.state_dict(),
                "rng": rng.bit_generator.state, "torch_rng": torch.get_rng_state(),
                "state": {**st, "unanswered": unanswered}}, tmp)
    os.replace(tmp, path)


# ------------------------------------------------------------------------------------------ command line
#: Settings of a real run where the command line gives none: real episodes take seconds to minutes each, so it
#: learns from the first few, updates often and validates and checkpoints every few steps; nothing to search.
REAL_DEFAULTS: dict[str, Any] = {"total_steps": 60, "learning_starts": 20, "update_every": 1, "updates_per_step": 8,
                                 "batch_size": 32, "eval_every": 10, "checkpoint_every": 10, "search_every": 0,
                                 "expert_max_window": 0, "synthetic_jobs": 0, "group_groups": 0}


def saved_args(run: Path, total_steps: int | None = None) -> Args | None:
    """The settings a run in ``run`` was started with (a resumed or exported run keeps them; only its length may
    change: ``total_steps``), or None where it has none."""
    path = run / "args.json"
    if not path.exists():
        return None
    saved = json.loads(path.read_text())
    if total_steps is not None:
        saved["total_steps"] = total_steps
    return Args(**{**saved, "windows": tuple(saved["windows"]), "cmaxes": tuple(saved["cmaxes"]),
                   "jobs": tuple(saved["jobs"]) if saved["jobs"] else None,
                   "eval_cells": tuple(tuple(c) for c in saved["eval_cells"])})


@dataclass
class Command:
    """Train the set-encoder policy (masked discrete SAC) for a node; writes a model file."""

    args: Args
    run_dir: str | None = None  # checkpoints, log, curves (default runs/train-<backend>-<node>-s<seed>)
    out: str | None = None  # model file to write (default RUN_DIR/model.npz)
    resume: bool = False  # continue the run in --run-dir from its checkpoint
    export_only: bool = False  # write --out from RUN_DIR's best validated actor so far (a run stopped early), train nothing
    quiet: bool = False  # no progress lines


def cli(argv: list[str] | None = None) -> int:
    """The script's command line (tyro, from ``Command`` and ``Args``); a bad setting is one line."""
    import argparse

    argv = sys.argv[1:] if argv is None else list(argv)
    peek = argparse.ArgumentParser(add_help=False)
    peek.add_argument("--backend", default="sim")
    real = peek.parse_known_args(argv)[0].backend == "real"  # a real run's defaults where none is given
    try:
        default = Command(args=Args(backend="real", **REAL_DEFAULTS)) if real else None
        cmd = tyro.cli(Command, args=argv, default=default, config=(tyro.conf.OmitArgPrefixes,))
        args = cmd.args
        run = Path(cmd.run_dir or f"runs/train-{args.backend}-{args.node.replace(':', '-')}-s{args.seed}")
        if cmd.resume or cmd.export_only:
            given = args.total_steps if args.total_steps != (default or Command(Args())).args.total_steps else None
            args = saved_args(run, given) or args
        out = Path(cmd.out) if cmd.out else run / "model.npz"
        if cmd.export_only:
            print(export_only(args, run, out))
            return 0
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    main(args, run, out=out, resume=cmd.resume, progress=not cmd.quiet)
    return 0


if __name__ == "__main__":
    sys.exit(cli())
