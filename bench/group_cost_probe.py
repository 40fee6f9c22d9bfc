"""How well can a plan be made from the job features alone, with a learned model of a group's cost? (simulated)

    .venv/bin/python bench/group_cost_probe.py [--groups 40000] [--epochs 60] [--windows 80] [--seeds 4242,5151]

1. Random groups of 1-4 jobs of the training pool (the 12 training programs and 1,000 generated jobs of seed 1, as
   ``cosched train`` draws them) are costed exactly on the node model: the better of compact and distributed, each
   with its best core split on the cores grid (``training.expert.expert_grid("cores")``); the label is the group's
   log gain over time sharing, log(sum of solo times / makespan). Two processes.
2. A small set network (torch, seeded) reads the members' feature vectors (``profiler.features`` via the sim
   provider: what the agent reads) and regresses the label: a per-job embedding, one self-attention layer, a
   feed-forward layer, sum- and max-pooling and the group size.
3. On ``bench/agent_heldout.py``'s windows (W 6, Cmax 4, a held-out program in each) every group of at most 4 is
   scored by the network, the *exact* best partition under those costs is found (best-found's dynamic programme)
   and scored on the node model against best-found.

It is not a policy (it searches every partition of the window): it measures how good a learned group cost can get
and what a planner reading it would reach, the question behind the next design of the agent (docs/training.md).
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import math  # noqa: E402
import multiprocessing  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from agent_heldout import best_found, windows  # noqa: E402
from env.planners.bestfound import _optimise_subset  # noqa: E402
from env.planners.partitions import best_partition  # noqa: E402
from env.planners.scoring import GroupEvaluator  # noqa: E402
from env.episode.jobinfo import sim_provider  # noqa: E402
from env.sim.nodes import load_node  # noqa: E402
from env.sim.synthetic import synthetic_names  # noqa: E402
from env.sim.world import world_for  # noqa: E402
from training.expert import expert_grid  # noqa: E402

NODE = load_node("sim:reference")
SCHEDULES = (0, 3)  # compact and distributed first-touch, the expert's
MAX_GROUP = 4
GRID = expert_grid("cores")


def group_cost(ev: GroupEvaluator, group: tuple[str, ...], schedule: int) -> float:
    return _optimise_subset(ev, schedule, list(group), GRID, rounds=1)[0]


def _label(task: tuple[int, int, list[str]]) -> list[tuple[tuple[str, ...], float]]:
    seed, n, pool = task
    prov, ev, rng = sim_provider(NODE), GroupEvaluator(NODE), random.Random(seed)
    out = []
    for _ in range(n):
        g = tuple(rng.sample(pool, rng.choice((1, 2, 2, 3, 3, 4, 4))))
        best = min(group_cost(ev, g, s) for s in SCHEDULES)
        out.append((g, math.log(sum(prov.get(j).solo_s for j in g) / best)))
    return out


def labelled_groups(n: int) -> list[tuple[tuple[str, ...], float]]:
    world = world_for(NODE)
    pool = list(world.train_jobs) + synthetic_names(1000, 1)
    parts = 8
    with multiprocessing.get_context("fork").Pool(2) as workers:
        chunks = workers.map(_label, [(i, n // parts + (i < n % parts), pool) for i in range(parts)])
    return [x for c in chunks for x in c]


def make_net(n_features: int, d: int = 64):
    import torch

    class GroupCost(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Sequential(torch.nn.Linear(n_features, d), torch.nn.ReLU(), torch.nn.Linear(d, d))
            self.attention = torch.nn.MultiheadAttention(d, 4, batch_first=True)
            self.ff = torch.nn.Sequential(torch.nn.Linear(d, d), torch.nn.ReLU(), torch.nn.Linear(d, d))
            self.head = torch.nn.Sequential(torch.nn.Linear(2 * d + 1, d), torch.nn.ReLU(), torch.nn.Linear(d, 1))

        def forward(self, x, members):  # x (B, 4, f), members (B, 4) 1/0
            h = self.embed(x)
            a, _ = self.attention(h, h, h, key_padding_mask=members == 0)
            h = h + a
            h = h + self.ff(h)
            m = members[..., None]
            pooled = torch.cat([(h * m).sum(1), (h * m - 1e4 * (1 - m)).max(1).values, members.sum(1, keepdim=True)], 1)
            return self.head(pooled)[:, 0]

    return GroupCost()


def features(groups, prov):
    import torch

    x = np.zeros((len(groups), MAX_GROUP, prov.n_features), np.float32)
    m = np.zeros((len(groups), MAX_GROUP), np.float32)
    for i, g in enumerate(groups):
        for k, j in enumerate(g):
            x[i, k], m[i, k] = prov.get(j).features, 1.0
    return torch.from_numpy(x), torch.from_numpy(m)


def fit(data, prov, epochs: int, seed: int = 0):
    import torch

    torch.manual_seed(seed)
    net = make_net(prov.n_features)
    x, m = features([g for g, _ in data], prov)
    y = torch.tensor([v for _, v in data], dtype=torch.float32)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(epochs, 1))
    rng = np.random.default_rng(seed)
    idx = np.arange(len(data))
    loss = torch.zeros(())
    for _ in range(epochs):
        rng.shuffle(idx)
        for b in range(0, len(idx), 256):
            ii = torch.from_numpy(idx[b:b + 256])
            loss = ((net(x[ii], m[ii]) - y[ii]) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        sched.step()
    return net, float(loss.detach())


def plan_share(net, prov, seed: int, n_windows: int) -> list[float]:
    """Per window: the exact partition under the learned costs, scored on the node model, / best-found."""
    import torch

    ev = GroupEvaluator(NODE)
    ws = windows(n_windows, seed)
    bf = best_found(NODE, windows(240, seed), seed)[:n_windows]  # agent_heldout's cache, when its 240 were searched
    out = []
    for w, b in zip(ws, bf):
        names = [j.profile_name for j in w.jobs]
        full = (1 << len(names)) - 1
        masks = [s for s in range(1, full + 1) if bin(s).count("1") <= MAX_GROUP]
        groups = {s: tuple(names[i] for i in range(len(names)) if s >> i & 1) for s in masks}
        with torch.no_grad():
            gain = net(*features([groups[s] for s in masks], prov)).numpy()
        predicted = {s: sum(prov.get(j).solo_s for j in groups[s]) / math.exp(float(g)) for s, g in zip(masks, gain)}
        _, choice = best_partition(predicted, full)
        parts, rest = [], full
        while rest:
            parts.append(groups[choice[rest]])
            rest ^= choice[rest]
        solo = sum(prov.get(j).solo_s for j in names)
        out.append(max(solo / sum(group_cost(ev, g, s) for g in parts) for s in SCHEDULES) / b)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=40_000, help="exactly-costed groups to fit on")
    ap.add_argument("--epochs", type=int, default=60)
    ap.add_argument("--windows", type=int, default=80, help="held-out windows per seed (of agent_heldout's 240)")
    ap.add_argument("--seeds", default="4242,5151", help="agent_heldout's window seeds")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(2)
    prov = sim_provider(NODE)
    t0 = time.monotonic()
    print(f"costing {args.groups} random groups of the training pool on the node model (two processes) ...", flush=True)
    data = labelled_groups(args.groups)
    t1 = time.monotonic()
    net, mse = fit(data, prov, args.epochs)
    t2 = time.monotonic()
    print(f"labels {t1 - t0:.0f} s, fit {t2 - t1:.0f} s ({args.epochs} epochs, last batch's squared error {mse:.5f})")
    for seed in (int(s) for s in args.seeds.split(",") if s):
        r = np.array(plan_share(net, prov, seed, args.windows))
        print(f"seed {seed}: learned group costs + exact partition = {r.mean() * 100:.1f} % of best-found "
              f"(median {np.median(r) * 100:.1f} %, worst {r.min() * 100:.1f} %; {len(r)} windows, W 6, Cmax 4; simulated)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
