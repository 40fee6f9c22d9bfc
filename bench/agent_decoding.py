"""Does the agent lose in its network or in its decoding? (simulated) The shipped network decoded three ways on the
held-out windows of ``bench/agent_heldout.py`` (W 6, Cmax 4, a held-out program in each), as a share of best-found:

    .venv/bin/python bench/agent_decoding.py [--model training/models/sim-reference.npz] [--windows 240] [--seed 4242] [--no-cache]

* ``argmax``: the agent as it plans (the first maximal valid logit at every step; ``agent.setpolicy.SetPolicy``).
* ``marginal T``: skip only when skip's probability over the valid actions is at least T; otherwise the best job
  action (the join-or-skip decision from its marginal, not from the largest of 257 logits).
* ``pointer T``: while a group is open, every queued job is scored *as if it were the current one* (its token
  flagged current) and the job most likely to join is chosen, when that probability is at least T; the queue is
  skipped round to it, or the group closed. A group opens with the first queued job. This is the decoding of a
  pointer action (docs/training.md) with a network trained for the walk over the queue.

No decoding here is the shipped agent: they are measurements for choosing the next design (docs/training.md).
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from agent_heldout import best_found, windows  # noqa: E402
from agent.policy import masked_probs  # noqa: E402
from agent.setnet import set_logits  # noqa: E402
from agent.setpolicy import SetPolicy  # noqa: E402
from env.plan.actions import SKIP  # noqa: E402
from env.episode.window import SET_TOKEN_NAMES  # noqa: E402
from env.sim.nodes import load_node  # noqa: E402
from training.evaluation import evaluate_model  # noqa: E402
from agent.modelfile import load_set_model  # noqa: E402
from training.policies import AgentPolicy  # noqa: E402


def best_job_action(logits: np.ndarray, mask: np.ndarray) -> int:
    m = mask.copy()
    m[SKIP] = False
    return int(np.argmax(np.where(m, logits, -np.inf)))


class Marginal:
    reads_obs = False

    def __init__(self, policy: SetPolicy, threshold: float) -> None:
        self.policy, self.threshold = policy, threshold

    def __call__(self, obs: Any, mask: np.ndarray, ep: Any) -> int:
        m = np.asarray(mask).astype(bool)
        logits = self.policy.logits(ep)
        if ep.schedule_index is None or not m[SKIP] or not m[:SKIP].any():
            return int(np.argmax(np.where(m, logits, -np.inf)))
        return SKIP if masked_probs(logits, m)[SKIP] >= self.threshold else best_job_action(logits, m)


class Pointer:
    reads_obs = False

    def __init__(self, policy: SetPolicy, threshold: float) -> None:
        self.policy, self.threshold = policy, threshold
        self.ep: Any = None
        self.target: int | None = None  # the slot being skipped round to; -1: closing the group

    def __call__(self, obs: Any, mask: np.ndarray, ep: Any) -> int:
        m = np.asarray(mask).astype(bool)
        if ep is not self.ep:
            self.ep, self.target = ep, None
        free = ep.schedule_index is not None and m[SKIP] and m[:SKIP].any()  # a real join-or-skip choice
        if free and ep.open_slots:
            if self.target is None:
                self.target = self.point(ep, m)
            if self.target == -1 or self.target != ep.queue[0]:
                return SKIP  # round to the chosen job, or through the queue to close the group
        self.target = None
        logits = self.policy.logits(ep)
        if not free:
            return int(np.argmax(np.where(m, logits, -np.inf)))
        return best_job_action(logits, m)  # the chosen job, or the first queued one opening a group

    def point(self, ep: Any, m: np.ndarray) -> int:
        """The queued job most likely to join the open group, or -1 (close) when none reaches the threshold."""
        s = ep.set_observation()
        f = s.tokens.shape[1] - len(SET_TOKEN_NAMES)  # the "current" flag is the first status value
        in_play = [x for x in range(len(ep.infos)) if ep.group_of[x] < 0 or ep.group_of[x] == ep.open_group_index]
        best, slot = -1.0, -1
        for q in ep.queue:
            tokens = s.tokens.copy()
            tokens[:, f] = 0.0
            i = in_play.index(q)
            tokens[i, f] = 1.0
            p_join = 1.0 - float(masked_probs(set_logits(self.policy.shape, self.policy.params, tokens, s.context, i), m)[SKIP])
            if p_join > best:
                best, slot = p_join, q
        return slot if best >= self.threshold else -1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(ROOT / "training" / "models" / "sim-reference.npz"))
    ap.add_argument("--windows", type=int, default=240)
    ap.add_argument("--seed", type=int, default=4242)
    ap.add_argument("--marginal", default="0.5,0.7", help="thresholds of the marginal decoding")
    ap.add_argument("--pointer", default="0.2,0.5", help="thresholds of the pointer decoding")
    ap.add_argument("--no-cache", action="store_true", help="search best-found afresh and do not store it")
    args = ap.parse_args()
    model = load_set_model(args.model)
    node = load_node(model.meta.trained_for.name)
    ws = windows(args.windows, args.seed)
    bf = np.array(best_found(node, ws, args.seed, use_cache=not args.no_cache))
    names = ["agent"]
    extra = {}
    for kind, cls, values in (("marginal", Marginal, args.marginal), ("pointer", Pointer, args.pointer)):
        for t in (float(x) for x in values.split(",") if x):
            name = f"{kind} {t:g}"

            def factory(cls: Any = cls, t: float = t) -> AgentPolicy:
                pol = AgentPolicy(model)
                pol.agent_chooser = lambda m: cls(SetPolicy(m), t)  # type: ignore[method-assign]
                return pol

            extra[name] = factory
            names.append(name)
    doc = evaluate_model(model, node, ws, names, extra=extra)
    print(f"{args.windows} held-out windows (seed {args.seed}; W 6, Cmax 4), the model's network decoded three ways, "
          f"as a share of best-found (simulated):")
    for name in names:
        r = np.array([w["results"][name]["throughput_vs_timeshare"] for w in doc["windows"]])
        print(f"  {'argmax (the agent)' if name == 'agent' else name:<20} {r.mean() / bf.mean() * 100:5.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
