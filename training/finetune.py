"""``cosched train --finetune-windows N`` (sim): the trained actor improved on the objective itself.

Why: the actor learns from the expert's labels (cloning and DAgger, ``training.demos`` / ``training.expert``) and
SAC's critic. Cloning weighs every disagreement with the expert alike, whether it costs nothing (a near-tie) or
a third of the window's throughput (a wrong first core count, a 3 + 3 split). Measured on the standard file
(simulated): the agent's first deviation from the expert is confident (the expert's action often under 5 %) and
most of the lost throughput comes from a few such steps.

So the last phase is on-policy policy gradient on the simulated throughput, with a self-critical baseline
(REINFORCE with the mean of several rollouts of the same window, as in Kool et al. 2019, "Attention, learn to
solve routing problems!"): for each training window, ``samples`` episodes are drawn from the actor's masked
softmax; each is scored by the simulated node (throughput vs time sharing of its plan, ``env.baselines``'
memoised ``GroupEvaluator``, the same model ``best-found`` searches); an episode's advantage is its throughput
minus the window's mean, and ``−advantage · Σ log π(a|s)`` over its steps (with more than one valid action) is
the loss. Mistakes are now weighed by what they cost, on the states the actor itself visits.

The schedule-level action (step 0: affinity and memory policy for the whole window) is one decision with a large
effect, and sampling it explores it poorly: measured, the distilled and fine-tuned actor chose compact on all 240
held-out windows of ``bench/agent_heldout.py`` (simulated) although the expert picks distributed on 12 % of training windows and a member had
learnt that (99 % agreement) — once the actor puts little mass on a schedule, its episodes are too rare to
correct it. With ``roots`` (``--finetune-roots expert``: the expert's schedules, compact and distributed
first-touch) every window is played from each of those schedule actions, ``samples / len(roots)`` episodes
each. The step-0 term is then a cost-weighted classification toward the better schedules,
``−Σ_r max(0, Q(r) − mean Q) · log π(r)`` with Q(r) a branch's mean throughput: the exact policy gradient at the
root, ``−Σ_r π(r) · (Q(r) − mean Q)``, vanishes with π(r) where it matters (measured: with it, the actor still
chose compact on 239 of the 240), the log-likelihood's gradient does not (7 of 240 then distributed; the
figure moved within noise, so the shipped command does not use it). Later steps are REINFORCE within their
branch (baseline Q(r)), so they also learn to continue well from every schedule.

The learning rate decays linearly to zero and the final actor is kept (``keep="final"``): measured, picking the best
of the periodic validations (``keep="best"``) chose by noise (48 validation windows move by about as much as the
phase gains late), often an early actor. The validations are recorded either way. Windows are drawn from the training jobs only
(``Setup.jobs``), never the evaluation file's. Seeded: the same seed gives the same actor.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np



@dataclass(frozen=True)
class FinetuneConfig:
    """Hyperparameters of the fine-tuning phase (``TrainConfig.finetune_*``)."""

    windows: int = 0  # training windows (each played ``samples`` times); 0: no fine-tuning
    samples: int = 8  # sampled episodes per window (their mean throughput is the baseline)
    windows_per_update: int = 8
    lr: float = 3e-5  # Adam; decays linearly to 0 over the phase
    advantage_scale: float = 10.0  # advantage = (throughput − the window's mean) × this (0.1 of throughput → 1)
    max_grad_norm: float = 1.0
    eval_every: int = 2_000  # windows between validations (recorded; with keep="best" the best is kept)
    keep: str = "final"  # "final": the last actor (the learning rate has decayed to 0); "best": the best validated
    roots: tuple[int, ...] = ()  # schedule actions every window is played from (samples split evenly); (): sampled

    def __post_init__(self) -> None:
        from env.actions import N_SCHEDULE

        if self.roots and (not all(0 <= r < N_SCHEDULE for r in self.roots) or len(set(self.roots)) != len(self.roots)
                           or self.samples % len(self.roots) or self.samples // len(self.roots) < 2):
            raise ValueError(f"fine-tuning roots {self.roots} must be distinct schedule actions (0-{N_SCHEDULE - 1}), "
                             f"with the samples ({self.samples}) a multiple of their number, at least 2 each")


#: ``--finetune-roots``: "sampled", the schedule action sampled like any other; "expert", every window played from
#: each schedule action of the expert's grid (``--expert-grid``); "all", from all six.
ROOT_CHOICES = ("sampled", "expert", "all")


def root_actions(choice: str, expert_grid: str) -> tuple[int, ...]:
    from env.actions import N_SCHEDULE
    from training.demos import expert_grid as grid_of

    if choice == "sampled":
        return ()
    if choice == "expert":
        return tuple(grid_of(expert_grid).schedules)
    if choice == "all":
        return tuple(range(N_SCHEDULE))
    raise ValueError(f"unknown fine-tuning roots {choice!r}: choose from {', '.join(ROOT_CHOICES)}")


def episode_throughput(ep: Any, ev: Any) -> float:
    """Throughput vs time sharing of a finished episode's plan on the simulated node: solo total over the sum of
    the group makespans, each group's members in placement order (as the plan builder places them)."""
    from env.episode import group_members

    total = sum(ev.makespan(ep.schedule_index, members) for members in group_members(ep))
    return sum(i.solo_s for i in ep.infos) / total


def new_episode(setup: Any, names: Sequence[str], cmax: int, window_size: int) -> Any:
    """A fresh episode of the window ``names`` on the setup's node, with its provider and observation layout."""
    from env.episode import Episode
    from env.gym_env import _window_jobs

    return Episode(setup.node, _window_jobs(names), [setup.provider.get(n) for n in names], max_concurrency=cmax,
                   window_size=window_size, n_features=setup.provider.n_features, obs_layout=setup.obs_layout)


def _play(setup: Any, names: Sequence[str], cmax: int, window_size: int, forward: Callable[[np.ndarray], np.ndarray],
          rng: np.random.Generator | None, ev: Any,
          root: int | None = None) -> tuple[float, list[np.ndarray], list[np.ndarray], list[int]]:
    """One episode: sampled from the masked softmax (``rng``) or greedy (``rng`` None); ``root``: the schedule
    action taken at step 0 instead (not recorded). Returns its throughput and the (observation, mask, action) of
    every other step with a choice."""
    ep = new_episode(setup, names, cmax, window_size)
    obs, masks, acts = [], [], []
    if root is not None:
        ep.step(root)
    while not ep.done:
        mask = ep.action_mask()
        valid = np.flatnonzero(mask)
        if valid.size == 1:
            ep.step(int(valid[0]))
            continue
        o = ep.observation()
        logits = forward(o)[valid]
        if rng is None:
            a = int(valid[int(np.argmax(logits))])
        else:
            p = np.exp(logits - logits.max())
            a = int(valid[rng.choice(valid.size, p=p / p.sum())])
        obs.append(o)
        masks.append(mask.astype(np.bool_))
        acts.append(a)
        ep.step(a)
    return episode_throughput(ep, ev), obs, masks, acts


_FORKED: Any = None  # the setup, for forked rollout workers (set before the pool forks)
_EVALUATOR: list[Any] = []  # this process's memoised GroupEvaluator (one node at a time)


def _evaluator(node: Any) -> Any:
    from env.baselines import GroupEvaluator

    if not _EVALUATOR or _EVALUATOR[0].node is not node or len(_EVALUATOR[0].memo) > 500_000:  # bound its memory
        _EVALUATOR[:] = [GroupEvaluator(node)]
    return _EVALUATOR[0]


def _rollouts(setup: Any, task: tuple) -> list[list[tuple]]:
    """Every window of ``task`` played ``samples`` times by the actor ``weights``: sampled from step 0, or with
    ``roots``, ``samples / len(roots)`` times from each root. An episode is (root or None, throughput,
    observations, masks, actions). A window's draws come from its own generator (seed, window number), so the
    data is the same for any number of workers."""
    from agent.policy import MeanLogits

    weights, items, samples, seed, window_size, roots = task
    forward, ev = MeanLogits([weights]), _evaluator(setup.node)
    starts = [r for r in roots for _ in range(samples // len(roots))] if roots else [None] * samples
    out = []
    for wi, names, cmax in items:
        rng = np.random.default_rng([seed, wi])
        out.append([(r, *_play(setup, names, cmax, window_size, forward, rng, ev, r)) for r in starts])
    return out


def root_observation(setup: Any, names: Sequence[str], cmax: int, window_size: int) -> tuple[np.ndarray, np.ndarray]:
    """A window's step-0 observation and mask (the schedule-level choice)."""
    ep = new_episode(setup, names, cmax, window_size)
    return ep.observation(), ep.action_mask().astype(np.bool_)


def pg_loss(net: Any, steps: tuple[Any, Any, Any, Any], roots: tuple[Any, Any, Any] | None, episodes: int) -> Any:
    """The fine-tuning loss of one update, over ``episodes`` episodes: REINFORCE on the recorded steps
    ``(obs, masks, actions, advantages)``, plus with roots the step-0 term over ``(root obs, root masks, root
    advantages)`` (advantages a (windows, 257) array, 0 off the roots), counted once per episode of the window:
    ``−Σ_r max(0, A(r)) · log π(r|s₀)``."""
    import torch

    o_t, m_t, a_t, adv = steps
    loss = torch.zeros(())
    if len(a_t):
        logp = torch.log_softmax(net(o_t).masked_fill(~m_t, -1e9), dim=1).gather(1, a_t[:, None]).squeeze(1)
        loss = loss - (adv * logp).sum()
    if roots is not None:
        r_o, r_m, r_adv = roots
        logpi = torch.log_softmax(net(r_o).masked_fill(~r_m, -1e9), dim=1)
        per_window = episodes / len(r_o)
        loss = loss - per_window * (r_adv.clamp(min=0) * logpi).sum()
    return loss / episodes


def _forked_rollouts(task: tuple) -> list[list[tuple]]:
    return _rollouts(_FORKED, task)


def finetune(layers: list[tuple[np.ndarray, np.ndarray]], setup: Any, cfg: FinetuneConfig, *, window_size: int,
             cmaxes: Sequence[int], seed: int, validate: Callable[[list], dict[str, Any]], workers: int = 1,
             on_progress: Callable[[int, str], None] | None = None, say: Callable[[str], None] = lambda s: None,
             log: Callable[[dict[str, Any]], None] | None = None) -> tuple[list[tuple[np.ndarray, np.ndarray]], dict[str, Any]]:
    """Fine-tune ``layers`` (the model file's (weight (out, in), bias) list) on the sim backend, the episodes
    played by ``workers`` processes (the same result for any number). Returns the kept actor and the figures."""
    import multiprocessing

    import torch

    from training.demos import sample_window

    global _FORKED
    if setup.backend.name != "sim":
        raise ValueError("fine-tuning scores thousands of episodes on the simulated node: it is for --backend sim")
    t0 = time.monotonic()
    torch.manual_seed(seed)
    wrng = random.Random(seed + 7_919)
    net, current = torch_actor(layers)
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    n_updates = max(1, -(-cfg.windows // cfg.windows_per_update))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda u: max(0.0, 1.0 - u / n_updates))

    start_val = validate(layers)
    best_val, best_layers, best_at = start_val, layers, 0
    evals = [{"windows": 0, **start_val}]
    jobs = list(setup.jobs)
    recent: list[float] = []
    weights = [(np.asarray(w, np.float32), np.asarray(b, np.float32)) for w, b in layers]
    pool = None
    if workers > 1:
        _FORKED = setup
        pool = multiprocessing.get_context("fork").Pool(workers)
    try:
        for u in range(n_updates):
            first = u * cfg.windows_per_update + 1
            items = [(wi, sample_window(wrng, jobs, window_size), cmaxes[(wi - 1) % len(cmaxes)])
                     for wi in range(first, min(cfg.windows, first + cfg.windows_per_update - 1) + 1)]
            if pool is not None:
                size = -(-len(items) // workers)
                parts = [items[i: i + size] for i in range(0, len(items), size)]
                played = [r for res in pool.map(_forked_rollouts, [(weights, part, cfg.samples, seed, window_size, cfg.roots)
                                                                    for part in parts]) for r in res]
            else:
                played = _rollouts(setup, (weights, items, cfg.samples, seed, window_size, cfg.roots))
            obs: list[np.ndarray] = []
            masks: list[np.ndarray] = []
            acts: list[int] = []
            advs: list[float] = []
            root_obs: list[np.ndarray] = []
            root_masks: list[np.ndarray] = []
            root_advs: list[np.ndarray] = []
            for (_, names, cmax), rolls in zip(items, played):
                recent.append(float(np.mean([r[1] for r in rolls])))
                branch = {r: float(np.mean([x[1] for x in rolls if x[0] == r])) for r in dict.fromkeys(x[0] for x in rolls)}
                for root, thr, o, m, a in rolls:
                    obs += o
                    masks += m
                    acts += a
                    advs += [(thr - branch[root]) * cfg.advantage_scale] * len(a)
                if cfg.roots:
                    ro, rm = root_observation(setup, names, cmax, window_size)
                    ra = np.zeros(rm.size, np.float32)
                    mean_q = float(np.mean(list(branch.values())))
                    for r, q in branch.items():
                        ra[r] = (q - mean_q) * cfg.advantage_scale
                    root_obs.append(ro)
                    root_masks.append(rm)
                    root_advs.append(ra)
            steps = (torch.as_tensor(np.asarray(obs, np.float32)), torch.as_tensor(np.asarray(masks, np.bool_)),
                     torch.as_tensor(acts, dtype=torch.long), torch.as_tensor(advs, dtype=torch.float32))
            roots = ((torch.as_tensor(np.asarray(root_obs, np.float32)), torch.as_tensor(np.asarray(root_masks)),
                      torch.as_tensor(np.asarray(root_advs))) if cfg.roots else None)
            if acts or cfg.roots:
                loss = pg_loss(net, steps, roots, len(items) * cfg.samples)
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(net.parameters(), cfg.max_grad_norm)
                opt.step()
            sched.step()
            weights = current()
            wi = items[-1][0]
            if wi // cfg.eval_every > (first - 1) // cfg.eval_every or wi == cfg.windows:
                val = validate(weights)
                evals.append({"windows": wi, **val})
                if log is not None:
                    log({"kind": "finetune", "windows": wi, "sampled_throughput": float(np.mean(recent)), **val,
                         "wall_s": round(time.monotonic() - t0, 1)})
                say(f"fine-tuning: {wi}/{cfg.windows} windows, sampled throughput {np.mean(recent):.3f}, "
                    f"validation {val['agent']:.3f} (start {start_val['agent']:.3f}) (simulated)")
                recent = []
                if cfg.keep == "final" and wi == cfg.windows or cfg.keep == "best" and val["agent"] > best_val["agent"]:
                    best_val, best_layers, best_at = val, weights, wi
            if on_progress is not None:
                on_progress(wi, f"sampled throughput {np.mean(recent) if recent else best_val['agent']:.3f} (simulated)")
    finally:
        if pool is not None:
            pool.terminate()
            _FORKED = None
    figures = {"windows": cfg.windows, "samples": cfg.samples, "lr": cfg.lr, "roots": list(cfg.roots), "evals": evals,
               "start_validation": start_val["agent"], "kept_validation": best_val["agent"], "kept_at_windows": best_at,
               "episodes": cfg.windows * cfg.samples, "workers": workers, "wall_s": round(time.monotonic() - t0, 1)}
    return best_layers, figures


def torch_actor(layers: list[tuple[np.ndarray, np.ndarray]]) -> tuple[Any, Callable[[], list[tuple[np.ndarray, np.ndarray]]]]:
    """The actor of a model file's (weight (out, in), bias) list as a trainable torch MLP (ReLU between layers),
    and a function giving its current weights back in that form (float32)."""
    import torch

    linears = [torch.nn.Linear(w.shape[1], w.shape[0]) for w, _ in layers]
    with torch.no_grad():
        for lin, (w, b) in zip(linears, layers):
            lin.weight.copy_(torch.as_tensor(np.asarray(w, np.float32)))
            lin.bias.copy_(torch.as_tensor(np.asarray(b, np.float32)))
    mods: list[Any] = []
    for i, lin in enumerate(linears):
        mods.append(lin)
        if i < len(linears) - 1:
            mods.append(torch.nn.ReLU())

    def current() -> list[tuple[np.ndarray, np.ndarray]]:
        return [(lin.weight.detach().numpy().astype(np.float32), lin.bias.detach().numpy().astype(np.float32))
                for lin in linears]

    return torch.nn.Sequential(*mods), current


def kept_validation(figures: dict[str, Any]) -> dict[str, Any]:
    """The kept actor's validation figures (agent and fifo), from the phase's figures."""
    kept = next(e for e in figures["evals"] if e["windows"] == figures["kept_at_windows"])
    return {k: v for k, v in kept.items() if k != "windows"}


def resumable_phase(run_dir: Path, name: str, actor: str, title: str, total: int, *, progress: bool, say: Callable[[str], None],
                    run: Callable[..., tuple[list, dict[str, Any]]],
                    finish: Callable[[dict[str, Any], Path], None]) -> tuple[list[tuple[np.ndarray, np.ndarray]], dict[str, Any]]:
    """A post-training phase as ``cosched train`` runs it: ``RUN_DIR/<name>.jsonl`` for its records, a progress bar
    over ``total``, and its actor and figures in ``actor`` (a file name) / ``<name>.json``, which a resumed run reuses
    instead of running it again. ``run(log=, on_progress=, say=)`` does the work; ``finish(figures, log_path)``
    reports and draws it (not when reused)."""
    from training.train import _load_layers, _Progress, _save_layers

    done, figs_path = run_dir / actor, run_dir / f"{name}.json"
    if done.exists() and figs_path.exists():
        say(f"{title}: done already ({done})")
        return _load_layers(done), json.loads(figs_path.read_text())
    bar = _Progress(total, 0, progress, f"{title} (sim)")
    log_path = run_dir / f"{name}.jsonl"
    log_path.unlink(missing_ok=True)

    def log(rec: dict[str, Any]) -> None:
        with log_path.open("a") as f:
            f.write(json.dumps(rec) + "\n")

    try:
        kept, figs = run(log=log, on_progress=bar.update, say=bar.say if progress else say)
    finally:
        bar.stop()
    _save_layers(done, kept)
    figs_path.write_text(json.dumps(figs, indent=1))
    finish(figs, log_path)
    return kept, figs


def finetune_phase(layers: list[tuple[np.ndarray, np.ndarray]], cfg: Any, setup: Any, run_dir: Path, *, progress: bool,
                   say: Callable[[str], None]) -> tuple[list[tuple[np.ndarray, np.ndarray]], dict[str, Any]]:
    """The phase as ``cosched train`` runs it (``cfg``: a TrainConfig; ``resumable_phase``: ``RUN_DIR/finetune.jsonl``,
    ``finetuned-actor.npz``... reused on resume) with its curve ``RUN_DIR/finetune.png``."""
    from training.train import validate

    fcfg = FinetuneConfig(windows=cfg.finetune_windows, samples=cfg.finetune_samples, lr=cfg.finetune_lr,
                          eval_every=max(1, min(2_000, cfg.finetune_windows // 5)),
                          roots=root_actions(cfg.finetune_roots, cfg.expert_grid))

    def run(**hooks: Any) -> tuple[list, dict[str, Any]]:
        hooks["say"](f"fine-tuning the actor: {fcfg.windows} training windows × {fcfg.samples} sampled episodes"
                     + (f" ({fcfg.samples // len(fcfg.roots)} from each schedule action {list(fcfg.roots)})" if fcfg.roots else "")
                     + f", policy gradient on the simulated throughput (validated every {fcfg.eval_every} windows; the final actor is kept)")
        return finetune(layers, setup, fcfg, window_size=cfg.window_size, cmaxes=cfg.cmax, seed=cfg.seed,
                        validate=lambda ls: validate(ls, setup, cfg.window_size), workers=cfg.demo_workers, **hooks)

    def finish(figs: dict[str, Any], log_path: Path) -> None:
        say(f"fine-tuning (simulated): validation {figs['start_validation']:.3f} -> {figs['kept_validation']:.3f} "
            f"(kept the actor of window {figs['kept_at_windows']}), {figs['wall_s']:.0f} s")
        plot_finetune(figs, log_path, run_dir / "finetune.png")

    return resumable_phase(run_dir, "finetune", "finetuned-actor.npz", "fine-tuning", fcfg.windows, progress=progress,
                           say=say, run=run, finish=finish)


def plot_validation(evals: list[dict[str, Any]], x: str, xlabel: str, title: str, png: Path,
                    decorate: Callable[[Any], None] = lambda ax: None) -> None:
    """A phase's curve: validation (agent, fifo) against ``x`` of its ``evals``; ``decorate(ax)`` adds the rest."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot([e[x] for e in evals], [e["agent"] for e in evals], "o-", color="tab:red", label="validation: agent (greedy)")
    ax.plot([e[x] for e in evals], [e["fifo"] for e in evals], "s--", color="tab:orange", label="validation: fifo")
    decorate(ax)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("throughput vs time sharing")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)


def plot_finetune(figs: dict[str, Any], log_path: Path, png: Path) -> None:
    """The phase's curve: validation (agent, fifo) and the sampled episodes' throughput against windows played."""
    recs = [json.loads(ln) for ln in log_path.read_text().splitlines() if ln.strip()] if log_path.exists() else []

    def decorate(ax: Any) -> None:
        if recs:
            ax.plot([r["windows"] for r in recs], [r["sampled_throughput"] for r in recs], "^:", color="tab:gray",
                    label="sampled episodes (since the last validation)")
        ax.axvline(figs["kept_at_windows"], color="black", linewidth=0.7, linestyle=":", label="kept actor")

    plot_validation(figs["evals"], "windows", "training windows played",
                    f"fine-tuning: {figs['samples']} episodes a window (simulated)", png, decorate)


__all__ = ["FinetuneConfig", "ROOT_CHOICES", "episode_throughput", "finetune", "finetune_phase", "kept_validation", "new_episode", "pg_loss",
           "plot_finetune", "plot_validation", "resumable_phase", "root_actions", "root_observation", "torch_actor"]
