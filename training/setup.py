"""What a training run trains on: the node, the backend, the job information, the windows and the gymnasium
environment it plays (``env.episode.gym_env.SetCoScheduleEnv``); ``play``: one episode through it.

* ``--backend sim``: the simulated node, its catalogue, the training jobs (default: the paper's 12;
  ``TRAIN_JOBS``; ``--synthetic-jobs N`` adds N generated ones), the feature pipeline fitted on them (``env.episode.jobinfo.sim_provider``). Validation windows are
  drawn, seeded, from the whole catalogue (held-out jobs included) and differ from ``training/eval_windows.json``.
* ``--backend real``: this node (``local``), the jobs of a window document (default ``examples/window.json``),
  their profiles on this node (profiled first when missing), a pipeline fitted on those profiles, and
  ``env.real.backend.RealBackend`` (groups executed for real; measured identical configurations reused and
  counted as reused). The gym env is the same one, its window jobs given their commands.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from agent.policy import masked_probs, sample_valid
from agent.setnet import SetNetShape, set_logits
from env.episode.gym_env import GroupCost, SetCoScheduleEnv, set_state
from env.episode.jobinfo import JobInfoProvider, ProfileProvider, sim_provider
from env.episode.window import Episode
from env.errors import InputError
from env.node.spec import NodeSpec
from env.plan.models import Window, WindowJob
from env.sim.backend import Backend, SimBackend

Args = Any  # the run's settings: training.set_sac.Args (not imported: set_sac imports this module)

DEFAULT_REAL_WINDOW = Path(__file__).resolve().parent.parent / "examples" / "window.json"
VALIDATION_SEED = 7_070_707  # not the standard evaluation file's seed: validation never sees those windows


@dataclass
class Setup:
    node: NodeSpec
    backend: Backend
    provider: JobInfoProvider
    jobs: list[str]  # training job (profile) names
    validation: list[Window]  # windows for the periodic evaluation
    make_env: Callable[..., SetCoScheduleEnv]  # (windows=(lo, hi), cmaxes, reward_scale, group_cost) -> the env
    pipeline: Any  # the fitted FeaturePipeline saved with the model
    trained_for_name: str
    extra: dict[str, Any] = field(default_factory=dict)


def _windows(names: Sequence[Sequence[str]], cmaxes: Sequence[int], commands: dict[str, WindowJob] | None = None) -> list[Window]:
    out = []
    for i, ns in enumerate(names):
        jobs = [commands[n].model_copy(update={"id": f"v{i}-{k}-{n}"}) if commands else WindowJob(id=f"v{i}-{k}-{n}", profile=n)
                for k, n in enumerate(ns)]
        out.append(Window(jobs=jobs, max_concurrency=cmaxes[i % len(cmaxes)]))
    return out


def sim_setup(node: NodeSpec, *, window_size: int, cmaxes: Sequence[int], jobs: Sequence[str] | None,
              n_validation: int, reward: Any, synthetic: tuple[int, int] = (0, 0)) -> Setup:
    """``synthetic`` = (n, seed): n generated jobs (``env.sim.synthetic``) join the training jobs, which are
    listed often enough to keep about half of a window's slots (windows are drawn from ``Setup.jobs``): queues
    hold known programs *and* new ones, so training windows do too. The feature pipeline stays fitted on the
    paper's 12, so a model scales features as the planner does."""
    from env.sim.synthetic import synthetic_names
    from env.sim.world import world_for

    world = world_for(node)  # a node model's jobs when --node names one, else the paper's catalogue
    ALL_JOBS, HELD_OUT_JOBS, TRAIN_JOBS = world.all_jobs, world.held_out_jobs, world.train_jobs

    train = list(jobs) if jobs else list(TRAIN_JOBS)
    if synthetic[0]:
        train = train * max(1, round(synthetic[0] / len(train))) + synthetic_names(*synthetic)
    provider = sim_provider(node, tuple(TRAIN_JOBS))  # the planner's provider (service.planning): same scaling
    for n in dict.fromkeys(train):
        if provider.get(n) is None:
            raise InputError(provider.missing_reason(n))
    backend = SimBackend(node)
    rng = random.Random(VALIDATION_SEED + window_size)
    names: list[list[str]] = []
    pool = list(ALL_JOBS) if not jobs else list(jobs)
    while len(names) < n_validation:
        w = rng.sample(pool, min(window_size, len(pool)))
        if jobs or not HELD_OUT_JOBS or any(n in HELD_OUT_JOBS for n in w):  # a node model may hold none
            names.append(w)

    def make_env(windows: tuple[int, int], cmaxes: Sequence[int], reward_scale: float,
                 group_cost: GroupCost | None = None) -> SetCoScheduleEnv:
        return SetCoScheduleEnv(node, train, windows=windows, cmaxes=cmaxes, provider=provider, group_cost=group_cost,
                                backend=backend, reward_scale=reward_scale,
                                invalid_action_penalty=reward.invalid_action_penalty)

    return Setup(node, backend, provider, train, _windows(names, cmaxes), make_env, provider.pipeline, node.name)


def read_window_file(path: str | Path) -> Window:
    p = Path(path)
    try:
        return Window.model_validate(json.loads(p.read_text()))
    except FileNotFoundError:
        raise InputError(f"{p}: no such window file") from None
    except (json.JSONDecodeError, ValueError) as exc:
        raise InputError(f"{p} is not a valid window document: {str(exc).splitlines()[0]}") from None


def real_setup(window_file: str | Path | None, run_dir: Path, *, window_size: int, cmaxes: Sequence[int],
               reward: Any, profile_missing: bool = True, say: Callable[[str], None] = print,
               timeout_s: float | None = None) -> Setup:
    from env.node.discover import node_id
    from env.real.backend import RealBackend
    from env.sim.nodes import load_node
    from profiler.features import FeaturePipeline
    from profiler.store import ProfileStore

    node = load_node("local")
    nid = node_id(node)
    window = read_window_file(window_file or DEFAULT_REAL_WINDOW)
    commands: dict[str, WindowJob] = {}
    for j in window.jobs:
        if not j.command:
            raise InputError(f"job {j.id!r} of the training window has no command: real training runs the jobs")
        commands.setdefault(j.profile_name, j)
    store = ProfileStore()
    for name, j in commands.items():
        if store.get(name, nid) is None:
            if not profile_missing:
                raise InputError(f"no profile named {name!r} on this node ({nid}): run `cosched profile --name {name} -- ...` first")
            from functools import partial

            from env.plan.launch import solo_prefix
            from profiler.profiling import profile_command

            say(f"profiling {name} (solo on the whole node, then on one core): real training needs its profile")
            store.put(profile_command(name, j.command, nid, env=j.env or None, launcher=partial(solo_prefix, node)))
    profiles = [store.get(n, nid) for n in commands]
    pipeline = FeaturePipeline.fit(profiles)  # type: ignore[arg-type]
    provider = ProfileProvider(lambda name: store.get(name, nid), pipeline, what=f"profile on this node ({nid})")
    backend = RealBackend(node, run_dir / "real", timeout_s=timeout_s)
    names = list(commands)

    def make_env(windows: tuple[int, int], cmaxes: Sequence[int], reward_scale: float,
                 group_cost: GroupCost | None = None) -> SetCoScheduleEnv:
        return SetCoScheduleEnv(node, names, windows=windows, cmaxes=cmaxes, provider=provider, group_cost=group_cost,
                                backend=backend, commands=commands, reward_scale=reward_scale,
                                invalid_action_penalty=reward.invalid_action_penalty)

    # Validation on the real node is the training window itself (its groups' measurements are reused too).
    validation = [window.model_copy(update={"max_concurrency": min(window.max_concurrency, max(cmaxes))})]
    return Setup(node, backend, provider, names, validation, make_env, pipeline, "local",
                 extra={"window": window, "node_id": nid})


# ------------------------------------------------------------------------------------------- the problem
class Problem:
    """What the run trains on (sim): node, job information, the training job pool, the group evaluator (the node
    model the searches use, which scores each closed group) and the environment (``env``) every episode is played
    in."""

    def __init__(self, args: Args) -> None:
        from env.episode.window import RewardConfig
        from env.planners.baselines import GroupEvaluator
        from env.sim.nodes import load_node

        self.node = load_node(args.node)
        self.setup = sim_setup(self.node, window_size=max(args.windows[1], 1), cmaxes=args.cmaxes, jobs=args.jobs,
                               n_validation=0, reward=RewardConfig(), synthetic=(args.synthetic_jobs, args.seed))
        self.provider, self.backend = self.setup.provider, self.setup.backend
        self.pool = list(self.setup.jobs)
        self.ev: Any = GroupEvaluator(self.node)
        self.env = self.setup.make_env(args.windows, args.cmaxes, args.reward_scale, group_cost=self.ev.makespan)
        self.d_token = self.env.d_token

    def episode(self, names: Sequence[str], cmax: int) -> Episode:
        return self.env.make_episode(names, cmax)


class RealProblem(Problem):
    """This node, measured: the window file's jobs (profiled first where missing), each closed group run for real by
    ``env.real.backend.RealBackend`` (identical group configurations are measured once and reused)."""

    def __init__(self, args: Args, run_dir: Path) -> None:
        from env.episode.window import RewardConfig

        self.setup = real_setup(args.window_file, run_dir, window_size=args.windows[1], cmaxes=args.cmaxes,
                                reward=RewardConfig(), timeout_s=600.0)
        self.node, self.provider, self.backend = self.setup.node, self.setup.provider, self.setup.backend
        self.pool = list(self.setup.jobs)
        self.window = self.setup.extra["window"]
        self.commands = {j.profile_name: j for j in self.window.jobs}
        self.ev = None
        self.env = self.setup.make_env(args.windows, args.cmaxes, args.reward_scale)
        self.d_token = self.env.d_token


def make_problem(args: Args, run_dir: Path) -> Problem:
    return RealProblem(args, run_dir) if args.backend == "real" else Problem(args)


class Played(NamedTuple):
    transitions: list[tuple]  # (state, mask, action, reward, next state, next mask, terminated)
    throughput: float  # the plan's throughput vs time sharing
    jobs: list[str]  # the window, as drawn or given
    max_concurrency: int


def play(problem: Problem, shape: SetNetShape, params: dict[str, np.ndarray] | None,
         window: tuple[Sequence[str], int] | None, rng: np.random.Generator | None, replay: list[int] | None = None,
         labels: list[tuple] | None = None, expert: Any = None, follow_expert: bool = False,
         soft_labels: float = 0.0) -> Played:
    """One episode through the problem's gymnasium env (reset, then step until it ends). ``window``: (jobs, Cmax);
    None: the env draws it with ``rng`` (which then also draws the actions). ``params`` None: uniformly random valid
    actions; ``rng`` None: greedy; ``replay``: these actions (a searched plan). ``expert``: each state's (state,
    mask, expert's action, soft label of skip there, ``training.expert.skip_target``; -1: the action is the label)
    is appended to ``labels`` (DAgger); ``follow_expert``: the expert plays."""
    env = problem.env
    if window is None:
        env.np_random = rng
        obs, info = env.reset()
    else:
        obs, info = env.reset(options={"jobs": list(window[0]), "max_concurrency": window[1]})
    jobs, cmax = info["jobs"], info["max_concurrency"]
    state, mask = set_state(obs), info["action_mask"].astype(np.bool_)
    if expert is not None:
        from training.expert import skip_target
    trans: list[tuple] = []
    done = False
    while not done:
        if expert is not None:
            label = expert.action(env.episode)
            labels.append((state, mask, label, skip_target(expert.last_values, soft_labels)))  # type: ignore[union-attr]
        if follow_expert:
            a = label
        elif replay is not None:
            a = replay[len(trans)]
        elif params is None:
            valid = np.flatnonzero(mask)
            a = int(valid[rng.integers(valid.size)])  # type: ignore[union-attr]
        else:
            logits = set_logits(shape, params, *state)
            a = int(np.argmax(np.where(mask, logits, -np.inf))) if rng is None else sample_valid(masked_probs(logits, mask), mask, rng)
        obs, reward, terminated, truncated, info = env.step(a)
        nstate, nmask = set_state(obs), info["action_mask"].astype(np.bool_)
        trans.append((state, mask, a, reward, nstate, nmask, terminated))
        state, mask, done = nstate, nmask, terminated or truncated
    return Played(trans, info["throughput_vs_timeshare"], jobs, cmax)
