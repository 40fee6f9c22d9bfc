"""Every setting of a stream-learner run (``python -m training.stream.sac``; tyro makes the command line of ``Args``)."""

from __future__ import annotations

from dataclasses import dataclass

from env.episode.stream_gym import MAX_RUNNING, MAX_WINDOW


@dataclass
class Args:
    """Every setting of a training run (saved in RUN/args.json and in the model file)."""

    node: str = "sim:reference"  # sim:NAME or sim:FILE (a node-model file)
    seed: int = 1  # the networks', the streams' and the replay samples' seed
    total_steps: int = 2_000  # env steps of SAC after the warm start (one step: one start or "nothing")
    windows: tuple[int, ...] = (4, 8, 16, 32)  # W of the training episodes: uniform among these
    jobs: tuple[int, int] = (24, 48)  # jobs per training stream: uniform in [lo, hi]
    cmaxes: tuple[int, ...] = (1, 2, 3, 4)
    arrival_share: float = 0.5  # share of training streams with Poisson arrivals (the others saturated)
    loads: tuple[float, float] = (0.6, 1.0)  # their load, x packing's capacity: uniform in [lo, hi]
    synthetic: int = 48  # generated programs beside the node's training programs (env.sim.synthetic)
    # the warm start: ``teacher_streams`` training streams decided by rollout (W ``teacher_window``) in
    # ``teacher_workers`` processes; their transitions join the replay buffer and a demonstration buffer that the
    # actor imitates for ``bc_updates`` updates, then with weight ``bc_coef`` beside SAC's actor loss. 0: SAC alone
    teacher_streams: int = 128
    teacher_window: int = 8
    teacher_workers: int = 2
    bc_updates: int = 3_000
    dagger_rounds: int = 1  # then: the actor decides, rollout labels the states it visits (DAgger)
    dagger_streams: int = 32
    dagger_updates: int = 1_000
    lr_warm: float = 5e-4  # the actor's learning rate while it imitates
    bc_coef: float = 5.0
    bc_marginal: float = 1.0  # weight of the imitation loss of the teacher's job and option apart (marginal_bc)
    reward_scale: float = 10.0  # the return is -reward_scale x metric / metric_scale (env.episode.stream_gym)
    gamma: float = 0.995
    tau: float = 0.005
    lr_actor: float = 3e-4
    lr_critic: float = 3e-4
    lr_alpha: float = 3e-4
    batch_size: int = 64
    buffer_size: int = 30_000
    learning_starts: int = 500  # SAC steps before updates (after the warm start)
    update_every: int = 2
    target_entropy_ratio: float = 0.05  # α's target: this x log(number of valid actions)
    initial_alpha: float = 0.01
    d_model: int = 32
    heads: int = 4
    layers: int = 2
    d_ff: int = 64
    d_head_hidden: int = 64
    eval_every: int = 1_000  # validate (greedy actor vs greedy-continuous on the validation streams) every this many steps
    eval_seeds: tuple[int, ...] = (200, 201, 202, 203)  # validation streams (never 101-108: those are held out)
    eval_cmaxes: tuple[int, ...] = (2, 3, 4)
    eval_load: float = 0.8  # and each with arrivals at this load (0: saturated only)
    eval_window: int = 8
    eval_jobs: int = 48  # jobs per validation stream

    def __post_init__(self) -> None:
        if not self.windows or not all(1 <= w <= MAX_WINDOW for w in self.windows):
            raise ValueError(f"--windows {self.windows}: each in 1..{MAX_WINDOW}")
        if not self.cmaxes or not all(1 <= c <= MAX_RUNNING for c in self.cmaxes):
            raise ValueError(f"--cmaxes {self.cmaxes}: each in 1..{MAX_RUNNING}")
        if not 1 <= self.jobs[0] <= self.jobs[1]:
            raise ValueError(f"--jobs {self.jobs}: need 1 <= lo <= hi")
        if set(self.eval_seeds) & set(range(101, 109)):
            raise ValueError("--eval-seeds: 101-108 are the held-out streams of the ablation; choose others (200+)")
        if not 0.0 <= self.arrival_share <= 1.0 or not 0.0 < self.loads[0] <= self.loads[1]:
            raise ValueError(f"--arrival-share {self.arrival_share} in [0, 1] and --loads {self.loads} > 0, lo <= hi")
        if min(self.teacher_workers, self.teacher_streams, self.bc_updates,
               self.dagger_rounds, self.dagger_streams, self.dagger_updates) < 0 or self.bc_marginal < 0:
            raise ValueError("--teacher-streams, --teacher-workers, --bc-updates, --bc-marginal "
                             "and the --dagger-* settings must be >= 0")

    @property
    def max_window(self) -> int:
        return max(max(self.windows), self.teacher_window, self.eval_window)


__all__ = ["Args"]
