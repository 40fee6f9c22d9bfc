"""One training algorithm for the set-encoder policy: masked discrete SAC on the simulated node, top to bottom.

    .venv/bin/python -m training.set_sac --run-dir RUN [--total-steps N] [--seed S] [--out MODEL.npz] [--resume]

Read it like CleanRL's ``sac_atari.py``: the hyperparameters (``Args``), then ``main``: the run directory, the
networks (``agent.setnet_torch.SetNet``: one actor, two critics, two target critics, all the same network), the
replay buffer, and the loop: play an episode with the actor's masked softmax, store its transitions, update.

* Episodes: a training window of W jobs (W uniform in ``windows``), Cmax uniform in ``cmaxes``, drawn from the
  training programs and generated jobs (``training.setup``), played on ``env.episode.window.set_episode`` (the one
  episode factory the planner uses too: the jobs as a set, in canonical order).
* Reward: the step that closes group g gets ``reward_scale · (solo_g − makespan_g) / solo_total``, makespans
  from the simulated node (``env.planners.baselines.GroupEvaluator``, the model ``best-found`` searches). The return is
  ``reward_scale · (1 − CoRunTime / SoloRunTime)``: the paper's final reward, redistributed to the groups.
* Learner: discrete SAC with masks (``agent.sac.masked_policy``: masked logits, guarded p·Q and p·log p), the
  next state's mask in the buffer, twin critics, automatic α toward ``target_entropy_ratio · log n_valid``.
* Teaching (sim): the expert's label in every state the actor visits (DAgger, W ≤ ``expert_max_window``) or a plan
  searched with the actor (larger windows) join a demonstration buffer the actor's loss imitates
  (``imitation_loss``); ``Teacher`` makes them, in worker processes beside the learner when asked.
* Validation every ``eval_every`` steps: the greedy actor on seeded windows of the training pool (never the
  held-out programs) at W ∈ {4, 6, 8, 12} × Cmax ∈ {2, 3, 4}; the best actor is kept (and each validated actor in
  ``RUN/actors/step-N.npz``).
* The group-cost head (``training.group_head``) does not depend on the actor: it is fitted in a process beside
  the one-threaded learner, on the other core, and costs wall time only where it outlasts the learner.
* Progress: a line every 1,000 steps (training episodes' throughput, α, time spent and to go) and one a validation.
* Checkpoints (``RUN/checkpoint.pt``: networks, optimizers, α, buffer, counters, RNG states) every
  ``checkpoint_every`` steps; ``--resume`` continues from it. ``RUN/log.jsonl`` has one record per episode and
  evaluation; the end writes ``RUN/curves.png`` and the model (``cosched-model/2``, ``agent.modelfile``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agent.policy import masked_probs, sample_valid
from agent.setnet import ARCHITECTURE, SetNetShape, set_logits
from env.plan import actions
from env.episode.window import SET_CONTEXT_NAMES, SET_MAX_CMAX, SET_MAX_WINDOW, SET_TOKEN_NAMES, set_episode


@dataclass
class Args:
    backend: str = "sim"  # sim: the node model (sim:NAME or a node-model file sim:FILE); real: this node, measured
    node: str = "sim:reference"
    window_file: str | None = None  # real: the window whose jobs are trained on (default examples/window.json)
    seed: int = 1
    total_steps: int = 15_000  # environment steps; measured: with the head, 5,000-20,000 plan alike (docs/training.md, commit 0b0caf3)
    windows: tuple[int, int] = (2, 12)  # W of the training windows: uniform in [lo, hi]
    cmaxes: tuple[int, ...] = (1, 2, 3, 4)
    synthetic_jobs: int = 1_000  # generated jobs beside the paper's 12 training programs (env.sim.synthetic)
    jobs: tuple[str, ...] | None = None  # training programs (default: the paper's 12)
    reward_scale: float = 10.0
    gamma: float = 1.0  # episodes are short and the return is the objective itself
    tau: float = 0.005
    lr_actor: float = 3e-4
    lr_critic: float = 3e-4
    lr_alpha: float = 3e-4
    adam_eps: float = 1e-4
    batch_size: int = 128
    buffer_size: int = 50_000
    learning_starts: int = 2_000  # steps of uniformly random valid actions first
    update_every: int = 2  # updates every this many steps
    updates_per_step: int = 1  # updates each time (a real run: several per expensive step)
    target_entropy_ratio: float = 0.03  # measured: 0.1 with distillation let α run away (0.04 -> 0.9), fighting the labels
    initial_alpha: float = 0.05
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
    search_budget: int = 8
    distill_coef: float = 5.0
    # the expert's labels and the searched plans are made by ``teacher_workers`` processes beside the learner and
    # used ``teacher_lag`` episodes after the episode they teach (a fixed lag: the run is the same whatever the
    # timing); 0 workers: in the learner's process, at once (lag 0)
    teacher_workers: int = 0
    teacher_lag: int = 4
    # the group-cost head (training.group_head), fitted beside the learner on ``group_groups`` exactly-costed random
    # groups of the training pool for ``group_epochs``; the agent plans with it (agent.grouping). 0 groups: no head
    group_groups: int = 80_000
    group_epochs: int = 40
    eval_every: int = 5_000
    eval_per_cell: int = 4  # validation windows per (W, Cmax) cell
    checkpoint_every: int = 10_000
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
        if not self.eval_cells:
            ws = [w for w in (4, 6, 8, 12) if lo <= w <= hi] or sorted({lo, hi})
            cs = [c for c in (2, 3, 4) if c in self.cmaxes] or sorted(set(self.cmaxes))
            self.eval_cells = tuple((w, c) for w in ws for c in cs)

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


# ------------------------------------------------------------------------------------------- problem
class Problem:
    """What the run trains on (sim): node, job information, the training job pool, the group evaluator."""

    def __init__(self, args: Args) -> None:
        from env.planners.baselines import GroupEvaluator
        from env.episode.window import RewardConfig
        from env.sim.nodes import load_node
        from training.setup import sim_setup

        self.node = load_node(args.node)
        self.setup = sim_setup(self.node, window_size=max(args.windows[1], 1), cmaxes=args.cmaxes, jobs=args.jobs,
                               n_validation=0, reward=RewardConfig(), synthetic=(args.synthetic_jobs, args.seed))
        self.provider = self.setup.provider
        self.pool = list(self.setup.jobs)
        self.ev = GroupEvaluator(self.node)
        self.d_token = self.provider.n_features + len(SET_TOKEN_NAMES)

    def episode(self, names: list[str], cmax: int) -> Any:
        from env.episode.gym_env import _window_jobs

        return set_episode(self.node, _window_jobs(names), [self.provider.get(n) for n in names], cmax,
                           n_features=self.provider.n_features)

    def group_makespans(self, ep: Any) -> list[float]:
        from env.episode.window import group_members

        return [self.ev.makespan(ep.schedule_index, members) for members in group_members(ep)]


class RealProblem(Problem):
    """This node, measured: the window file's jobs (profiled first where missing), every episode's groups run for
    real by ``env.real.backend.RealBackend`` (identical group configurations are measured once and reused)."""

    def __init__(self, args: Args, run_dir: Path) -> None:
        from env.episode.window import RewardConfig
        from training.setup import real_setup

        self.setup = real_setup(args.window_file, run_dir, window_size=args.windows[1], cmaxes=args.cmaxes,
                                reward=RewardConfig(), timeout_s=600.0)
        self.node, self.provider, self.backend = self.setup.node, self.setup.provider, self.setup.backend
        self.pool = list(self.setup.jobs)
        self.window = self.setup.extra["window"]
        self.commands = {j.profile_name: j for j in self.window.jobs}
        self.ev = None
        self.d_token = self.provider.n_features + len(SET_TOKEN_NAMES)

    def episode(self, names: list[str], cmax: int) -> Any:
        from env.episode.gym_env import _window_jobs

        jobs = [j.model_copy(update={"command": self.commands[j.profile_name].command,
                                     "env": self.commands[j.profile_name].env}) for j in _window_jobs(names)]
        return set_episode(self.node, jobs, [self.provider.get(n) for n in names], cmax,
                           n_features=self.provider.n_features)

    def group_makespans(self, ep: Any) -> list[float]:
        return list(self.backend.evaluate(ep.builder.build("training")))


def make_problem(args: Args, run_dir: Path) -> Problem:
    return RealProblem(args, run_dir) if args.backend == "real" else Problem(args)


def validation_windows(args: Args, problem: Problem) -> list[tuple[list[str], int]]:
    """Seeded windows per cell drawn from the training pool (the training programs and generated jobs), never from
    the held-out programs: the checkpoint is chosen on these, so bench/'s held-out windows (held-out programs in
    every window) play no part in choosing it. On the real node: the training window itself (its groups'
    measurements are reused)."""
    if isinstance(problem, RealProblem):
        return [([j.profile_name for j in problem.window.jobs], min(problem.window.max_concurrency, max(args.cmaxes)))]
    pool = problem.pool
    rng = random.Random(7_070_707)
    distinct = sorted(set(pool))
    out = []
    for w, c in args.eval_cells:
        for _ in range(args.eval_per_cell):
            names = rng.sample(distinct, w) if len(distinct) >= w else [rng.choice(distinct) for _ in range(w)]
            out.append((names, c))
    return out


# ------------------------------------------------------------------------------------------ playing
def state_of(ep: Any) -> tuple[np.ndarray, np.ndarray, int]:
    s = ep.set_observation()
    return s.tokens, s.context, s.current


def play(problem: Problem, shape: SetNetShape, params: dict[str, np.ndarray] | None, names: list[str], cmax: int,
         rng: np.random.Generator | None, reward_scale: float, replay: list[int] | None = None,
         labels: list[tuple] | None = None, expert: Any = None, follow_expert: bool = False,
         soft_labels: float = 0.0) -> tuple[list[tuple], float]:
    """One episode. ``params`` None: uniformly random valid actions; ``rng`` None: greedy; ``replay``: these
    actions (a searched plan). Returns the transitions (state, mask, action, reward, next state, next mask,
    terminated) and the plan's throughput vs time sharing. ``expert``: each state's (state, mask, expert's action)
    is appended to ``labels`` (DAgger) with the soft label of skip there (``training.expert.skip_target``; -1: the
    action is the label); ``follow_expert``: the expert plays."""
    ep = problem.episode(names, cmax)
    trans: list[list[Any]] = []
    closed_at: list[int] = []
    state, mask = state_of(ep), ep.action_mask().astype(np.bool_)
    if expert is not None:
        from training.expert import skip_target
    while not ep.done:
        if expert is not None:
            label = expert.action(ep)
            labels.append((state, mask, label, skip_target(expert.last_values, soft_labels)))  # type: ignore[union-attr]
        if follow_expert:
            a = label
        elif replay is not None:
            a = replay[len(trans)]
        elif params is None:
            valid = np.flatnonzero(mask)
            a = int(valid[rng.integers(valid.size)])  # type: ignore[union-attr]
        else:
            logits = set_logits(shape, params, *state)
            a = int(np.argmax(np.where(mask, logits, -np.inf))) if rng is None else sample_valid(masked_probs(logits, mask), mask, rng)
        before = ep.groups_closed
        ep.step(a)
        nstate = state_of(ep)
        nmask = ep.action_mask().astype(np.bool_)
        trans.append([state, mask, a, 0.0, nstate, nmask, ep.done])
        closed_at.append(ep.groups_closed - before)
        state, mask = nstate, nmask
    makespans = problem.group_makespans(ep)
    solo = ep.solo_total_s()
    solo_g = [0.0] * len(makespans)
    for s, g in enumerate(ep.group_of):
        solo_g[g] += ep.infos[s].solo_s
    g = 0
    for t, n_closed in enumerate(closed_at):  # the step that closed group g gets its share of the final reward
        for _ in range(n_closed):
            trans[t][3] += reward_scale * (solo_g[g] - makespans[g]) / solo
            g += 1
    return [tuple(t) for t in trans], solo / sum(makespans)


def searched_plan(problem: Problem, shape: SetNetShape, params: dict[str, np.ndarray], names: list[str], cmax: int,
                  budget: int) -> list[int]:
    """The best plan ``env.planners.search`` finds for this window within ``budget`` rollouts guided by the actor's logits
    (the planner's agent-search, with the actor being trained), as the episode's action sequence."""
    from env.planners.search import search_chunk

    def scores(obs: Any, mask: Any, ep: Any) -> np.ndarray:
        return set_logits(shape, params, *state_of(ep))

    scores.reads_obs = False  # type: ignore[attr-defined]
    if len(problem.ev.memo) > 400_000:  # the evaluator's memo grows with every group scored: bound its memory
        problem.ev.memo.clear()
    return search_chunk(lambda: problem.episode(names, cmax), scores, problem.ev.makespan, budget).actions


# ------------------------------------------------------------------------------------------ teaching
@dataclass(frozen=True)
class Lesson:
    """What the teacher is asked about one training episode: the window, and either the actions the actor took
    (``dagger``: label each state they visit, and play the expert's own plan) or the actor's parameters (search a
    plan with it)."""

    names: tuple[str, ...]
    cmax: int
    dagger: bool
    actions: tuple[int, ...] = ()
    params: dict[str, np.ndarray] | None = None


_TEACHING: list[Any] = []  # in a worker process only: its (problem, shape, args, expert), inherited at the fork


def _start_teaching(*state: Any) -> None:
    _TEACHING[:] = state


def teach(lesson: Lesson, problem: Problem | None = None, shape: SetNetShape | None = None, args: Args | None = None,
          expert: Any = None) -> tuple[list[tuple], list[tuple], list[float], float]:
    """(demonstrations as (state, mask, action, soft) labels, the teacher's own transitions for both buffers,
    their soft labels, the teacher's plan's throughput). In a worker the problem comes from ``_TEACHING``."""
    if problem is None:
        problem, shape, args, expert = _TEACHING
    names, labels = list(lesson.names), []
    if lesson.dagger:
        play(problem, shape, None, names, lesson.cmax, None, args.reward_scale, replay=list(lesson.actions),
             labels=labels, expert=expert, soft_labels=args.soft_labels)
        own: list[tuple] = []
        trans, thr = play(problem, shape, None, names, lesson.cmax, None, args.reward_scale, labels=own,
                          expert=expert, follow_expert=True, soft_labels=args.soft_labels)
        return labels, trans, [lab[3] for lab in own], thr
    plan = searched_plan(problem, shape, lesson.params, names, lesson.cmax, args.search_budget)
    trans, thr = play(problem, shape, None, names, lesson.cmax, None, args.reward_scale, replay=plan)
    return [], trans, [-1.0] * len(trans), thr


class Teacher:
    """Answers lessons in the order they were asked, ``lag`` lessons late (``Args.teacher_workers``, ``teacher_lag``).
    Because the lag is fixed, what the learner receives at each episode does not depend on how fast the workers
    are: a run is reproducible from its seed with or without workers. The lessons not yet answered are kept in the
    checkpoint and asked again on resume."""

    def __init__(self, problem: Problem, shape: SetNetShape, args: Args, expert: Any) -> None:
        import collections
        import multiprocessing

        self.local = (problem, shape, args, expert)
        self.lag = args.teacher_lag if args.teacher_workers else 0
        self.pending: collections.deque = collections.deque()  # (lesson, async result or answer)
        self.pool = None
        if args.teacher_workers:  # forked: the workers inherit the problem (its job table, caches) unpickled
            self.pool = multiprocessing.get_context("fork").Pool(args.teacher_workers, initializer=_start_teaching,
                                                                 initargs=self.local)

    def _submit(self, lesson: Lesson) -> None:
        self.pending.append((lesson, teach(lesson, *self.local) if self.pool is None
                             else self.pool.apply_async(teach, (lesson,))))

    def ask(self, lesson: Lesson) -> list[tuple[Lesson, tuple]]:
        """Ask about one episode; returns the (lesson, answer) pairs now due, oldest first."""
        self._submit(lesson)
        due = []
        while len(self.pending) > self.lag:
            lesson_, answer = self.pending.popleft()
            due.append((lesson_, answer if self.pool is None else answer.get()))
        return due

    def resume(self, lessons: list[Lesson]) -> None:
        """Ask again, in order, what a checkpoint left unanswered."""
        for lesson in lessons:
            self._submit(lesson)

    def unanswered(self) -> list[Lesson]:
        return [lesson for lesson, _ in self.pending]

    def close(self) -> None:
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()


# --------------------------------------------------------------------------------------- replay buffer
class Replay:
    """Transitions with their states padded to ``n_max`` tokens (the largest training window)."""

    def __init__(self, capacity: int, n_max: int, d_token: int, d_context: int) -> None:
        self.capacity, self.pos, self.size = capacity, 0, 0
        z = lambda *s, t=np.float32: np.zeros((capacity, *s), t)  # noqa: E731
        self.arrays = {
            "tok": z(n_max, d_token), "n": z(t=np.int16), "ctx": z(d_context), "cur": z(t=np.int16),
            "mask": z(actions.N_ACTIONS, t=np.bool_), "action": z(t=np.int64), "reward": z(),
            "ntok": z(n_max, d_token), "nn": z(t=np.int16), "nctx": z(d_context), "ncur": z(t=np.int16),
            "nmask": z(actions.N_ACTIONS, t=np.bool_), "done": z(),
            "soft": z(),  # a demonstration's soft label of skip (training.expert.skip_target); -1: none
        }

    def add(self, tr: tuple, soft: float = -1.0) -> None:
        (tok, ctx, cur), mask, a, r, (ntok, nctx, ncur), nmask, done = tr
        i, A = self.pos, self.arrays
        A["tok"][i] = 0.0
        A["tok"][i, : len(tok)] = tok
        A["ntok"][i] = 0.0
        A["ntok"][i, : len(ntok)] = ntok
        for k, v in (("n", len(tok)), ("ctx", ctx), ("cur", cur), ("mask", mask), ("action", a), ("reward", r),
                     ("nn", len(ntok)), ("nctx", nctx), ("ncur", ncur), ("nmask", nmask), ("done", float(done)),
                     ("soft", soft)):
            A[k][i] = v
        self.pos = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def sample(self, batch: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        idx = rng.integers(0, self.size, size=batch)
        return {k: v[idx] for k, v in self.arrays.items()}

    def state_dict(self) -> dict[str, Any]:
        return {"pos": self.pos, "size": self.size, **{k: v[: self.size].copy() for k, v in self.arrays.items()}}

    def load_state_dict(self, d: dict[str, Any]) -> None:
        self.pos, self.size = int(d["pos"]), int(d["size"])
        for k, v in self.arrays.items():
            v[: self.size] = d[k] if k in d else (-1.0 if k == "soft" else 0)  # "soft": checkpoints before it


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


# ------------------------------------------------------------------------------------------------ main
def main(args: Args, run_dir: Path, *, out: Path | None = None, resume: bool = False, progress: bool = True) -> dict[str, Any]:
    import torch

    from agent.sac import masked_policy
    from agent.setnet_torch import SetNet

    torch.set_num_threads(1)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "args.json").write_text(json.dumps(dataclasses.asdict(args), indent=1))
    problem = make_problem(args, run_dir)
    shape = args.shape(problem.d_token)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    actor, q1, q2, q1_t, q2_t = (SetNet(shape) for _ in range(5))
    if shape.n_factors:
        for net in (actor, q1, q2, q1_t, q2_t):
            net.action_factors.copy_(torch.from_numpy(ACTION_FACTORS))
    q1_t.load_state_dict(q1.state_dict())
    q2_t.load_state_dict(q2.state_dict())
    log_alpha = torch.tensor(math.log(args.initial_alpha), requires_grad=True)
    actor_opt = torch.optim.Adam(actor.parameters(), lr=args.lr_actor, eps=args.adam_eps)
    critic_opt = torch.optim.Adam([*q1.parameters(), *q2.parameters()], lr=args.lr_critic, eps=args.adam_eps)
    alpha_opt = torch.optim.Adam([log_alpha], lr=args.lr_alpha, eps=args.adam_eps)
    rb = Replay(args.buffer_size, args.windows[1], problem.d_token, len(SET_CONTEXT_NAMES))
    demos = Replay(args.buffer_size, args.windows[1], problem.d_token, len(SET_CONTEXT_NAMES))  # searched plans
    st: dict[str, Any] = {"step": 0, "episode": 0, "updates": 0, "next_eval": args.eval_every, "best": None,
                          "wall_s": 0.0, "evals": []}
    ckpt = run_dir / "checkpoint.pt"
    if resume and ckpt.exists():
        d = torch.load(ckpt, map_location="cpu", weights_only=False)
        for net, k in ((actor, "actor"), (q1, "q1"), (q2, "q2"), (q1_t, "q1_t"), (q2_t, "q2_t")):
            net.load_state_dict(d[k])
        for opt, k in ((actor_opt, "actor_opt"), (critic_opt, "critic_opt"), (alpha_opt, "alpha_opt")):
            opt.load_state_dict(d[k])
        with torch.no_grad():
            log_alpha.copy_(d["log_alpha"])
        rb.load_state_dict(d["buffer"])
        demos.load_state_dict(d["demos"])
        rng.bit_generator.state = d["rng"]
        torch.set_rng_state(d["torch_rng"])
        st = d["state"]
    log_path = run_dir / "log.jsonl"
    if resume and log_path.exists():  # the records after the checkpoint are played again: cut them
        kept = [ln for ln in log_path.read_text().splitlines() if ln.strip() and json.loads(ln)["step"] <= st["step"]]
        log_path.write_text("".join(ln + "\n" for ln in kept))
    log = open(log_path, "a" if resume else "w", encoding="utf-8")
    val = validation_windows(args, problem)
    base = _baselines(problem, val)
    t0, wall0 = time.monotonic(), st["wall_s"]
    expert = None
    if args.expert_max_window:
        from training.expert import Expert, expert_grid

        expert = Expert(problem.node, expert_grid(args.expert_grid))
    teacher = Teacher(problem, shape, args, expert)
    teacher.resume(st.pop("unanswered", []))
    head_proc = start_group_head(args, run_dir, progress)  # beside the learner, on the core it leaves free

    def batch_tensors(b: dict[str, np.ndarray], pre: str) -> tuple[Any, ...]:
        tok, n, ctx, cur = b[pre + "tok"], b["n" if not pre else "nn"], b[pre + "ctx"], b[pre + "cur"]
        valid = np.arange(tok.shape[1])[None, :] < n[:, None]
        return (torch.from_numpy(tok), torch.from_numpy(valid), torch.from_numpy(ctx), torch.from_numpy(cur.astype(np.int64)))

    def update() -> dict[str, float]:
        b = rb.sample(args.batch_size, rng)
        loss = sac_losses((actor, q1, q2, q1_t, q2_t), log_alpha, batch_tensors(b, ""), batch_tensors(b, "n"),
                          torch.from_numpy(b["mask"]), torch.from_numpy(b["nmask"]), torch.from_numpy(b["action"]),
                          torch.from_numpy(b["reward"]), torch.from_numpy(b["done"]), args.gamma, args.target_entropy_ratio)
        distill = torch.zeros(())
        if args.distill_coef > 0 and demos.size >= args.batch_size:  # cross-entropy to the expert's / search's actions
            db = demos.sample(args.batch_size, rng)
            dp, dlp = masked_policy(actor(*batch_tensors(db, "")), torch.from_numpy(db["mask"]))
            distill = imitation_loss(dp, dlp, torch.from_numpy(db["action"]), torch.from_numpy(db["soft"]))
        for opt, x in ((critic_opt, loss["critic_loss"]), (actor_opt, loss["actor_loss"] + args.distill_coef * distill),
                       (alpha_opt, loss["alpha_loss"])):
            opt.zero_grad()
            x.backward()
            opt.step()
        with torch.no_grad():
            for net, tgt in ((q1, q1_t), (q2, q2_t)):
                for a_, b_ in zip(net.parameters(), tgt.parameters()):
                    b_.mul_(1.0 - args.tau).add_(a_, alpha=args.tau)
        return {"critic_loss": float(loss["critic_loss"].detach()), "actor_loss": float(loss["actor_loss"].detach()),
                "alpha": float(log_alpha.exp().detach()), "entropy": float(loss["entropy"]), "distill": float(distill.detach())}

    def save() -> None:
        st["wall_s"] = wall0 + time.monotonic() - t0
        tmp = ckpt.with_suffix(".tmp")
        st["unanswered"] = teacher.unanswered()
        torch.save({"actor": actor.state_dict(), "q1": q1.state_dict(), "q2": q2.state_dict(), "q1_t": q1_t.state_dict(),
                    "q2_t": q2_t.state_dict(), "actor_opt": actor_opt.state_dict(), "critic_opt": critic_opt.state_dict(),
                    "alpha_opt": alpha_opt.state_dict(), "log_alpha": log_alpha.detach().clone(), "buffer": rb.state_dict(),
                    "demos": demos.state_dict(),
                    "rng": rng.bit_generator.state, "torch_rng": torch.get_rng_state(), "state": st}, tmp)
        del st["unanswered"]
        os.replace(tmp, ckpt)

    last: dict[str, float] = {}
    recent: list[float] = []  # the last 100 training episodes' throughput, for the progress line
    recent_searched: list[float] = []  # and the teacher's plans' (of the windows taught, ``teacher_lag`` episodes back)
    next_ckpt = (st["step"] // args.checkpoint_every + 1) * args.checkpoint_every
    next_say, start_step = st["step"] + 1_000, st["step"]
    while st["step"] < args.total_steps:
        ep_rng = np.random.default_rng([args.seed, st["episode"]])
        w = int(ep_rng.integers(args.windows[0], args.windows[1] + 1))
        cmax = int(ep_rng.choice(args.cmaxes))
        names = [problem.pool[i] for i in ep_rng.choice(len(problem.pool), size=w, replace=len(problem.pool) < w)]
        params = actor.export() if st["step"] >= args.learning_starts else None
        trans, thr = play(problem, shape, params, names, cmax, ep_rng, args.reward_scale)
        lesson = None
        if expert is not None and w <= args.expert_max_window:  # DAgger: the expert labels the actor's states
            lesson = Lesson(tuple(names), cmax, True, actions=tuple(int(t[2]) for t in trans))
        elif params is not None and args.search_every and st["episode"] % args.search_every == 0:
            lesson = Lesson(tuple(names), cmax, False, params=params)  # search distillation
        taught = []  # the lessons answered now: their window's W and Cmax and the teacher's plan's throughput
        for done_lesson, (labels, strans, softs, searched) in teacher.ask(lesson) if lesson is not None else []:
            taught.append({"W": len(done_lesson.names), "cmax": done_lesson.cmax, "throughput": searched})
            recent_searched = (recent_searched + [searched])[-100:]
            for state, mask, a, soft in labels:  # the actor's states, the expert's actions
                demos.add((state, mask, a, 0.0, state, mask, True), soft)
            for tr, soft in zip(strans, softs):  # the teacher's own plan: a demonstration, and off-policy transitions
                demos.add(tr, soft)
                rb.add(tr)
        for tr in trans:
            rb.add(tr)
            st["step"] += 1
            if st["step"] >= args.learning_starts and st["step"] % args.update_every == 0:
                for _ in range(args.updates_per_step):
                    last = update()
                    st["updates"] += 1
        st["episode"] += 1
        recent = (recent + [thr])[-100:]
        if progress and st["step"] >= next_say:
            spent = time.monotonic() - t0
            eta = spent / max(st["step"] - start_step, 1) * (args.total_steps - st["step"])
            print(f"step {st['step']}/{args.total_steps} (episode {st['episode']}, {st['updates']} updates): training "
                  f"episodes {np.mean(recent):.3f} vs time sharing"
                  + (f" (searched {np.mean(recent_searched):.3f})" if recent_searched else "") + f", alpha {last.get('alpha', args.initial_alpha):.4f}; "
                  f"{spent:.0f} s, about {eta:.0f} s to go", flush=True)
            next_say += 1_000
        log.write(json.dumps({"kind": "episode", "step": st["step"], "W": w, "cmax": cmax, "throughput": thr, "taught": taught, **last}) + "\n")
        if st["step"] >= st["next_eval"] or st["step"] >= args.total_steps:
            params = actor.export()
            res = validate(problem, shape, params, val, base["greedy_cells"])
            rec = {"kind": "eval", "step": st["step"], "wall_s": round(wall0 + time.monotonic() - t0, 1), **res,
                   "baseline_greedy": base["greedy"]}
            log.write(json.dumps(rec) + "\n")
            st["evals"].append(rec)
            (run_dir / "actors").mkdir(exist_ok=True)  # every validated actor: what a shorter run would have chosen from
            np.savez(run_dir / "actors" / f"step-{st['step']}.npz", **params)
            if st["best"] is None or res["agent"] > st["best"]["agent"]:
                st["best"] = rec
                np.savez(run_dir / "best-actor.npz", **params)
            st["next_eval"] += args.eval_every
            if progress:
                print(f"step {st['step']}: validation {res['agent']:.3f} (greedy {base['greedy']:.3f}; cells under "
                      f"greedy {res['cells_below_greedy']}), alpha {last.get('alpha', float('nan')):.4f}, "
                      f"{rec['wall_s']:.0f} s", flush=True)
        log.flush()
        if st["step"] >= next_ckpt:
            save()
            next_ckpt += args.checkpoint_every
    save()
    teacher.close()
    log.close()
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


def _head_args(args: Args, workers: int = 2) -> Any:
    from training.group_head import GroupHeadArgs

    return GroupHeadArgs(groups=args.group_groups, epochs=args.group_epochs, seed=args.seed, workers=workers)


def _cached_head(args: Args, run_dir: Path) -> tuple[dict[str, np.ndarray], dict[str, Any]] | None:
    npz, doc = run_dir / "group-head.npz", run_dir / "group-head.json"
    if npz.exists() and doc.exists():
        head = json.loads(doc.read_text())
        # the worker count changes nothing in the head (the labels are the same whatever it is)
        if {**head["training"]["args"], "workers": 0} == {**dataclasses.asdict(_head_args(args)), "workers": 0}:
            with np.load(npz) as z:
                return {k: z[k] for k in z.files}, head
    return None


def _head_process(args: Args, run_dir: Path, progress: bool) -> None:
    """The head phase in its own process (spawned: nothing of the learner's state is inherited), on one CPU."""
    group_head_phase(args, Problem(args), run_dir, progress, cpus=1)


def start_group_head(args: Args, run_dir: Path, progress: bool) -> Any:
    """The group-cost head fitted in another process beside the learner, which it does not depend on: the learner
    is one-threaded, so on a 2-CPU node the head costs no wall time until it outlasts the actor's training. None
    without a head, or when the run already has it; ``group_head_phase`` waits for it."""
    if not args.group_groups or _cached_head(args, run_dir) is not None:
        return None
    import multiprocessing

    proc = multiprocessing.get_context("spawn").Process(target=_head_process, args=(args, run_dir, progress),
                                                        daemon=True,
                                                        name="cosched-group-head")
    proc.start()
    return proc


def group_head_phase(args: Args, problem: Problem, run_dir: Path, progress: bool,
                     proc: Any = None, cpus: int | None = None) -> tuple[dict[str, np.ndarray], dict[str, Any]] | None:
    """The group-cost head (``training.group_head``), fitted once per run: kept in RUN_DIR/group-head.npz (and
    its description in group-head.json), so a resumed or exported run reuses it. None without one (0 groups).
    ``proc``: the process ``start_group_head`` started, waited for (and, if it failed, the head is fitted here).
    ``cpus``: the labelling processes and the fit's threads (default: every CPU)."""
    if not args.group_groups:
        return None
    if proc is not None:
        if proc.is_alive() and progress:
            print("waiting for the group-cost head (fitted beside the learner)", flush=True)
        proc.join()
        if proc.exitcode and progress:
            print(f"the group-cost head's process failed (exit code {proc.exitcode}): fitting it here", flush=True)
    cached = _cached_head(args, run_dir)
    if cached is not None:
        return cached
    import torch

    from training.group_head import train_head

    pool = list(dict.fromkeys(problem.pool))  # the jobs the actor's windows are drawn from, once each
    threads, cpus = torch.get_num_threads(), cpus or max(1, os.cpu_count() or 1)
    torch.set_num_threads(cpus)  # the learner's one thread; the fit has the machine
    try:
        params, head = train_head(problem.node, pool, problem.provider, _head_args(args, cpus), max(args.cmaxes),
                                  say=(lambda m: print(m, flush=True)) if progress else None)
    finally:
        torch.set_num_threads(threads)
    np.savez(run_dir / "group-head.tmp.npz", **params)  # each file appears whole (a resumed run may find them)
    (run_dir / "group-head.tmp.json").write_text(json.dumps(head, indent=1))
    os.replace(run_dir / "group-head.tmp.npz", run_dir / "group-head.npz")
    os.replace(run_dir / "group-head.tmp.json", run_dir / "group-head.json")
    return params, head


# ----------------------------------------------------------------------------------------- evaluation
def validate(problem: Problem, shape: SetNetShape, params: dict[str, np.ndarray],
             windows: list[tuple[list[str], int]], greedy_cells: dict[str, float]) -> dict[str, Any]:
    """The greedy actor on the validation windows: mean throughput vs time sharing, per cell, cells under greedy."""
    per_cell: dict[str, list[float]] = {}
    for names, cmax in windows:
        _, thr = play(problem, shape, params, names, cmax, None, 1.0)
        per_cell.setdefault(f"W{len(names)}C{cmax}", []).append(thr)
    cells = {k: float(np.mean(v)) for k, v in per_cell.items()}
    return {"agent": float(np.mean([t for v in per_cell.values() for t in v])), "cells": cells,
            "cells_below_greedy": sum(1 for k, v in cells.items() if v < greedy_cells[k])}


def _baselines(problem: Problem, windows: list[tuple[list[str], int]]) -> dict[str, Any]:
    """greedy on the validation windows: its mean and its mean per cell."""
    from env.planners.evaluate import evaluate
    from env.plan.models import Window, WindowJob

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
    if problem.node.name.startswith("sim:"):
        prov = getattr(world_for(problem.node).model, "provenance", None)
        if prov is not None and prov.source == "calibrated" and prov.backend == "real" and prov.measured_node_id:
            name, nid = "local", prov.measured_node_id
    else:
        name = "local"
    return TrainedFor(name=name, node_id=nid, shape=node_shape(problem.node))


def export(path: Path, params: dict[str, np.ndarray], args: Args, problem: Problem, shape: SetNetShape,
           figures: dict[str, Any], head: tuple[dict[str, np.ndarray], dict[str, Any]] | None = None) -> Any:
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
                                     "command": " ".join(sys.argv)})


def plot_curves(log_path: Path, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    recs = [json.loads(ln) for ln in log_path.read_text().splitlines() if ln.strip()]
    eps = [r for r in recs if r["kind"] == "episode"]
    evs = [r for r in recs if r["kind"] == "eval"]
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    if eps:
        k = 100
        y = np.array([r["throughput"] for r in eps])
        sm = np.convolve(y, np.ones(k) / k, mode="valid") if len(y) >= k else y
        ax[0].plot([r["step"] for r in eps][len(eps) - len(sm):], sm, color="tab:gray", label="training episodes (sampled)")
    if evs:
        ax[0].plot([r["step"] for r in evs], [r["agent"] for r in evs], "o-", color="tab:red", label="validation: agent")
        ax[0].axhline(evs[-1]["baseline_greedy"], color="tab:green", linestyle=":", label="validation: greedy")
    ax[0].axhline(1.0, color="black", linewidth=0.7)
    ax[0].set_title("throughput vs time sharing (simulated)")
    ax[0].legend(fontsize=8)
    al = [(r["step"], r["alpha"]) for r in eps if "alpha" in r]
    if al:
        ax[1].plot(*zip(*al), color="tab:purple")
        ax[1].set_yscale("log")
    ax[1].set_title("α")
    for a in ax:
        a.set_xlabel("env steps")
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)


#: Settings of a real run where the command line gives none: real episodes take seconds to minutes each, so it
#: learns from the first few, updates often and validates and checkpoints every few steps; nothing to search.
REAL_DEFAULTS: dict[str, Any] = {"total_steps": 60, "learning_starts": 20, "update_every": 1, "updates_per_step": 8,
                                 "batch_size": 32, "eval_every": 10, "checkpoint_every": 10, "search_every": 0,
                                 "expert_max_window": 0, "synthetic_jobs": 0, "group_groups": 0}

_HELP = {
    "backend": "sim: the node model (fast); real: this node, every group run for real (slow)",
    "node": "sim:NAME or sim:FILE (a node-model file); 'cosched train' also takes local (this node's calibrated model)",
    "total_steps": "environment steps (transitions) to train for; with --resume the new total",
    "windows": "LO,HI: the training windows' sizes, uniform in [LO, HI]",
    "cmaxes": "the training windows' Cmax, comma-separated, uniform",
    "jobs": "training programs, comma-separated (default: the node's training programs)",
    "window_file": "real: the window document whose jobs are trained on (default examples/window.json)",
    "group_groups": "the group-cost head (fitted beside the learner, in its own process): random groups of the training "
                    "jobs run on the node model under every core split and schedule, to regress on; 0: no head (the "
                    "agent plans with the actor)",
    "group_epochs": "the group-cost head's epochs over those groups",
}


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """One option per ``Args`` field (the dataclass is the single source of the settings and their defaults)."""
    ap.add_argument("--run-dir", default=None, help="checkpoints, log, curves (default runs/train-<backend>-<node>-s<seed>)")
    ap.add_argument("--out", default=None, metavar="MODEL", help="model file to write (default RUN_DIR/model.npz)")
    ap.add_argument("--resume", action="store_true", help="continue the run in --run-dir from its checkpoint")
    ap.add_argument("--export-only", action="store_true",
                    help="write --out from RUN_DIR's best validated actor so far (a run stopped early), train nothing")
    ap.add_argument("--quiet", action="store_true", help="no progress lines")
    for f in dataclasses.fields(Args):
        flag = {"total_steps": "--steps", "window_file": "--window"}.get(f.name, "--" + f.name.replace("_", "-"))
        default = f.default if f.default is not dataclasses.MISSING else None
        text = _HELP.get(f.name, f.name.replace("_", " ")) + (f" (default {default})" if default is not None else "")
        if f.type in ("int", "float", "str", "str | None"):
            ap.add_argument(flag, dest=f.name, type={"int": int, "float": float}.get(f.type, str), default=None, help=text)
        elif f.type == "bool":
            ap.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=None, help=text)
        elif f.name in ("windows", "cmaxes", "jobs"):
            ap.add_argument(flag, dest=f.name, default=None, help=text)


def _ints(text: str, what: str) -> tuple[int, ...]:
    try:
        vals = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ValueError(f"{what} takes whole numbers separated by commas, not {text!r}") from None
    if not vals:
        raise ValueError(f"{what} is empty")
    return vals


def args_from(ns: argparse.Namespace) -> Args:
    """The run's ``Args`` from the command line (a real run's defaults where none is given); ``ValueError`` names
    the bad option. A resumed or exported run keeps its own settings; only its length may change."""
    kw = {f.name: getattr(ns, f.name) for f in dataclasses.fields(Args)
          if f.name not in ("windows", "cmaxes", "jobs", "eval_cells") and getattr(ns, f.name, None) is not None}
    if getattr(ns, "windows", None):
        kw["windows"] = _ints(ns.windows, "--windows")
        if len(kw["windows"]) != 2:
            raise ValueError(f"--windows takes LO,HI (e.g. 2,12), not {ns.windows!r}")
    if getattr(ns, "cmaxes", None):
        kw["cmaxes"] = _ints(ns.cmaxes, "--cmaxes")
    if getattr(ns, "jobs", None):
        kw["jobs"] = tuple(j.strip() for j in ns.jobs.split(",") if j.strip())
    if kw.get("backend") == "real":
        kw = {**REAL_DEFAULTS, **kw}
    run = Path(ns.run_dir) if ns.run_dir else None
    if run is not None and (ns.resume or ns.export_only) and (run / "args.json").exists():
        saved = json.loads((run / "args.json").read_text())
        saved.update({k: v for k, v in kw.items() if k == "total_steps"})
        return Args(**{**saved, "windows": tuple(saved["windows"]), "cmaxes": tuple(saved["cmaxes"]),
                       "jobs": tuple(saved["jobs"]) if saved["jobs"] else None,
                       "eval_cells": tuple(tuple(c) for c in saved["eval_cells"])})
    return Args(**kw)


def export_only(args: Args, run: Path, out: Path) -> str:
    """``--export-only``: the model file from a run's best validated actor so far; returns what was written."""
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


def cli(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(ap)
    ns = ap.parse_args(argv)
    try:
        args = args_from(ns)
        run = Path(ns.run_dir or f"runs/train-{args.backend}-{args.node.replace(':', '-')}-s{args.seed}")
        out = Path(ns.out) if ns.out else run / "model.npz"
        if ns.export_only:
            print(export_only(args, run, out))
            return 0
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    main(args, run, out=out, resume=ns.resume, progress=not ns.quiet)
    return 0


if __name__ == "__main__":
    sys.exit(cli())
