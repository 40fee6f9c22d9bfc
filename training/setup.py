"""What a training run trains on: the node, the backend, the job information and the windows.

* ``--backend sim``: the simulated node, its catalogue, the training jobs (default: the paper's 12;
  ``TRAIN_JOBS``; ``--synthetic-jobs N`` adds N generated ones), the feature pipeline fitted on them (``env.episode.jobinfo.sim_provider``). Validation windows are
  drawn, seeded, from the whole catalogue (held-out jobs included) and differ from ``training/eval_windows.json``.
* ``--backend real``: this node (``local``), the jobs of a window document (default ``examples/window.json``),
  their profiles on this node (profiled first when missing), a pipeline fitted on those profiles, and
  ``env.real.backend.RealBackend`` (groups executed for real; measured identical configurations reused and
  counted as reused). The gym env is the same one; ``CommandEnv`` only gives its window jobs their commands.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from env.sim.backend import Backend, SimBackend
from env.errors import InputError
from env.episode.gym_env import CoScheduleEnv
from env.episode.jobinfo import JobInfoProvider, ProfileProvider, sim_provider
from env.plan.models import Window, WindowJob
from env.node.spec import NodeSpec

DEFAULT_REAL_WINDOW = Path(__file__).resolve().parent.parent / "examples" / "window.json"
VALIDATION_SEED = 7_070_707  # not the standard evaluation file's seed: validation never sees those windows


class CommandEnv(CoScheduleEnv):
    """The gym env whose window jobs carry their commands (and env), for a backend that runs them."""

    def __init__(self, *args: Any, commands: dict[str, WindowJob], **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.commands = commands

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = super().reset(seed=seed, options=options)
        ep = self.episode
        assert ep is not None
        ep.jobs = [j.model_copy(update={"command": self.commands[j.profile_name].command,
                                        "env": self.commands[j.profile_name].env}) for j in ep.jobs]
        return obs, info


@dataclass
class Setup:
    node: NodeSpec
    backend: Backend
    provider: JobInfoProvider
    jobs: list[str]  # training job (profile) names
    validation: list[Window]  # windows for the periodic evaluation
    make_env: Callable[[int], CoScheduleEnv]  # Cmax -> env
    pipeline: Any  # the fitted FeaturePipeline saved with the model
    trained_for_name: str
    extra: dict[str, Any] = field(default_factory=dict)
    obs_layout: str = "slots-v1"


def _windows(names: Sequence[Sequence[str]], cmaxes: Sequence[int], commands: dict[str, WindowJob] | None = None) -> list[Window]:
    out = []
    for i, ns in enumerate(names):
        jobs = [commands[n].model_copy(update={"id": f"v{i}-{k}-{n}"}) if commands else WindowJob(id=f"v{i}-{k}-{n}", profile=n)
                for k, n in enumerate(ns)]
        out.append(Window(jobs=jobs, max_concurrency=cmaxes[i % len(cmaxes)]))
    return out


def sim_setup(node: NodeSpec, *, window_size: int, cmaxes: Sequence[int], jobs: Sequence[str] | None,
              n_validation: int, reward: Any, obs_layout: str = "slots-v1", synthetic: tuple[int, int] = (0, 0)) -> Setup:
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

    def make_env(cmax: int) -> CoScheduleEnv:
        return CoScheduleEnv(node, train, window_size=window_size, max_concurrency=cmax, backend=backend,
                             provider=provider, reward=reward, obs_layout=obs_layout)

    return Setup(node, backend, provider, train, _windows(names, cmaxes), make_env, provider.pipeline, node.name,
                 obs_layout=obs_layout)


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
               timeout_s: float | None = None, obs_layout: str = "slots-v1") -> Setup:
    from env.node.discover import node_id
    from env.sim.nodes import load_node
    from env.real.backend import RealBackend
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

    def make_env(cmax: int) -> CoScheduleEnv:
        return CommandEnv(node, names, window_size=window_size, max_concurrency=cmax, backend=backend,
                          provider=provider, reward=reward, commands=commands, obs_layout=obs_layout)

    # Validation on the real node is the training window itself (its groups' measurements are reused too).
    validation = [window.model_copy(update={"max_concurrency": min(window.max_concurrency, max(cmaxes))})]
    return Setup(node, backend, provider, names, validation, make_env, pipeline, "local",
                 extra={"window": window, "node_id": nid}, obs_layout=obs_layout)
