"""Inference benchmark of the agent's numpy policy (the path the service and `cosched schedule` use).

Prints, labelled: the time to choose every action of one W = 6 window (median and p90 over many windows,
one thread), one forward pass, the actor's weight bytes and the model file's size.

    .venv/bin/python bench/agent_bench.py [--model MODEL.npz] [--windows 2000] [--steps-per-window 13]

Without --model it writes a model of the paper's shape (obs 126 = 6 × 21, 3 × 256, 257 actions) with
random weights to a temporary file: timing does not depend on the weights' values.
"""

from __future__ import annotations

import os

# One thread for BLAS, set before numpy loads: the target is "under 2 ms on one core".
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.modelfile import write_model  # noqa: E402
from agent.policy import ActorPolicy, forward_logits  # noqa: E402


def random_model(path: Path, obs_size: int = 126, hidden: tuple[int, ...] = (256, 256, 256), n_actions: int = 257) -> None:
    rng = np.random.default_rng(0)
    sizes = [obs_size, *hidden, n_actions]
    layers = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        bound = 1.0 / np.sqrt(n_in)  # torch.nn.Linear's default scale
        layers.append((rng.uniform(-bound, bound, (n_out, n_in)).astype(np.float32), rng.uniform(-bound, bound, n_out).astype(np.float32)))
    write_model(
        path,
        layers,
        action_encoding="bench",
        window_size=6,
        max_concurrency=4,
        trained_for={"name": "bench", "node_id": "bench", "shape": {"cpus": 24, "numa_domains": 2, "l3_domains": 2}},
        feature_set="bench",
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, help="a model file (default: a random one of the paper's shape)")
    ap.add_argument("--windows", type=int, default=2000)
    ap.add_argument("--steps-per-window", type=int, default=13, help="agent decisions per W=6 window (1 schedule step + job steps with skips)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        path = args.model
        if path is None:
            path = Path(tmp) / "bench-model.npz"
            random_model(path)
        t0 = time.perf_counter()
        policy = ActorPolicy.from_file(path)
        load_ms = (time.perf_counter() - t0) * 1e3
        file_bytes = path.stat().st_size

    rng = np.random.default_rng(1)
    n_obs, n_act, S = policy.obs_size, policy.n_actions, args.steps_per_window
    obs = rng.uniform(-1, 1, (args.windows, S, n_obs)).astype(np.float32)
    masks = rng.random((args.windows, S, n_act)) < 0.3
    masks[..., n_act - 1] = True  # skip is always valid, like the environment's

    for w in range(min(50, args.windows)):  # warm-up
        for s in range(S):
            policy.act(obs[w, s], masks[w, s])
    per_window = np.empty(args.windows)
    for w in range(args.windows):
        t = time.perf_counter()
        for s in range(S):
            policy.act(obs[w, s], masks[w, s])
        per_window[w] = time.perf_counter() - t

    x = obs[0, 0]
    n_fwd = 20_000
    t = time.perf_counter()
    for _ in range(n_fwd):
        forward_logits(policy.layers, x)
    fwd_us = (time.perf_counter() - t) / n_fwd * 1e6

    print("agent inference benchmark (numpy policy, 1 BLAS thread)")
    print(f"  model                              : {args.model or 'random weights, paper shape'}  obs={n_obs} hidden={policy.meta.hidden_sizes} actions={n_act}")
    print(f"  time per W=6 window ({S} decisions) : median {np.median(per_window) * 1e3:.3f} ms, p90 {np.percentile(per_window, 90) * 1e3:.3f} ms over {args.windows} windows  (target < 2 ms)")
    print(f"  time per decision                  : median {np.median(per_window) / S * 1e6:.1f} µs (forward + mask + argmax)")
    print(f"  time per forward pass              : {fwd_us:.1f} µs (mean of {n_fwd})")
    print(f"  actor weights in memory            : {policy.weight_bytes} bytes = {policy.weight_bytes / 2**20:.2f} MiB float32  (target < 13 MiB)")
    print(f"  model file                         : {file_bytes} bytes; load + verify {load_ms:.1f} ms")


if __name__ == "__main__":
    main()
