"""The agent: the set-encoder policy, masked discrete SAC's masked softmax, and the model file. Imports nothing of
ours (see docs/design/architecture.md).

* ``agent.setnet``: the set-encoder network in numpy (serving); ``agent.setnet_torch``: the same in torch (training).
* ``agent.setpolicy``: ``SetPolicy``, the chooser a planner uses. No torch.
* ``agent.sac``: ``masked_policy``, the masked softmax every training loss goes through. Needs torch.
* ``agent.policy``: ``masked_probs``, ``sample_valid`` (the numpy masked softmax and sampler). No torch.
* ``agent.modelfile``: ``write_set_model``, ``load_set_model`` (refuses the earlier MLP format ``cosched-model/1``
  in one line), ``TrainedFor``, ``NodeShape``. No torch.
* ``agent.errors``: ``ModelFileError``.

This file imports nothing, so ``import agent.policy`` never pulls torch in.
"""
