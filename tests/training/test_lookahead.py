"""The lookahead phase (training.lookahead): a candidate's gain is the simulated node's score of the plan it leads
to, less the greedy plan's; the loss on a hand-made batch; rounds improve a poor actor on a tiny problem, the same
for any number of workers; cosched train runs the phase and a resumed run reuses it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from agent.modelfile import load_model
from agent.policy import MeanLogits
from env.episode import plan_window
from env.errors import InputError
from env.models import Window, WindowJob
from tiny_sim import NODE, random_actor
from training.lookahead import LookaheadConfig, improve, lookahead_loss, lookahead_states
from training.train import TrainConfig, train, validate



def test_a_candidates_gain_is_the_backends_score_of_its_plan_less_the_greedy_one(setup) -> None:
    obs_dim = setup.make_env(2).observation_space.shape[0]
    actor = random_actor(obs_dim, 4)
    forward = MeanLogits([actor])
    names = ["MG", "EP", "CG"]
    states = lookahead_states(setup, actor, [(names, 2)], 3, 3)
    obs, mask, gains = states[0]  # the first choice: the schedule action
    valid = np.flatnonzero(mask)
    ranked = valid[np.argsort(-forward(obs)[valid], kind="stable")]
    assert np.count_nonzero(mask) == 6 and gains[ranked[0]] == 0.0 and not gains[ranked[3:]].any()
    window = Window(jobs=[WindowJob(id=f"{k}-{n}", profile=n) for k, n in enumerate(names)], max_concurrency=2)
    solo = sum(setup.provider.get(n).solo_s for n in names)

    def score(first: int) -> float:
        def choose(o, m, ep):
            if ep.schedule_index is None:
                return first
            v = np.flatnonzero(m)
            return int(v[np.argmax(forward(o)[v])])

        plan = plan_window(window, NODE, setup.provider, choose, policy="x", window_size=3, obs_layout=setup.obs_layout).plan
        return solo / sum(setup.backend.evaluate(plan, seed=0))

    for c in ranked[1:3]:
        assert gains[c] == pytest.approx(score(int(c)) - score(int(ranked[0])), abs=1e-5)
    assert all(s[2].max() >= 0 and np.count_nonzero(s[1]) > 1 for s in states)


def test_the_loss_on_a_hand_made_batch() -> None:
    """loss = −mean_s Σ_c π(c|s)·gain(c)·scale, π the masked softmax of a one-layer net, by hand."""
    torch.manual_seed(1)
    net = torch.nn.Linear(2, 4)
    obs = np.array([[1.0, -1.0], [0.0, 2.0]], np.float32)
    masks = np.array([[1, 1, 0, 1], [1, 0, 1, 1]], bool)
    gains = np.array([[0.0, 0.2, 0.0, -0.1], [0.0, 0.0, 0.05, 0.0]], np.float32)
    W, b = net.weight.detach().numpy().astype(np.float64), net.bias.detach().numpy().astype(np.float64)
    by_hand = 0.0
    for o, m, g in zip(obs, masks, gains):
        z = np.where(m, W @ o + b, -np.inf)
        p = np.exp(z - z.max())
        by_hand -= float((p / p.sum() * g * 10.0).sum())
    by_hand /= 2
    got = lookahead_loss(net, torch.as_tensor(obs), torch.as_tensor(masks), torch.as_tensor(gains), 10.0)
    assert float(got.detach()) == pytest.approx(by_hand, rel=1e-5)


def test_rounds_improve_a_random_actor_and_are_the_same_for_any_workers(setup) -> None:
    obs_dim = setup.make_env(2).observation_space.shape[0]
    start = random_actor(obs_dim, 0)
    cfg = LookaheadConfig(rounds=3, windows=40, k=4, updates=150, lr=3e-3)

    def run(workers: int):
        return improve(start, setup, cfg, window_size=3, cmaxes=(2,), seed=2, workers=workers,
                       validate=lambda ls: validate(ls, setup, 3))

    kept, figs = run(1)
    assert [e["round"] for e in figs["evals"]] == [0, 1, 2, 3]
    assert figs["kept_validation"] > figs["start_validation"] + 0.2, figs["evals"]
    assert validate(kept, setup, 3)["agent"] == pytest.approx(figs["kept_validation"])
    again, _ = run(2)
    for (w1, b1), (w2, b2) in zip(kept, again):
        assert np.array_equal(w1, w2) and np.array_equal(b1, b2)


def test_cosched_train_runs_the_phase_and_a_resumed_run_reuses_it(tmp_path: Path) -> None:
    cfg = TrainConfig(steps=40, seed=3, window_size=2, cmax=(2,), jobs=("EP", "MG"), eval_every=40, n_validation=2,
                      checkpoint_every=40, sac=dict(hidden_sizes=[32, 32], learning_starts=20, batch_size=16),
                      finetune_windows=8, finetune_samples=4, lookahead_rounds=2, lookahead_windows=6, lookahead_updates=5)
    res = train(cfg, tmp_path / "run", tmp_path / "m.npz", progress=False, final_eval=False)
    figs = load_model(tmp_path / "m.npz").meta.training["figures"]
    assert figs["lookahead"]["rounds"] == 2 and len(figs["lookahead"]["evals"]) == 3
    assert res.figures["selected"]["agent"] == figs["lookahead"]["kept_validation"]
    assert (tmp_path / "run" / "lookahead.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    tuned = np.load(tmp_path / "run" / "lookahead-actor.npz")
    assert np.array_equal(load_model(tmp_path / "m.npz").layers[0][0], tuned["0.w"])
    (tmp_path / "run" / "lookahead.jsonl").unlink()  # a resumed run does not play the phase again
    again = train(cfg, tmp_path / "run", tmp_path / "m2.npz", resume=True, progress=False, final_eval=False)
    assert again.figures["lookahead"] == figs["lookahead"]
    assert not (tmp_path / "run" / "lookahead.jsonl").exists()


def test_bad_lookahead_settings_are_refused() -> None:
    with pytest.raises(InputError, match="for --backend sim"):
        TrainConfig(backend="real", lookahead_rounds=2)
    with pytest.raises(InputError, match="--lookahead-k at least 2"):
        TrainConfig(lookahead_rounds=2, lookahead_k=1)
    with pytest.raises(InputError, match="keep distillation on"):
        TrainConfig(lookahead_rounds=2, ensemble=2, distill_updates=0)
