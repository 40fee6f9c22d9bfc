"""Masked discrete SAC: losses by hand, masking (never sampled, no NaN), the replay buffer."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from agent.policy import sample_valid
from agent.sac import Agent, Batch, ReplayBuffer, SACConfig, masked_policy

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)


def constant_agent(logits: list[float], q1: list[float], q2: list[float], **cfg: object) -> Agent:
    """An agent whose networks ignore the observation: last layer weights 0, biases = the given vectors.
    Every quantity of the losses is then a hand-computable function of these numbers."""
    n = len(logits)
    agent = Agent(2, SACConfig(n_actions=n, hidden_sizes=(3,), **cfg))  # type: ignore[arg-type]
    with torch.no_grad():
        for net, bias in ((agent.actor, logits), (agent.q1, q1), (agent.q2, q2), (agent.q1_target, q1), (agent.q2_target, q2)):
            last = net.net[-1]
            last.weight.zero_()
            last.bias.copy_(torch.tensor(bias))
    return agent


def test_losses_on_a_hand_made_batch_equal_values_computed_by_hand() -> None:
    L = [0.5, -1.0, 2.0, 0.0]
    Q1 = [1.0, 2.0, 3.0, 4.0]
    Q2 = [1.5, 1.0, 3.5, 3.0]
    alpha, gamma, ratio = 0.2, 0.9, 0.5
    agent = constant_agent(L, Q1, Q2, gamma=gamma, initial_alpha=alpha, target_entropy_ratio=ratio)
    batch = Batch(
        obs=np.array([[0.3, -1.0], [2.0, 0.5]], np.float32),
        mask=np.array([[1, 1, 0, 1], [1, 1, 0, 1]], bool),
        action=np.array([1, 3]),
        reward=np.array([1.0, -0.5], np.float32),
        next_obs=np.array([[1.0, 1.0], [0.0, 0.0]], np.float32),
        next_mask=np.array([[0, 1, 1, 0], [0, 0, 0, 0]], bool),  # row 1: terminal, no valid action at all
        terminated=np.array([0.0, 1.0], np.float32),
    )
    out = {k: float(v.detach()) for k, v in agent.losses(batch).items()}

    qmin = [min(a, b) for a, b in zip(Q1, Q2)]  # [1, 1, 3, 3]
    # Row 0's next state: valid {1, 2}, p ∝ (e^-1, e^2).
    z = math.exp(-1.0) + math.exp(2.0)
    p1, p2 = math.exp(-1.0) / z, math.exp(2.0) / z
    v_next = p1 * (qmin[1] - alpha * math.log(p1)) + p2 * (qmin[2] - alpha * math.log(p2))
    t0 = 1.0 + gamma * v_next
    t1 = -0.5  # terminated: no bootstrap
    assert out["q1_loss"] == pytest.approx(((Q1[1] - t0) ** 2 + (Q1[3] - t1) ** 2) / 2, rel=1e-6)
    assert out["q2_loss"] == pytest.approx(((Q2[1] - t0) ** 2 + (Q2[3] - t1) ** 2) / 2, rel=1e-6)
    assert out["critic_loss"] == pytest.approx(out["q1_loss"] + out["q2_loss"], rel=1e-6)

    # Current state (both rows): valid {0, 1, 3}, p ∝ (e^0.5, e^-1, e^0).
    zs = math.exp(0.5) + math.exp(-1.0) + math.exp(0.0)
    ps = {0: math.exp(0.5) / zs, 1: math.exp(-1.0) / zs, 3: 1.0 / zs}
    actor = sum(p * (alpha * math.log(p) - qmin[a]) for a, p in ps.items())
    assert out["actor_loss"] == pytest.approx(actor, rel=1e-6)
    entropy = -sum(p * math.log(p) for p in ps.values())
    assert out["entropy"] == pytest.approx(entropy, rel=1e-6)
    target_entropy = ratio * math.log(3)
    assert out["target_entropy"] == pytest.approx(target_entropy, rel=1e-6)
    assert out["alpha_loss"] == pytest.approx(math.log(alpha) * (entropy - target_entropy), rel=1e-6)


def test_losses_match_a_numpy_recomputation_from_the_network_outputs() -> None:
    rng = np.random.default_rng(3)
    agent = Agent(5, SACConfig(n_actions=257, hidden_sizes=(16, 16, 16), gamma=0.97, initial_alpha=0.3, target_entropy_ratio=0.7))
    B = 32
    mask = rng.random((B, 257)) < 0.05
    mask[np.arange(B), rng.integers(0, 257, B)] = True
    next_mask = rng.random((B, 257)) < 0.05
    next_mask[:, 5] = True
    next_mask[0] = False  # a terminal next state with no valid action
    mask[1] = False
    mask[1, 7] = True  # a forced step
    action = np.array([rng.choice(np.flatnonzero(m)) for m in mask])
    batch = Batch(
        obs=rng.standard_normal((B, 5)).astype(np.float32),
        mask=mask,
        action=action,
        reward=rng.standard_normal(B).astype(np.float32),
        next_obs=rng.standard_normal((B, 5)).astype(np.float32),
        next_mask=next_mask,
        terminated=(rng.random(B) < 0.3).astype(np.float32),
    )
    batch.terminated[0] = 1.0
    out = {k: float(v.detach()) for k, v in agent.losses(batch).items()}

    def np_out(net: torch.nn.Module, x: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return net(torch.as_tensor(x)).numpy().astype(np.float64)

    def softmax_masked(logits: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = np.zeros_like(logits)
        logp = np.zeros_like(logits)
        for i in range(len(logits)):
            if m[i].any():
                z = logits[i][m[i]]
                lse = z.max() + np.log(np.exp(z - z.max()).sum())
                logp[i][m[i]] = z - lse
                p[i][m[i]] = np.exp(z - lse)
        return p, logp

    a, g = 0.3, 0.97
    pn, lpn = softmax_masked(np_out(agent.actor, batch.next_obs), next_mask)
    qn = np.minimum(np_out(agent.q1_target, batch.next_obs), np_out(agent.q2_target, batch.next_obs))
    target = batch.reward + g * (1 - batch.terminated) * (pn * (qn - a * lpn)).sum(1)
    q1, q2 = np_out(agent.q1, batch.obs), np_out(agent.q2, batch.obs)
    assert out["q1_loss"] == pytest.approx(np.mean((q1[np.arange(B), action] - target) ** 2), rel=1e-5)
    assert out["q2_loss"] == pytest.approx(np.mean((q2[np.arange(B), action] - target) ** 2), rel=1e-5)
    p, lp = softmax_masked(np_out(agent.actor, batch.obs), mask)
    assert out["actor_loss"] == pytest.approx(np.mean((p * (a * lp - np.minimum(q1, q2))).sum(1)), rel=1e-5, abs=1e-6)
    H = -(p * lp).sum(1)
    tgt = 0.7 * np.log(mask.sum(1))
    assert out["alpha_loss"] == pytest.approx(np.log(a) * np.mean(H - tgt), rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("case", ["one_valid", "all_valid", "none_valid", "huge_logits"])
def test_no_nan_with_extreme_masks(case: str) -> None:
    n = 257
    logits = torch.randn(4, n, requires_grad=True)
    mask = torch.zeros(4, n, dtype=torch.bool)
    if case == "one_valid":
        mask[:, 42] = True
    elif case == "all_valid":
        mask[:] = True
    elif case == "huge_logits":
        mask[:, ::3] = True
        logits = (torch.randn(4, n) * 1e6).requires_grad_(True)
    probs, logp = masked_policy(logits, mask)
    q = torch.randn(4, n) * 100
    loss = (probs * (0.2 * logp - q)).sum(-1).mean() + (probs * logp).sum()
    loss.backward()
    assert torch.isfinite(probs).all() and torch.isfinite(logp).all() and torch.isfinite(loss)
    assert logits.grad is not None and torch.isfinite(logits.grad).all()
    assert (probs[~mask] == 0).all() and (logp[~mask] == 0).all()
    if case == "one_valid":
        assert (probs[:, 42] == 1).all() and (logp[:, 42] == 0).all()
        assert (logits.grad == 0).all()  # a forced choice teaches the actor nothing
    if case == "none_valid":
        assert (probs == 0).all()
    else:
        assert torch.allclose(probs.sum(-1), torch.ones(4))


def test_update_with_extreme_masks_stays_finite() -> None:
    agent = Agent(6, SACConfig(hidden_sizes=(32, 32, 32), batch_size=8))
    rng = np.random.default_rng(0)
    for i in range(8):
        m = np.zeros(257, bool)
        if i % 2:
            m[:] = True
        else:
            m[rng.integers(257)] = True
        nm = np.zeros(257, bool) if i % 3 == 0 else np.ones(257, bool)
        agent.buffer.add(rng.standard_normal(6).astype(np.float32), m, int(np.flatnonzero(m)[0]), 1e3, rng.standard_normal(6).astype(np.float32), nm, i % 3 == 0)
    for _ in range(5):
        figs = agent.update(agent.buffer.sample(8, agent.rng))
        assert all(math.isfinite(v) for v in figs.values()), figs
    for p in agent.actor.parameters():
        assert torch.isfinite(p).all()


def test_masked_actions_are_never_sampled() -> None:
    agent = Agent(4, SACConfig(hidden_sizes=(8, 8, 8), seed=5))
    # Make the masked actions the ones the network likes most: masking must not rely on small logits.
    mask = np.zeros(257, bool)
    mask[[1, 3, 99, 255, 256]] = True
    with torch.no_grad():
        agent.actor.net[-1].bias[:] = torch.where(torch.as_tensor(mask), 0.0, 50.0)
    obs = np.array([0.1, -0.2, 0.3, 0.4], np.float32)
    p = agent.probs(obs, mask)
    assert (p[~mask] == 0).all() and p[mask].sum() == pytest.approx(1.0, abs=1e-6)
    rng = np.random.default_rng(0)
    draws = np.array([sample_valid(p, mask, rng) for _ in range(100_000)])
    assert mask[draws].all()
    freq = np.bincount(draws, minlength=257) / draws.size
    assert np.abs(freq - p).max() < 0.01  # and it samples the policy, not something else
    acts = {agent.act(obs, mask) for _ in range(2_000)}
    assert acts <= {1, 3, 99, 255, 256} and len(acts) > 1
    assert agent.act(obs, mask, deterministic=True) == int(np.flatnonzero(mask)[np.argmax(p[mask])])
    # Exploration before learning_starts: uniform over the valid actions only.
    assert {agent.explore(obs, mask) for _ in range(2_000)} == {1, 3, 99, 255, 256}


def test_sample_valid_never_returns_a_masked_action_even_with_bad_probabilities() -> None:
    rng = np.random.default_rng(1)
    mask = np.zeros(257, bool)
    mask[[10, 20]] = True
    bogus = np.ones(257, np.float32)  # probabilities that ignore the mask
    assert {sample_valid(bogus, mask, rng) for _ in range(10_000)} == {10, 20}
    zeros = np.zeros(257, np.float32)  # every valid probability underflowed
    assert {sample_valid(zeros, mask, rng) for _ in range(1_000)} == {10, 20}
    with pytest.raises(ValueError):
        sample_valid(bogus, np.zeros(257, bool), rng)


def test_replay_buffer_stores_next_masks_and_wraps() -> None:
    buf = ReplayBuffer(3, obs_dim=2, n_actions=5)
    for i in range(4):
        m = np.zeros(5, np.int8)
        m[i % 5] = 1
        nm = np.zeros(5, np.int8)
        nm[(i + 1) % 5] = 1
        buf.add(np.full(2, i, np.float32), m, i % 5, float(i), np.full(2, i + 1, np.float32), nm, i == 3)
    assert len(buf) == 3 and buf.pos == 1
    assert buf.obs[0, 0] == 3 and buf.next_mask[0, 4] and buf.terminated[0] == 1.0  # slot 0 overwritten by step 3
    b = buf.sample(50, np.random.default_rng(0))
    assert b.mask[np.arange(50), b.action].all()
    assert (b.next_mask.argmax(1) == (b.action + 1) % 5).all()
    with pytest.raises(ValueError, match="masked"):
        buf.add(np.zeros(2, np.float32), np.array([1, 0, 0, 0, 0]), 2, 0.0, np.zeros(2, np.float32), np.zeros(5), False)


def test_config_round_trips_and_rejects_nonsense() -> None:
    cfg = SACConfig(seed=9, hidden_sizes=(64, 32), target_entropy_ratio=0.4)
    assert SACConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="gamma"):
        SACConfig(gamma=1.5)
    with pytest.raises(ValueError, match="buffer_size >= batch_size"):
        SACConfig(buffer_size=10, batch_size=64)
