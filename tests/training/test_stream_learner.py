"""The stream learner: the numpy and torch networks agree, a tiny training run is reproducible from its seed and
writes a model that loads and decides every stream, agent-search never ends a saturated stream after packing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from agent.errors import ModelFileError
from agent.streamnet import stream_logits
from agent.streamnet_torch import StreamNet, collate
from env.episode.stream import run_stream
from env.episode.stream_gym import CoScheduleStreamEnv
from env.planners.streams import Packing
from env.sim.nodes import load_node
from training.stream.args import Args
from training.stream.modelfile import load_stream_model
from training.stream.policy import AgentSearch, AgentStream, stream_agents
from training.stream.replay import padded_mask
from training.stream.sac import main, net_shape
from training.stream.streams import saturated, with_arrivals

NODE = load_node("sim:reference")
TINY = dict(total_steps=40, windows=(4, 8), jobs=(5, 7), cmaxes=(2, 4), synthetic=4, teacher_streams=2,
            teacher_workers=0, bc_updates=4, dagger_rounds=1, dagger_streams=1, dagger_updates=2, batch_size=8, learning_starts=10, update_every=4, eval_every=40,
            eval_seeds=(200,), eval_cmaxes=(3,), eval_load=0.0, eval_jobs=6, d_model=8, heads=2, d_ff=8,
            d_head_hidden=8)


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, dict]:
    run = tmp_path_factory.mktemp("stream-run")
    figures = main(Args(**TINY), run, progress=False)
    return run, figures


def test_numpy_and_torch_networks_agree():
    env = CoScheduleStreamEnv(NODE, window=8)
    env.reset(options={"jobs": saturated(NODE, 12, 7), "max_concurrency": 3})
    rng, states = np.random.default_rng(0), []
    for _ in range(8):
        states.append(env.state())
        mask = env.action_masks()
        env.step(int(rng.choice(np.flatnonzero(mask))))
    shape = net_shape(Args(d_model=8, heads=2, d_ff=8, d_head_hidden=8), env.feats.d_token)
    torch.manual_seed(0)
    net = StreamNet(shape)
    params = net.export()
    batch = collate([(s.tokens, s.n_queue, s.context, s.options, s.pairs) for s in states], 8, 8)
    masks = torch.from_numpy(np.stack([padded_mask(s, 8) for s in states]))
    with torch.no_grad():
        dense, sparse = net(*batch).numpy(), net(*batch, masks).numpy()
    for i, s in enumerate(states):
        x = stream_logits(shape, params, s.tokens, s.n_queue, s.context, s.options, s.pairs)
        ref = np.concatenate([dense[i, :s.n_queue * 20], dense[i, -1:]])
        np.testing.assert_allclose(x, ref, atol=1e-4)
        m = masks[i].numpy()
        np.testing.assert_allclose(sparse[i][m], dense[i][m], atol=1e-5)  # the valid actions' logits are the same


def test_model_loads_and_decides_every_stream(trained):
    run, _ = trained
    model = load_stream_model(run / "model.npz")
    assert model.meta.trained_for.name == "sim:reference" and model.meta.trained_for.node_id
    jobs = saturated(NODE, 10, 3)
    for stream, cmax in ((jobs, 3), (with_arrivals(NODE, jobs, 2, 0.8, 3), 2)):
        out = run_stream(NODE, stream, cmax, AgentStream(model, 8))
        assert sorted(j.id for j in out.jobs) == sorted(j.id for j in stream)
        assert all(np.isfinite(j.end_s) for j in out.jobs)
    factories, refused = stream_agents(NODE, run / "model.npz")
    assert set(factories) == {"agent", "agent-search"} and not refused


def test_training_is_reproducible_from_its_seed(trained, tmp_path):
    run, figures = trained
    main(Args(**TINY), tmp_path, progress=False)
    a, b = load_stream_model(run / "model.npz"), load_stream_model(tmp_path / "model.npz")
    assert a.meta.model_id == b.meta.model_id
    assert load_stream_model(run / "untrained.npz").meta.model_id == load_stream_model(tmp_path / "untrained.npz").meta.model_id


def test_agent_search_never_ends_after_packing(trained):
    model = load_stream_model(trained[0] / "untrained.npz")  # the worst guide: the guard must still hold
    for seed, cmax in ((11, 4), (12, 3)):
        jobs = saturated(NODE, 10, seed)
        packed = run_stream(NODE, jobs, cmax, Packing()).makespan_s
        assert run_stream(NODE, jobs, cmax, AgentSearch(model, 8, top=2)).makespan_s <= packed * (1 + 1e-9)


def test_a_window_model_is_refused_in_one_line(tmp_path):
    bad = tmp_path / "x.npz"
    bad.write_bytes(b"not a model")
    with pytest.raises(ModelFileError, match="corrupt"):
        load_stream_model(bad)
    _, refused = stream_agents(NODE, "training/models/sim-reference.npz")
    assert "not a stream model" in refused["agent"] and "\n" not in refused["agent"]


def test_the_guard_predicts_packing_exactly(trained):
    """On a saturated stream packing's predicted makespan from the empty node is packing's makespan."""
    from env.episode.stream import StreamView
    from env.sim.stream import StreamNode
    from env.sim.world import world_for

    jobs = saturated(NODE, 9, 21)
    p = AgentSearch(load_stream_model(trained[0] / "model.npz"), 8)
    p.reset(NODE, jobs, 3)
    starts, predicted = p.packing_prediction(StreamView(StreamNode(NODE, world_for(NODE).params), list(jobs), 3, 0))
    assert len(starts) == 3
    assert predicted == pytest.approx(run_stream(NODE, jobs, 3, Packing()).makespan_s, rel=1e-12)


def test_the_marginal_imitation_loss_is_the_teachers_job_and_option_apart():
    from agent.sac import masked_policy
    from env.episode.stream_gym import N_OPTIONS as K
    from training.stream.sac import marginal_bc

    g = torch.Generator().manual_seed(3)
    logits = torch.randn(3, 2 * K + 1, generator=g)
    mask = torch.ones(3, 2 * K + 1, dtype=torch.bool)
    mask[1, K:2 * K] = False  # the second slot masked in the second state: its probability is 0 there
    p, lp = masked_policy(logits, mask)
    action = torch.tensor([K + 3, 5, 2 * K])  # slot 1 option 3; slot 0 option 5; "nothing" (left out)
    q = p[:, :2 * K].view(3, 2, K).double()
    want = -(np.log(q[0, 1].sum()) + np.log(q[0, :, 3].sum()) + np.log(q[1, 0].sum()) + np.log(q[1, :, 5].sum())) / 2
    assert float(marginal_bc(lp, mask, action)) == pytest.approx(float(want), rel=1e-5)
    # a label's job and option both certain: nothing to learn
    sure = torch.full((1, 2 * K + 1), -30.0)
    sure[0, K + 3] = 30.0
    _, lp1 = masked_policy(sure, torch.ones(1, 2 * K + 1, dtype=torch.bool))
    assert float(marginal_bc(lp1, torch.ones(1, 2 * K + 1, dtype=torch.bool), torch.tensor([K + 3]))) < 1e-6
    assert float(marginal_bc(lp, mask, torch.tensor([2 * K, 2 * K, 2 * K]))) == 0.0
