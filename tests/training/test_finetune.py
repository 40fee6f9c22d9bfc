"""Fine-tuning (training.finetune): its episode score is the simulated node's score of the same plan; policy
gradient improves a poor actor on a tiny problem; the same seed gives the same actor; cosched train runs it."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch

from agent.modelfile import load_model
from env.baselines import GroupEvaluator
from env.episode import plan_window
from env.models import Window, WindowJob
from tiny_sim import NODE, random_actor
from training.finetune import FinetuneConfig, _rollouts, episode_throughput, finetune, pg_loss
from training.train import TrainConfig, train, validate



def test_episode_throughput_is_the_backends_score_of_the_plan(setup) -> None:
    """The score fine-tuning learns from equals the sim backend's evaluation of the plan the episode builds
    (random valid actions, so skips, several groups and every schedule appear)."""
    ev = GroupEvaluator(NODE)
    rng = random.Random(5)
    names = ["EP", "MG", "CG", "FT", "fft", "lu_cb"]
    for trial in range(12):
        rng.shuffle(names)
        window = Window(jobs=[WindowJob(id=f"{k}-{n}", profile=n) for k, n in enumerate(names)], max_concurrency=3)

        def choose(obs, mask, ep):
            return rng.choice(list(np.flatnonzero(mask)))

        wp = plan_window(window, NODE, setup.provider, choose, policy="x", window_size=6, obs_layout=setup.obs_layout)
        solo = sum(setup.provider.get(n).solo_s for n in names)
        backend = solo / sum(setup.backend.evaluate(wp.plan, seed=0))
        assert episode_throughput(wp.episodes[0], ev) == pytest.approx(backend, rel=1e-9)


def test_policy_gradient_improves_a_random_actor_and_is_seeded(setup) -> None:
    """From a random actor (below time sharing on this tiny problem), 300 windows of fine-tuning raise the
    validation mean by more than 0.2 (simulated); a second run with the same seed, its episodes played by two
    worker processes, gives the same weights."""
    obs_dim = setup.make_env(2).observation_space.shape[0]
    start = random_actor(obs_dim, 0)
    cfg = FinetuneConfig(windows=300, samples=8, lr=1e-2, eval_every=50)

    def run(workers: int):
        return finetune(start, setup, cfg, window_size=3, cmaxes=(2,), seed=1, workers=workers,
                        validate=lambda ls: validate(ls, setup, 3))

    kept, figs = run(1)
    assert figs["start_validation"] < 1.0
    assert figs["kept_validation"] > figs["start_validation"] + 0.2
    assert figs["kept_at_windows"] == 300 and len(figs["evals"]) == 7  # the final actor
    assert validate(kept, setup, 3)["agent"] == pytest.approx(figs["kept_validation"])
    again, _ = run(2)
    for (w1, b1), (w2, b2) in zip(kept, again):
        assert np.array_equal(w1, w2) and np.array_equal(b1, b2)


def test_the_loss_on_a_hand_made_batch() -> None:
    """pg_loss = (−Σ A·log π(a|s) over the steps − (E / windows) · Σ_windows Σ_r max(0, A(r))·log π(r|s₀)) / E, with π
    the masked softmax: computed by hand on a one-layer net."""
    torch.manual_seed(0)
    net = torch.nn.Linear(3, 5)
    obs = np.array([[1.0, 0.0, 2.0], [0.5, -1.0, 0.0]], np.float32)
    masks = np.array([[1, 1, 0, 1, 0], [0, 1, 1, 1, 1]], bool)
    acts, advs = np.array([3, 2]), np.array([0.5, -2.0], np.float32)
    r_obs = np.array([[0.0, 1.0, 1.0]], np.float32)
    r_mask = np.array([[1, 1, 1, 0, 0]], bool)
    r_adv = np.array([[0.3, 0.0, -0.3, 0.0, 0.0]], np.float32)
    W, b = net.weight.detach().numpy().astype(np.float64), net.bias.detach().numpy().astype(np.float64)

    def softmax(x, m):
        z = np.where(m, x @ W.T + b, -np.inf)
        e = np.exp(z - z.max())
        return e / e.sum()

    episodes = 4
    by_hand = -sum(advs[i] * np.log(softmax(obs[i], masks[i])[acts[i]]) for i in range(2))
    pi0 = softmax(r_obs[0], r_mask[0])
    by_hand -= episodes / 1 * float(0.3 * np.log(pi0[0]))  # only the positive advantage counts
    by_hand /= episodes
    t = torch.as_tensor
    steps = (t(obs), t(masks), t(acts), t(advs))
    got = pg_loss(net, steps, (t(r_obs), t(r_mask), t(r_adv)), episodes)
    assert float(got.detach()) == pytest.approx(by_hand, rel=1e-5)
    assert float(pg_loss(net, steps, None, episodes).detach()) == pytest.approx(-sum(
        advs[i] * np.log(softmax(obs[i], masks[i])[acts[i]]) for i in range(2)) / episodes, rel=1e-5)


def test_roots_play_every_window_from_each_schedule_action(setup) -> None:
    """With roots, a window's episodes start from each root in equal numbers; the root step is not among the
    recorded ones, and each episode's score is that of the plan it built under that schedule."""
    obs_dim = setup.make_env(2).observation_space.shape[0]
    actor = random_actor(obs_dim, 2)
    items = [(1, ["EP", "MG", "CG"], 2), (2, ["MG", "MG", "EP"], 2)]
    played = _rollouts(setup, (actor, items, 6, 3, 3, (0, 3, 5)))
    for rolls in played:
        assert [r[0] for r in rolls] == [0, 0, 3, 3, 5, 5]
        for root, thr, obs, masks, acts in rolls:
            assert all(a >= 6 for a in acts) and all(not m[:6].any() for m in masks)  # job-level steps only
            assert 0.2 < thr < 3.0
    with pytest.raises(ValueError, match="multiple of their number"):
        FinetuneConfig(samples=5, roots=(0, 3))


def test_fine_tuning_from_each_root_improves_and_is_seeded(setup) -> None:
    """With roots (0, 3), fine-tuning a random actor raises its validation by more than 0.2 (simulated), records the
    roots, and gives the same weights with two worker processes."""
    obs_dim = setup.make_env(2).observation_space.shape[0]
    start = random_actor(obs_dim, 0)
    cfg = FinetuneConfig(windows=300, samples=8, lr=1e-2, eval_every=100, roots=(0, 3))

    def run(workers: int):
        return finetune(start, setup, cfg, window_size=3, cmaxes=(2,), seed=1, workers=workers,
                        validate=lambda ls: validate(ls, setup, 3))

    kept, figs = run(1)
    assert figs["roots"] == [0, 3] and figs["episodes"] == 2400
    assert figs["kept_validation"] > figs["start_validation"] + 0.2
    again, _ = run(2)
    for (w1, b1), (w2, b2) in zip(kept, again):
        assert np.array_equal(w1, w2) and np.array_equal(b1, b2)


def test_cosched_train_fine_tunes_the_final_actor(tmp_path: Path) -> None:
    """--finetune-windows through train(): the model holds the fine-tuned actor and the phase's figures; a resumed
    run reuses the finished phase."""
    cfg = TrainConfig(steps=60, seed=3, window_size=2, cmax=(2,), jobs=("EP", "MG"), eval_every=60, n_validation=2,
                      checkpoint_every=60, sac=dict(hidden_sizes=[32, 32], learning_starts=30, batch_size=16),
                      finetune_windows=40, finetune_samples=4, finetune_lr=1e-3)
    res = train(cfg, tmp_path / "run", tmp_path / "m.npz", progress=False, final_eval=False)
    figs = load_model(tmp_path / "m.npz").meta.training["figures"]
    assert figs["finetune"]["episodes"] == 160 and figs["finetune"]["windows"] == 40
    assert res.figures["selected"]["agent"] == figs["finetune"]["kept_validation"]
    assert (tmp_path / "run" / "finetune.jsonl").read_text().count("\n") >= 1
    assert (tmp_path / "run" / "finetuned-actor.npz").exists()
    assert (tmp_path / "run" / "finetune.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_fine_tuning_settings_are_refused() -> None:
    from env.errors import InputError

    with pytest.raises(InputError, match="--finetune-samples at least 2"):
        TrainConfig(finetune_windows=10, finetune_samples=1)
    with pytest.raises(InputError, match="for --backend sim"):
        TrainConfig(backend="real", finetune_windows=10)
    with pytest.raises(InputError, match="multiple of 2, at least 4"):
        TrainConfig(finetune_windows=10, finetune_samples=3, finetune_roots="expert")
    with pytest.raises(InputError, match="--finetune-roots takes one of"):
        TrainConfig(finetune_windows=10, finetune_roots="every")


def test_an_ensemble_without_distillation_ships_its_fine_tuned_actors(tmp_path: Path) -> None:
    """--ensemble 2 --distill-updates 0 --finetune-windows: the model file holds both actors, each fine-tuned on
    its own seed (the phase's figures per member), and the planner averages them; the run's selected figure is
    the ensemble's validation mean."""
    cfg = TrainConfig(steps=40, seed=3, window_size=2, cmax=(2,), jobs=("EP", "MG"), eval_every=40, n_validation=2,
                      checkpoint_every=40, sac=dict(hidden_sizes=[32, 32], learning_starts=20, batch_size=16),
                      ensemble=2, distill_updates=0, finetune_windows=16, finetune_samples=4, finetune_lr=1e-3)
    res = train(cfg, tmp_path / "run", tmp_path / "m.npz", progress=False, final_eval=False)
    m = load_model(tmp_path / "m.npz")
    assert len(m.actors) == 2
    figs = m.meta.training["figures"]
    assert figs["distillation"] is None and len(figs["finetune"]) == 2 and figs["actors"] == 2
    for k, member in enumerate(m.actors):
        kept = load_model(tmp_path / "run" / "members" / str(k) / "model.npz")  # the member before fine-tuning
        tuned = np.load(tmp_path / "run" / "members" / str(k) / "finetuned-actor.npz")
        assert np.array_equal(np.asarray(member[0][0]), tuned["0.w"])
        assert kept.layers[0][0].shape == member[0][0].shape
    assert res.figures["selected"]["agent"] == figs["ensemble_validation"]["agent"]
