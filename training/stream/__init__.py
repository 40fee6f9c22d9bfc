"""The stream learner: masked discrete SAC through ``cosched/CoScheduleStream-v0`` (``env.episode.stream_gym``), and
the stream policies that need its model (``agent``, ``agent-search``).

* ``training.stream.args``: ``Args``, every setting of a training run (tyro makes the command line of it).
* ``training.stream.streams``: the training and evaluation streams (saturated, Poisson arrivals at a share of
  packing's capacity).
* ``training.stream.replay``: the replay buffer of unpadded states and its padded batches.
* ``training.stream.teacher``: rollout's decisions as actions of the env (the behaviour-cloning warm start).
* ``training.stream.sac``: the training loop and ``python -m training.stream.sac``.
* ``training.stream.modelfile``: the stream model file (``cosched-stream-model/1``).
* ``training.stream.policy``: ``AgentStream`` (the learned policy alone) and ``AgentSearch`` (rollout guided by it,
  never below packing's predicted outcome).
* ``training.stream.ablation``: trained vs untrained vs greedy-continuous vs packing, agent-search vs rollout.
"""
