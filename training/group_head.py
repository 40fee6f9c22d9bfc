"""The group-cost head of a model (``agent.groupnet``): a regression on many exactly-costed groups of the node model.

    .venv/bin/python -m training.group_head --model IN.npz --out OUT.npz [--groups 80000] [--epochs 40] [--seed 1]

Random groups of 1..Cmax jobs of the training pool (the training programs and the generated jobs, as ``cosched
train`` draws them) are run on the node model under every option the head chooses among (compact and distributed
first-touch; every core fraction per member that fits the node; all ways, no bandwidth cap, balanced split: the
expert's ``cores`` grid) and each run's log gain over time sharing is a label. The network (``agent.groupnet``)
regresses them: ``Q`` on a sample of each group's options, ``V`` on the best of them. The agent plans with it
(``agent.grouping``): which jobs run together, their core fractions and the schedule.

Why a regression and not more actor training (docs/training.md, 2026-11-25): the walk-trained actor picks the
wrong partners; one group's cost is about a hundredth of a second to label on the node model, so tens of thousands
of groups cost minutes, where the expert's labels per episode state are the training's bottleneck.

``--model`` names the model file whose actor the head joins; ``--out`` gets the same actor with the head (a new
model id). ``cosched train`` runs the same function in a process beside its learner.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import math  # noqa: E402
import multiprocessing  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import itertools  # noqa: E402
from dataclasses import asdict, dataclass  # noqa: E402
from functools import lru_cache  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable, Sequence  # noqa: E402

import numpy as np  # noqa: E402

from agent.groupnet import GROUP_ARCHITECTURE, GroupNetShape  # noqa: E402
from env.plan import actions  # noqa: E402

SCHEDULES = (0, 3)  # compact and distributed first-touch (env.plan.actions' schedule indices), the expert's
MAX_GROUP = 4  # env.episode.window.SET_MAX_CMAX


@dataclass(frozen=True)
class GroupHeadArgs:
    groups: int = 80_000  # exactly-costed groups to fit on
    epochs: int = 40
    options_per_group: int = 8  # options of a group in one step's Q loss
    batch_size: int = 256
    lr: float = 1e-3
    d_model: int = 64
    seed: int = 1
    workers: int = 2  # processes labelling groups

    def __post_init__(self) -> None:
        for name in ("groups", "epochs", "options_per_group", "batch_size", "d_model", "workers"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be at least 1, not {getattr(self, name)}")


def _grid() -> Any:
    from training.expert import expert_grid

    return expert_grid("cores")


@lru_cache(maxsize=None)
def _options(n_cpus: int, k: int) -> tuple[tuple[int, tuple[int, ...]], ...]:
    from env.plan.allocate import _core_count

    cpus = [_core_count(n_cpus, c.numerator, c.denominator) for c in actions.CORE_FRACTIONS]
    combos = [c for c in itertools.product(range(len(cpus)), repeat=k) if sum(cpus[i] for i in c) <= n_cpus]
    return tuple((s, c) for s in range(len(SCHEDULES)) for c in combos)


def options_of(node: Any, k: int) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """Every (schedule option, core-option index per member) of a group of k jobs on ``node`` whose CPUs fit the
    node: the labels' and the head's option list, in one order."""
    return _options(len(node.cpus), k)


@lru_cache(maxsize=None)
def core_action(i: int) -> int:
    """The job action of core option i in the head's grid (all ways, no bandwidth cap, balanced)."""
    grid = _grid()
    return int(grid.action(actions.CORE_FRACTIONS[i], max(grid.ways), max(grid.bw), grid.splits[0]))


_POOL: list[Any] = []  # (node, pool of names) for the forked labelling workers


def _label(task: tuple[int, int]) -> list[tuple[tuple[str, ...], list[float]]]:
    from env.planners.baselines import GroupEvaluator
    from env.episode.jobinfo import sim_provider

    seed, n = task
    node, pool, cmax = _POOL
    prov, ev, rng = sim_provider(node), GroupEvaluator(node), random.Random(seed)
    sizes = [k for k in range(1, cmax + 1) for _ in range(1 if k == 1 else 2)]  # singletons half as often
    out = []
    for i in range(n):
        g = tuple(rng.sample(pool, min(rng.choice(sizes), len(pool))))
        solo = sum(prov.get(j).solo_s for j in g)
        vals = []
        for s, cores in options_of(node, len(g)):
            t = ev.makespan(SCHEDULES[s], [(j, core_action(c)) for j, c in zip(g, cores)])
            vals.append(math.log(solo / t) if math.isfinite(t) and t > 0 else math.nan)
        out.append((g, vals))
        if i % 200 == 199:  # every group is new: the evaluator's memo only grows
            ev.memo.clear()
            ev.group_memo.clear()
    return out


def label_groups(node: Any, pool: Sequence[str], n: int, seed: int, workers: int, cmax: int = MAX_GROUP,
                 say: Callable[[str], None] | None = None) -> list[tuple[tuple[str, ...], list[float]]]:
    """n random groups of ``pool`` (seeded), each with the log gain of every option (``options_of``), on the node
    model. Deterministic for a seed whatever ``workers`` is (the work is cut into fixed seeded parts)."""
    parts = 16
    tasks = [(seed * 1000 + i, n // parts + (i < n % parts)) for i in range(parts)]
    _POOL[:] = [node, list(pool), cmax]
    out: list[tuple[tuple[str, ...], list[float]]] = []
    if workers <= 1:
        for t in tasks:
            out += _label(t)
            if say:
                say(f"group labels: {len(out)}/{n}")
        return out
    with multiprocessing.get_context("fork").Pool(workers) as p:
        for chunk in p.imap(_label, tasks):
            out += chunk
            if say:
                say(f"group labels: {len(out)}/{n}")
    return out


def _arrays(node: Any, records: Sequence[tuple[tuple[str, ...], list[float]]], provider: Any) -> tuple[np.ndarray, ...]:
    """Padded tensors of the labelled groups: features (N, K, f), members (N, K), option cores (N, R, K), option
    schedules (N, R), labels (N, R) with NaN where an option does not apply."""
    opts = {k: options_of(node, k) for k in range(1, MAX_GROUP + 1)}
    R = max(len(v) for v in opts.values())
    N, f = len(records), provider.n_features
    x = np.zeros((N, MAX_GROUP, f), np.float32)
    m = np.zeros((N, MAX_GROUP), np.float32)
    cores = np.zeros((N, R, MAX_GROUP), np.int64)
    sched = np.zeros((N, R), np.int64)
    y = np.full((N, R), np.nan, np.float32)
    feats = {name: provider.get(name).features for name in {j for g, _ in records for j in g}}
    for i, (g, vals) in enumerate(records):
        for k, j in enumerate(g):
            x[i, k], m[i, k] = feats[j], 1.0
        for r, ((s, c), v) in enumerate(zip(opts[len(g)], vals)):
            cores[i, r, :len(c)], sched[i, r], y[i, r] = c, s, v
    return x, m, cores, sched, y


def fit(node: Any, records: Sequence[tuple[tuple[str, ...], list[float]]], provider: Any, args: GroupHeadArgs,
        say: Callable[[str], None] | None = None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The head's parameters and figures (the mean squared errors of V and Q on a twentieth of the groups held back)."""
    import torch

    from agent.groupnet_torch import GroupNet

    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    shape = GroupNetShape(d_feature=provider.n_features, d_model=args.d_model, n_cores=len(actions.CORE_FRACTIONS),
                          n_schedules=len(SCHEDULES), max_group=MAX_GROUP)
    net = GroupNet(shape)
    arrays = _arrays(node, records, provider)
    usable = np.isfinite(arrays[-1]).any(1)  # a group with no finite option value has nothing to learn (and would
    if not usable.any():  # give the option sampler a row of zero weights: torch's "invalid multinomial distribution")
        raise ValueError("the group-cost head has no group with a finite option value to fit on")
    x, m, cores, sched, y = (torch.from_numpy(np.ascontiguousarray(a[usable])) for a in arrays)
    ok = torch.isfinite(y)
    y = torch.where(ok, y, torch.zeros_like(y))
    v = torch.where(ok, y, torch.full_like(y, -1e9)).max(1).values
    order = rng.permutation(len(y))
    held = torch.from_numpy(order[: max(1, len(order) // 20)])
    train = order[len(held):]
    opt = torch.optim.Adam(net.parameters(), lr=args.lr)
    sched_lr = torch.optim.lr_scheduler.CosineAnnealingLR(opt, args.epochs)
    gen = torch.Generator().manual_seed(args.seed)

    def losses(ii: torch.Tensor, pick: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        h = net.encode(x[ii], m[ii])
        lv = ((net.values(h, m[ii]) - v[ii]) ** 2).mean()
        if pick is None:  # every option
            cc, ss, yy, oo = cores[ii], sched[ii], y[ii], ok[ii].float()
        else:
            cc = torch.gather(cores[ii], 1, pick[..., None].expand(-1, -1, MAX_GROUP))
            ss, yy, oo = torch.gather(sched[ii], 1, pick), torch.gather(y[ii], 1, pick), torch.gather(ok[ii].float(), 1, pick)
        lq = (((net.option_values(h, m[ii], cc, ss) - yy) ** 2) * oo).sum() / oo.sum().clamp(min=1.0)
        return lv, lq

    t0 = time.monotonic()
    for epoch in range(args.epochs):
        rng.shuffle(train)
        for b in range(0, len(train), args.batch_size):
            ii = torch.from_numpy(train[b:b + args.batch_size])
            pick = torch.multinomial(ok[ii].float(), args.options_per_group, replacement=True, generator=gen)
            lv, lq = losses(ii, pick)
            opt.zero_grad()
            (lv + lq).backward()
            opt.step()
        sched_lr.step()
        if say and (epoch % 5 == 4 or epoch == args.epochs - 1):
            with torch.no_grad():
                hv, hq = losses(held, None)
            say(f"group head: epoch {epoch + 1}/{args.epochs}, held-back squared error V {float(hv):.4f} "
                f"Q {float(hq):.4f} ({time.monotonic() - t0:.0f} s)")
    with torch.no_grad():
        hv, hq = losses(held, None)
    figures = {"groups": len(records), "held_back_groups": len(held), "held_back_mse_v": float(hv),
               "held_back_mse_q": float(hq), "fit_s": round(time.monotonic() - t0, 1), "simulated": True}
    return net.export(), {"shape": shape.to_dict(), "figures": figures}


def head_meta(node: Any, shape: dict[str, int], args: GroupHeadArgs, figures: dict[str, Any]) -> dict[str, Any]:
    """The model file's ``group_head`` document (``agent.modelfile.GroupHeadMeta``)."""
    from env.plan.allocate import core_count

    return {"architecture": GROUP_ARCHITECTURE, "net": shape,
            "core_actions": [core_action(i) for i in range(len(actions.CORE_FRACTIONS))],
            "core_cpus": [core_count(node, c) for c in actions.CORE_FRACTIONS],
            "schedule_actions": list(SCHEDULES), "training": {"args": asdict(args), "figures": figures}}


def train_head(node: Any, pool: Sequence[str], provider: Any, args: GroupHeadArgs, cmax: int = MAX_GROUP,
               say: Callable[[str], None] | None = None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The phase: label, fit; returns (parameters, the ``group_head`` document)."""
    t0 = time.monotonic()
    records = label_groups(node, pool, args.groups, args.seed, args.workers, cmax, say)
    label_s = time.monotonic() - t0
    params, fitted = fit(node, records, provider, args, say)
    figures = {**fitted["figures"], "label_s": round(label_s, 1)}
    return params, head_meta(node, fitted["shape"], args, figures)


def training_pool(node: Any, synthetic_jobs: int, seed: int, jobs: Sequence[str] | None = None) -> list[str]:
    """The jobs ``cosched train`` draws windows from (its training programs and generated jobs), once each."""
    from env.sim.synthetic import synthetic_names
    from env.sim.world import world_for

    train = list(jobs) if jobs else list(world_for(node).train_jobs)
    return train + (synthetic_names(synthetic_jobs, seed) if synthetic_jobs else [])


# ----------------------------------------------------------------------------- beside a training run's learner
def head_args(args: Any, workers: int = 2) -> GroupHeadArgs:
    """The head's settings from a training run's ``Args`` (``training.set_sac``)."""
    return GroupHeadArgs(groups=args.group_groups, epochs=args.group_epochs, seed=args.seed, workers=workers)


def cached_head(args: Any, run_dir: Path) -> tuple[dict[str, np.ndarray], dict[str, Any]] | None:
    """The head a run already fitted (RUN_DIR/group-head.npz and .json) with these settings, else None."""
    import json

    npz, doc = run_dir / "group-head.npz", run_dir / "group-head.json"
    if npz.exists() and doc.exists():
        head = json.loads(doc.read_text())
        # the worker count changes nothing in the head (the labels are the same whatever it is)
        if {**head["training"]["args"], "workers": 0} == {**asdict(head_args(args)), "workers": 0}:
            with np.load(npz) as z:
                return {k: z[k] for k in z.files}, head
    return None


def start_group_head(args: Any, run_dir: Path, progress: bool) -> Any:
    """The group-cost head fitted in another process beside the learner, which it does not depend on: the learner
    is one-threaded, so on a 2-CPU node the head costs no wall time until it outlasts the actor's training. None
    without a head, or when the run already has it; ``group_head_phase`` waits for it."""
    if not args.group_groups or cached_head(args, run_dir) is not None:
        return None
    proc = multiprocessing.get_context("spawn").Process(target=_head_process, args=(args, run_dir, progress),
                                                        daemon=True, name="cosched-group-head")
    proc.start()
    return proc


def group_head_phase(args: Any, problem: Any, run_dir: Path, progress: bool, proc: Any = None,
                     cpus: int | None = None) -> tuple[dict[str, np.ndarray], dict[str, Any]] | None:
    """The group-cost head, fitted once per run: kept in RUN_DIR/group-head.npz (and its description in
    group-head.json), so a resumed or exported run reuses it. None without one (0 groups). ``proc``: the process
    ``start_group_head`` started, waited for (and, if it failed, the head is fitted here). ``cpus``: the labelling
    processes and the fit's threads (default: every CPU)."""
    import json

    if not args.group_groups:
        return None
    if proc is not None:
        if proc.is_alive() and progress:
            print("waiting for the group-cost head (fitted beside the learner)", flush=True)
        proc.join()
        if proc.exitcode and progress:
            print(f"the group-cost head's process failed (exit code {proc.exitcode}): fitting it here", flush=True)
    cached = cached_head(args, run_dir)
    if cached is not None:
        return cached
    import torch

    pool = list(dict.fromkeys(problem.pool))  # the jobs the actor's windows are drawn from, once each
    threads, cpus = torch.get_num_threads(), cpus or max(1, os.cpu_count() or 1)
    torch.set_num_threads(cpus)  # the learner's one thread; the fit has the machine
    try:
        params, head = train_head(problem.node, pool, problem.provider, head_args(args, cpus), max(args.cmaxes),
                                  say=(lambda m: print(m, flush=True)) if progress else None)
    finally:
        torch.set_num_threads(threads)
    np.savez(run_dir / "group-head.tmp.npz", **params)  # each file appears whole (a resumed run may find them)
    (run_dir / "group-head.tmp.json").write_text(json.dumps(head, indent=1))
    os.replace(run_dir / "group-head.tmp.npz", run_dir / "group-head.npz")
    os.replace(run_dir / "group-head.tmp.json", run_dir / "group-head.json")
    return params, head


def _head_process(args: Any, run_dir: Path, progress: bool) -> None:
    """The head phase in its own process (spawned: nothing of the learner's state is inherited), on one CPU."""
    from training.setup import Problem

    group_head_phase(args, Problem(args), run_dir, progress, cpus=1)


def cli(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="the model file whose actor the head joins")
    ap.add_argument("--out", required=True, help="the model file to write (the actor with the head)")
    for name, default in asdict(GroupHeadArgs()).items():
        ap.add_argument("--" + name.replace("_", "-"), dest=name, type=type(default), default=default)
    ns = ap.parse_args(argv)
    from agent.errors import ModelFileError
    from agent.modelfile import load_set_model, write_set_model
    from env.episode.jobinfo import sim_provider
    from env.sim.nodes import load_node

    try:
        args = GroupHeadArgs(**{k: getattr(ns, k) for k in asdict(GroupHeadArgs())})
        model = load_set_model(ns.model)
        node = load_node(model.meta.trained_for.name)
    except (ValueError, ModelFileError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    targs = model.meta.training.get("args", {})
    pool = training_pool(node, int(targs.get("synthetic_jobs", 0)), int(targs.get("seed", args.seed)), targs.get("jobs"))
    provider = sim_provider(node)
    params, head = train_head(node, pool, provider, args, model.meta.max_concurrency, say=lambda s: print(s, flush=True))
    fields = model.meta.model_dump(exclude={"format", "model_id", "group_head"})
    meta = write_set_model(ns.out, model.params, group=params, group_head=head, **fields)
    print(f"wrote {ns.out} ({meta.model_id[:19]}): the actor of {ns.model} and a group-cost head fitted on "
          f"{head['training']['figures']['groups']} groups (simulated)")
    return 0


if __name__ == "__main__":
    sys.exit(cli())
