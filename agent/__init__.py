"""The agent: masked discrete SAC and its model file. Imports nothing of ours (see architecture.md).

* ``agent.sac``: ``SACConfig``, ``Agent`` (act / explore / record / update / checkpoints / export_model),
  ``ReplayBuffer``, ``masked_policy``, ``run_episode``, ``train``. Needs torch.
* ``agent.modelfile``: ``write_model``, ``load_model``, ``ModelMeta``, ``NodeShape``, ``TrainedFor``. No torch.
* ``agent.policy``: ``ActorPolicy`` (numpy inference from a model file). No torch.
* ``agent.errors``: ``ModelFileError``.

This file imports nothing, so ``import agent.policy`` never pulls torch in.
"""
