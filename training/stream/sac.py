"""The stream learner: masked discrete SAC through ``cosched/CoScheduleStream-v0``, with a behaviour-cloning warm start
from rollout's decisions. One command:

    .venv/bin/python -m training.stream.sac --run-dir RUN [--seed S] [--total-steps N] [--out MODEL.npz]

* Streams (``training.stream.streams.TrainingStreams``): episode k draws its stream with its own generator (the
  run's seed and k): 24-48 jobs of the node's training programs and generated ones (never the held-out programs),
  Cmax in ``cmaxes``, W in ``windows``, half of them with Poisson arrivals.
* Warm start (``teacher_streams`` > 0): streams decided by ``rollout`` through the env (``training.stream.teacher``),
  made in ``teacher_workers`` processes; their transitions fill the replay buffer and a demonstration buffer; the
  actor imitates them (cross-entropy, plus ``bc_marginal`` x that of the teacher's job and of its option apart:
  ``marginal_bc``) for ``bc_updates`` updates while the critics learn their value. Then
  ``dagger_rounds`` rounds of DAgger: the greedy actor decides ``dagger_streams`` new streams, rollout labels every
  state it visits, the labels join the demonstrations and the actor imitates them ``dagger_updates`` more updates.
* SAC (``total_steps`` env steps): the actor samples from its masked softmax (``agent.policy``); the losses are
  ``training.set_sac.sac_losses`` (one place decides the masked softmax: ``agent.sac.masked_policy``), plus
  ``bc_coef`` x the imitation loss; twin critics, soft target updates, automatic α.
* Validation every ``eval_every`` steps and at the end: the greedy actor (``training.stream.policy.AgentStream``) on
  the validation streams (seeds ``eval_seeds``, saturated and with arrivals; never 101-108) against
  greedy-continuous; the best actor is kept (score: the geometric mean of greedy-continuous's metric over the
  actor's: makespan saturated, mean turnaround with arrivals).
* Output: RUN/args.json, RUN/log.jsonl (a record per episode and validation), RUN/untrained.npz (the same network
  before any update: the ablation's untrained arm) and the model file (the best actor and its first critic, with
  the node it was trained for). Seeded: the same seed and settings give the same model (one learner thread; the
  teachers' streams are fixed by their index).
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tyro

from agent.policy import masked_probs, sample_valid
from agent.streamnet import StreamNetShape, stream_logits
from env.episode.stream_gym import (
    CONTEXT_NAMES,
    N_OPTIONS,
    OPTION_NAMES,
    OPTIONS,
    PAIR_NAMES,
    CoScheduleStreamEnv,
)
from training.stream.args import Args
from training.stream.modelfile import StreamModel, StreamModelMeta, write_stream_model
from training.stream.replay import Replay
from training.stream.streams import TrainingStreams, eval_streams, training_pool

TEACHER_EPISODES = 1_000_000  # the teachers' streams are episodes TEACHER_EPISODES + k of the stream source


def net_shape(args: Args, d_token: int) -> StreamNetShape:
    return StreamNetShape(d_token=d_token, d_context=len(CONTEXT_NAMES), d_option=len(OPTION_NAMES),
                          d_pair=len(PAIR_NAMES), d_model=args.d_model, heads=args.heads, layers=args.layers,
                          d_ff=args.d_ff, d_head_hidden=args.d_head_hidden)


def model_meta(args: Args, shape: StreamNetShape, node: Any, training: dict | None = None) -> dict[str, Any]:
    from agent.modelfile import TrainedFor
    from env.node.discover import node_id
    from training.policies import node_shape

    return {"net": shape.to_dict(), "options": [list(o) for o in OPTIONS], "max_window": args.max_window,
            "max_concurrency": max(args.cmaxes), "training": training or {},
            "trained_for": TrainedFor(name=node.name, node_id=node_id(node), shape=node_shape(node))}


class Learner:
    """Actor, twin critics and their targets (``agent.streamnet_torch.StreamNet`` each), optimizers and α."""

    def __init__(self, shape: StreamNetShape, args: Args) -> None:
        import torch

        from agent.streamnet_torch import StreamNet

        self.args = args
        self.actor, self.q1, self.q2, self.q1_t, self.q2_t = (StreamNet(shape) for _ in range(5))
        self.q1_t.load_state_dict(self.q1.state_dict())
        self.q2_t.load_state_dict(self.q2.state_dict())
        self.log_alpha = torch.tensor(math.log(args.initial_alpha), requires_grad=True)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=args.lr_actor)
        self.critic_opt = torch.optim.Adam([*self.q1.parameters(), *self.q2.parameters()], lr=args.lr_critic)
        self.alpha_opt = torch.optim.Adam([self.log_alpha], lr=args.lr_alpha)

    def update(self, rb: Replay, demos: Replay, rng: np.random.Generator, warm: bool) -> dict[str, float]:
        """One step of each loss. ``warm``: the actor imitates only (the critics and α learn as in SAC)."""
        import torch

        from agent.sac import masked_policy
        from training.set_sac import sac_losses

        a = self.args
        b = rb.sample(a.batch_size, rng)
        loss = sac_losses((self.actor, self.q1, self.q2, self.q1_t, self.q2_t), self.log_alpha, b["s"], b["s2"],
                          b["mask"], b["nmask"], b["action"], b["reward"], b["done"], a.gamma, a.target_entropy_ratio)
        bc = torch.zeros(())
        if demos.size and (warm or a.bc_coef > 0):
            d = demos.sample(a.batch_size, rng)
            _, lp = masked_policy(self.actor(*d["s"]), d["mask"])
            bc = -lp.gather(1, d["action"][:, None]).mean()
            if a.bc_marginal > 0:
                bc = bc + a.bc_marginal * marginal_bc(lp, d["mask"], d["action"])
        actor_loss = bc if warm else loss["actor_loss"] + a.bc_coef * bc
        for g in self.actor_opt.param_groups:
            g["lr"] = a.lr_warm if warm else a.lr_actor
        steps = [(self.critic_opt, loss["critic_loss"]), (self.actor_opt, actor_loss)]
        if not warm:
            steps.append((self.alpha_opt, loss["alpha_loss"]))
        for opt, x in steps:
            opt.zero_grad()
            x.backward()
            opt.step()
        with torch.no_grad():
            for net, tgt in ((self.q1, self.q1_t), (self.q2, self.q2_t)):
                for p_, t_ in zip(net.parameters(), tgt.parameters()):
                    t_.mul_(1.0 - a.tau).add_(p_, alpha=a.tau)
        return {"critic_loss": float(loss["critic_loss"].detach()), "actor_loss": float(actor_loss.detach()),
                "bc": float(bc.detach()), "alpha": float(self.log_alpha.exp().detach()),
                "entropy": float(loss["entropy"])}


def marginal_bc(lp: Any, mask: Any, action: Any) -> Any:
    """The imitation loss of the two halves of a start: minus the log-probability of the teacher's job (over every
    option) and of its option (over every job), for the labels that start something. Rollout's job among similar
    ones is often a near tie that the joint label makes the actor learn at the cost of the option, whose choice
    (compact or spread, the size) is what the stream's makespan turns on."""
    import torch

    n = lp.shape[1] - 1
    k = N_OPTIONS
    starts = action < n
    if not bool(starts.any()):
        return torch.zeros(())
    p = (lp[starts, :n].exp() * mask[starts, :n]).view(-1, n // k, k)
    a = action[starts]
    job = p.sum(dim=2).gather(1, (a // k)[:, None]).clamp_min(1e-12).log()
    opt = p.sum(dim=1).gather(1, (a % k)[:, None]).clamp_min(1e-12).log()
    return -(job + opt).mean()


# ------------------------------------------------------------------------------------------ the teachers
_TEACH: dict[str, Any] = {}


def _teach_one(job: tuple[dict, int, Any]) -> tuple[list[tuple], list[tuple], dict[str, int]]:
    """Teacher stream k of a run (in a worker process): its transitions and rollout's labels, compact, and counts.
    ``guide``: None (rollout decides) or (shape, actor parameters) (the greedy actor decides, rollout labels)."""
    from env.sim.nodes import load_node
    from training.stream.replay import compact, padded_action, padded_mask
    from training.stream.teacher import teach

    raw, k, guide = job
    args = Args(**{**raw, **{f: tuple(raw[f]) for f in ("windows", "jobs", "cmaxes", "loads", "eval_seeds", "eval_cmaxes")}})
    if _TEACH.get("key") != raw:
        node = load_node(args.node)
        _TEACH.update(key=raw, env=CoScheduleStreamEnv(node, window=args.max_window), src=_source(args, node))
    jobs, cmax = _TEACH["src"].draw(TEACHER_EPISODES + k)
    actor = None
    if guide is not None:
        shape, params = guide

        def actor(o: Any) -> int:
            x = stream_logits(shape, params, o.tokens, o.n_queue, o.context, o.options, o.pairs)
            return int(np.argmax(np.where(o.mask, x, -np.inf)))
    trs, labels, counts = teach(_TEACH["env"], jobs, cmax, args.teacher_window, actor)
    W = args.max_window
    out = [(compact(o), padded_mask(o, W), padded_action(o, a, W), r * args.reward_scale,
            compact(o2) if o2 is not None else compact(o), padded_mask(o2, W), float(d)) for o, a, r, o2, d in trs]
    demo = [(compact(o), padded_mask(o, W), padded_action(o, a, W), 0.0, compact(o), padded_mask(None, W), 1.0)
            for o, a in labels]
    return out, demo, counts


def _source(args: Args, node: Any) -> TrainingStreams:
    return TrainingStreams(node, training_pool(node, args.synthetic, args.seed), args.seed, args.jobs, args.cmaxes,
                           args.arrival_share, args.loads)


def teach_all(args: Args, guide: Any, first: int, n: int) -> tuple[list[tuple], list[tuple], dict[str, int]]:
    """Teacher streams first..first + n - 1 (``_teach_one``), in ``teacher_workers`` processes."""
    raw = dataclasses.asdict(args)
    jobs = [(raw, k, guide) for k in range(first, first + n)]
    if args.teacher_workers > 1:
        import multiprocessing as mp

        with mp.get_context("fork").Pool(args.teacher_workers) as pool:
            results = pool.map(_teach_one, jobs, chunksize=1)
    else:
        results = [_teach_one(j) for j in jobs]
    counts = {k: sum(c[k] for _, _, c in results) for k in ("starts", "unmatched")}
    return [t for r, _, _ in results for t in r], [t for _, d, _ in results for t in d], counts


# ------------------------------------------------------------------------------------------ validation
def validation(args: Args, node: Any) -> tuple[list, dict[str, float]]:
    """The validation streams and greedy-continuous's metric on each."""
    from env.episode.stream import run_stream
    from env.planners.streams import GreedyContinuous

    streams = eval_streams(node, args.eval_seeds, args.eval_cmaxes, (args.eval_load,) if args.eval_load else (),
                           args.eval_jobs)
    base = {label: _metric(run_stream(node, jobs, c, GreedyContinuous(args.eval_window)), label)
            for label, jobs, c in streams}
    return streams, base


def _metric(run: Any, label: str) -> float:
    m = run.metrics()
    return m["makespan_s"] if label.startswith("sat") else m["mean_turnaround_s"]


def score(model: StreamModel, node: Any, streams: list, base: dict[str, float], window: int) -> float:
    """The geometric mean over the streams of greedy-continuous's metric / the greedy actor's (above 1: better)."""
    from env.episode.stream import run_stream
    from training.stream.policy import AgentStream

    logs = [math.log(base[label] / _metric(run_stream(node, jobs, c, AgentStream(model, window)), label))
            for label, jobs, c in streams]
    return math.exp(sum(logs) / len(logs))


# ------------------------------------------------------------------------------------------ main
def main(args: Args, run_dir: Path, out: Path | None = None, progress: bool = True) -> dict[str, Any]:
    import torch

    from env.sim.nodes import load_node

    t0 = time.monotonic()
    torch.set_num_threads(1)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "args.json").write_text(json.dumps(dataclasses.asdict(args), indent=1))
    log = (run_dir / "log.jsonl").open("w")
    say = (lambda s: print(f"[{time.monotonic() - t0:5.0f} s] {s}", flush=True)) if progress else (lambda s: None)
    node = load_node(args.node)
    env = CoScheduleStreamEnv(node, window=args.max_window)
    src = _source(args, node)
    shape = net_shape(args, env.feats.d_token)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    sac = Learner(shape, args)
    meta = lambda extra=None: model_meta(args, shape, node, {"args": dataclasses.asdict(args), **(extra or {})})  # noqa: E731
    write_stream_model(run_dir / "untrained.npz", sac.actor.export(), sac.q1.export(), **meta({"untrained": True}))
    W = args.max_window
    rb, demos = Replay(args.buffer_size, W), Replay(args.buffer_size, W)
    streams, base = validation(args, node)
    best: tuple[float, dict, dict, int] | None = None

    def validate(step: int) -> None:
        nonlocal best
        actor = sac.actor.export()
        s = score(StreamModel(StreamModelMeta.model_validate(meta()), actor, actor), node, streams, base,
                  args.eval_window)
        log.write(json.dumps({"kind": "validation", "step": step, "score": s, "wall_s": time.monotonic() - t0}) + "\n")
        say(f"step {step}: validation {s:.4f} x greedy-continuous" + (f" (best {best[0]:.4f})" if best else ""))
        if best is None or s > best[0]:
            best = (s, actor, sac.q1.export(), step)

    validate(0)
    if args.teacher_streams:
        rounds = [(None, 0, args.teacher_streams, args.bc_updates)] + [
            ("actor", args.teacher_streams + r * args.dagger_streams, args.dagger_streams, args.dagger_updates)
            for r in range(args.dagger_rounds)]
        for i, (guide, first, n, updates) in enumerate(rounds):
            trs, labels, counts = teach_all(args, guide and (shape, sac.actor.export()), first, n)
            rb.items.extend(trs)
            demos.items.extend(labels)
            say(("rollout decided" if guide is None else f"DAgger round {i}: the actor decided, rollout labelled")
                + f" {n} streams: {len(labels)} states, {counts['unmatched']} of {counts['starts']} rollout starts not "
                "in the option menu")
            for u in range(updates):
                last = sac.update(rb, demos, rng, warm=True)
                if progress and (u + 1) % 500 == 0:
                    say(f"imitation {u + 1}/{updates}: cross-entropy {last['bc']:.3f}, critic {last['critic_loss']:.3f}")
            validate(0)
    step, episode, last = 0, 0, {}
    recent: list[float] = []
    next_eval = args.eval_every
    while step < args.total_steps:
        jobs, cmax = src.draw(episode)
        w = int(np.random.default_rng([args.seed, episode, 1]).choice(args.windows))
        erng = np.random.default_rng([args.seed, episode, 2])
        env.reset(options={"jobs": jobs, "max_concurrency": cmax, "window": w})
        params, ret, done = sac.actor.export(), 0.0, False
        while not done:
            o = env.state()
            x = stream_logits(shape, params, o.tokens, o.n_queue, o.context, o.options, o.pairs)
            a = sample_valid(masked_probs(x, o.mask), o.mask, erng)
            _, r, done, _, info = env.step(env.to_env_action(a))
            rb.add(o, a, r * args.reward_scale, None if done else env.state(), done)
            ret += r
            step += 1
            if step >= args.learning_starts and step % args.update_every == 0:
                last = sac.update(rb, demos, rng, warm=False)
        recent = (recent + [ret])[-50:]
        log.write(json.dumps({"kind": "episode", "step": step, "W": w, "cmax": cmax, "jobs": len(jobs),
                              "return": ret, **last}) + "\n")
        episode += 1
        if step >= next_eval or step >= args.total_steps:
            say(f"step {step}, episode {episode}: return {np.mean(recent):.3f} (last 50), alpha "
                f"{last.get('alpha', args.initial_alpha):.4f}, critic {last.get('critic_loss', float('nan')):.3f}")
            validate(step)
            next_eval += args.eval_every
    assert best is not None
    figures = {"validation_best": best[0], "best_step": best[3], "wall_s": time.monotonic() - t0, "steps": step,
               "episodes": episode}
    out = out or run_dir / "model.npz"
    # the model's metadata holds what the seed fixes (not the wall time), so the same run gives the same model id
    m = write_stream_model(out, best[1], best[2], **meta({k: v for k, v in figures.items() if k != "wall_s"}))
    (run_dir / "figures.json").write_text(json.dumps({**figures, "model_id": m.model_id}, indent=1))
    log.close()
    say(f"model {out} ({m.model_id[:19]}): validation {best[0]:.4f} x greedy-continuous at step {best[3]}")
    return figures


@dataclass
class Command:
    """Train the stream learner (masked discrete SAC on the stream node model) for a node; writes a model file."""

    args: Args
    run_dir: str | None = None  # log, untrained network, figures (default runs/stream-<node>-s<seed>)
    out: str | None = None  # model file to write (default RUN_DIR/model.npz)
    quiet: bool = False


def cli(argv: list[str] | None = None) -> int:
    try:
        cmd = tyro.cli(Command, args=sys.argv[1:] if argv is None else argv, config=(tyro.conf.OmitArgPrefixes,))
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    run = Path(cmd.run_dir or f"runs/stream-{cmd.args.node.replace(':', '-')}-s{cmd.args.seed}")
    main(cmd.args, run, Path(cmd.out) if cmd.out else None, progress=not cmd.quiet)
    return 0


if __name__ == "__main__":
    sys.exit(cli())
