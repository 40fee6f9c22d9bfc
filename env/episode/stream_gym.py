"""``cosched/CoScheduleStream-v0``: a job stream decided at every event (``env.episode.stream``), as a gymnasium
environment for the stream learner. Every figure it makes on a simulated node is simulated.

Contract (read it like gymnasium's ``cartpole.py``):

* **Episode**: one stream of jobs (``StreamJob``: program, solo time, submit time) on the stream node model
  (``env.sim.stream.StreamNode``) with at most Cmax jobs at once. ``reset(options={"jobs": [StreamJob...],
  "max_concurrency": c, "window": w})`` plays that stream; without options a saturated stream of ``n_jobs`` jobs
  drawn with ``np_random`` from ``programs`` (default: the node's training programs), Cmax uniform in ``cmaxes``,
  or whatever ``streams(np_random)`` returns when given. It ends (``terminated``) when every job has ended; it is
  never truncated.
* **Decision**: at an event the policy takes several actions in a row (start, start, ..., "nothing more now"):
  each start acts at once (time does not move); "nothing" moves time to the next event (a job ends or arrives).
  States where the only valid action would be "nothing" (no free place, no free CPU, no queued job) are skipped:
  time moves on by itself.
* **Action** (``Discrete(window x N_OPTIONS + 1)``): ``slot x N_OPTIONS + option`` starts the queued job at
  ``slot`` (0 = the queue's head; only the first W) on the allocation ``OPTIONS[option]`` cut from the free CPUs
  (a size: ``share`` = the free CPUs over the places left (all of them for the last place), ``slot`` = packing's
  slot, ⌊N / Cmax⌋, ``all`` free CPUs, ``half`` of them, ``domain`` = the free CPUs of the NUMA domain with most;
  compact or distributed over the domains; first-touch or interleaved); the last action, ``window x N_OPTIONS``,
  is "start nothing more now".
* **Mask** ``info["action_mask"]`` (int8; ``action_masks()`` too): a start is valid only when a place is free
  (never above Cmax), on free CPUs only (never oversubscribed), its allocation distinct from an earlier option's
  (interleave only over more than one domain), and for the first queued job of each program (two jobs of one
  program are the same choice); "nothing" only when a job runs. A masked action raises ``ValueError``.
* **Observation** (``Dict``): ``tokens`` (window + ``MAX_RUNNING`` rows: the first W queued jobs in queue order,
  then the running jobs, zero rows after each part; ``token_valid`` says which rows are jobs): the program's
  features (the node's job information: catalogue or profiles, scaled by its feature pipeline) and
  ``TOKEN_NAMES`` (queued: its place in the queue, time waited, its scaling on packing's slot; running: CPUs
  held, domains, memory policy, work left, speed and slowdown now, time to its end); ``context``
  (``CONTEXT_NAMES``: free CPUs per NUMA domain, places, Cmax, queue, jobs to come, the objective); ``options``
  (N_OPTIONS x ``OPTION_NAMES``: each option's size over the node, the free CPUs and packing's slot, its domains,
  its memory policy) and ``pairs`` (window x N_OPTIONS x ``PAIR_NAMES``: the queued job on that option by the node
  model: its time alone there over its solo time, its CPU-seconds over packing's slot's, its speed in the running
  mix, the slowdown it brings on the running jobs, the work rate it adds (greedy-continuous's score), the CPU-seconds
  it costs against packing's slot (rollout's second ranker), and each score's distance to the state's best).
* **Reward**: minus the metric's growth between two states, over ``info["metric_scale"]``: the metric is the
  makespan (saturated streams) or the sum of the jobs' turnarounds (a stream with arrivals), so the return times
  ``metric_scale`` is exactly minus the metric; ``metric_scale`` is Σ solo / Cmax (makespan) or Σ solo
  (turnaround). At the end ``info`` has ``metric``, ``metric_name`` and ``metrics`` (``StreamRun.metrics()``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import product
from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from env.episode.jobinfo import JobInfoProvider, sim_provider
from env.episode.stream import JobRun, StreamJob, StreamRun
from env.node.spec import NodeSpec
from env.plan.allocate import Allocation, assign_cpus, plain_allocation
from env.sim.model import solve
from env.sim.nodes import DEFAULT_SIM_NODE, load_node
from env.sim.stream import StreamNode

ENV_ID = "cosched/CoScheduleStream-v0"
MAX_WINDOW = 32  # the most queued jobs a decision chooses among
MAX_RUNNING = 8  # the most running jobs an observation holds (Cmax up to this)
MAX_DOMAINS = 4  # NUMA domains the context describes one by one
SIZES = ("share", "slot", "all", "half", "domain")
OPTIONS = tuple(product(SIZES, ("compact", "distributed"), ("first-touch", "interleave")))
N_OPTIONS = len(OPTIONS)
TOKEN_NAMES = ("log_solo", "queued", "running", "position", "waited", "slot_scaling", "cpus", "domains",
               "interleave", "work_left", "speed", "slowdown", "time_left")
CONTEXT_NAMES = tuple(f"free_domain{i}" for i in range(MAX_DOMAINS)) + (
    "free", "places", "cmax", "running", "queue", "pending", "turnaround", "done", "numa_domains")
OPTION_NAMES = ("size_node", "size_free", "size_slot", "domains", "interleave", "distributed", "all_free")
PAIR_NAMES = ("alone_over_solo", "cpu_s_over_slot", "speed_in_mix", "inflicted", "rate_gain", "regret", "rate_gap",
              "regret_gap")
TIME_S = 600.0  # the time unit of the features (log1p(t / TIME_S))
CLIP = 10.0


def _t(x: float) -> float:
    return math.log1p(max(0.0, x) / TIME_S)


class StreamFeatures:
    """What the observation knows of the jobs (program features; memoised node-model times) on one node."""

    def __init__(self, node: NodeSpec, provider: JobInfoProvider | None = None, params: Any = None) -> None:
        self.node = node
        self.provider = provider if provider is not None else sim_provider(node)
        self.alone = StreamNode(node, params if params is not None else _params(node))
        self.d_token = self.provider.n_features + len(TOKEN_NAMES)
        self._prog: dict[str, np.ndarray] = {}
        self._sim: dict[tuple, Any] = {}
        self._time: dict[tuple, float] = {}
        self.solo: dict[str, float] = {}  # program -> solo time on the whole node, from the jobs seen
        self._menus: dict[tuple, list] = {}

    def menu(self, free: set[int], places: int, cmax: int) -> list[Allocation | None]:
        """``menu`` memoised."""
        key = (frozenset(free), places, cmax)
        m = self._menus.get(key)
        if m is None:
            if len(self._menus) > 20_000:
                self._menus.clear()
            m = self._menus[key] = menu(self.node, free, places, cmax)
        return m

    def slot(self, cmax: int) -> Allocation:
        """packing's slot size, compact, on an empty node (the scaling reference)."""
        key = ("slot", cmax)
        a = self._menus.get(key)
        if a is None:
            n = max(1, len(self.node.cpus) // cmax)
            a = self._menus[key] = plain_allocation(self.node, assign_cpus(self.node, n, "compact", set()) or
                                                    self.node.cpus[:n])
        return a  # type: ignore[return-value]

    def remember(self, jobs: Sequence[StreamJob]) -> None:
        """The stream's jobs (their solo times); observe() knows a running job's by its program."""
        self.solo.update({j.name: j.solo_s for j in jobs})

    def program(self, name: str) -> np.ndarray:
        x = self._prog.get(name)
        if x is None:
            info = self.provider.get(name)
            if info is None:
                raise ValueError(self.provider.missing_reason(name))
            x = self._prog[name] = np.clip(info.features, -CLIP, CLIP).astype(np.float32)
        return x

    def sim_job(self, job: StreamJob, alloc: Allocation) -> Any:
        key = (job.name, alloc.cpus, alloc.memory, tuple(sorted(alloc.l3.items())),
               tuple(sorted(alloc.mem_bw_percent.items())))
        x = self._sim.get(key)
        if x is None:
            if len(self._sim) > 100_000:
                self._sim.clear()
            x = self._sim[key] = self.alone.sim_job(job.params, alloc)
        return x

    def alone_s(self, job: StreamJob, alloc: Allocation) -> float:
        """The job's whole time alone on ``alloc`` (node model)."""
        key = (job.name, alloc.cpus, alloc.memory)
        t = self._time.get(key)
        if t is None:
            t = self._time[key] = float(solve(self.alone.g, [self.sim_job(job, alloc)])[0])
        return t


def _params(node: NodeSpec) -> Any:
    from env.sim.world import world_for

    return world_for(node).params


def menu(node: NodeSpec, free: set[int], places: int, cmax: int) -> list[Allocation | None]:
    """The N_OPTIONS allocations of ``OPTIONS`` from the free CPUs now (None: invalid, or the same as an earlier
    option's)."""
    out: list[Allocation | None] = [None] * N_OPTIONS
    f = len(free)
    if places < 1 or f < 1:
        return out
    taken = set(node.cpus) - free
    size = {"share": f if places == 1 else f // places, "slot": len(node.cpus) // cmax, "all": f, "half": f // 2,
            "domain": max(len(free & set(d.cpus)) for d in node.numa)}
    seen: set[tuple] = set()
    for k, (s, affinity, memory) in enumerate(OPTIONS):
        n = size[s]
        if not 1 <= n <= f:
            continue
        cpus = assign_cpus(node, n, affinity, taken)
        if cpus is None or (memory == "interleave" and len({node.numa_of(c) for c in cpus}) < 2):
            continue
        key = (tuple(cpus), memory)
        if key in seen:
            continue
        seen.add(key)
        out[k] = plain_allocation(node, cpus, memory)  # type: ignore[arg-type]
    return out


@dataclass
class StreamObs:
    """One state as the learner reads it (unpadded). Action ``slot * N_OPTIONS + option``; ``nothing`` last
    (index ``len(slots) * N_OPTIONS``); ``mask`` has ``len(slots) * N_OPTIONS + 1`` entries."""

    tokens: np.ndarray  # (q + r, d_token): the q queued slots first, then the r running jobs
    n_queue: int
    context: np.ndarray
    options: np.ndarray  # (N_OPTIONS, len(OPTION_NAMES))
    pairs: np.ndarray  # (q, N_OPTIONS, len(PAIR_NAMES))
    mask: np.ndarray  # (q * N_OPTIONS + 1,) bool
    allocs: list  # N_OPTIONS Allocation | None
    slots: list  # the q queued StreamJobs

    def start(self, action: int) -> tuple[StreamJob, Allocation] | None:
        """The (job, allocation) of a start action, None for "nothing"."""
        if action == len(self.slots) * N_OPTIONS:
            return None
        slot, k = divmod(action, N_OPTIONS)
        return self.slots[slot], self.allocs[k]


def observe(feats: StreamFeatures, sim: StreamNode, queue: Sequence[StreamJob], cmax: int, window: int, *,
            pending: int, total: int, turnaround: bool) -> StreamObs:
    """The learner's view of a state: the first ``window`` queued jobs, the running ones, the node, the options."""
    node, g = feats.node, sim.g
    n_cpu = len(node.cpus)
    free = sim.free_cpus()
    places = max(0, cmax - len(sim.running))
    slot_n = max(1, n_cpu // cmax)
    slot_alloc = feats.slot(cmax)
    slots = list(queue[:window])
    f, d = feats.provider.n_features, feats.d_token
    run = list(sim.running.items())
    tokens = np.zeros((len(slots) + len(run), d), np.float32)
    for i, j in enumerate(slots):
        feats.solo[j.name] = j.solo_s
        tokens[i, :f] = feats.program(j.name)
        tokens[i, f:f + 6] = (_t(j.solo_s), 1.0, 0.0, i / max(1, window), _t(sim.now - j.submit_s),
                              math.log(feats.alone_s(j, slot_alloc) / j.solo_s))
    rates = sim.rates() if run else {}
    for i, (jid, r) in enumerate(run, start=len(slots)):
        solo = _solo_of(r, feats)
        t_now = 1.0 / rates[jid]
        job = StreamJob(jid, r.name, r.params, solo)
        alone = feats.alone_s(job, r.alloc)
        tokens[i, :f] = feats.program(r.name)
        tokens[i, f:] = (_t(solo), 0.0, 1.0, 0.0, _t(sim.now - r.start_s), 0.0, len(r.alloc.cpus) / n_cpu,
                         len(r.alloc.numa_nodes) / len(node.numa), float(r.alloc.memory == "interleave"), r.left,
                         solo / t_now, alone / t_now, _t(r.left * t_now))
    ctx = np.zeros(len(CONTEXT_NAMES), np.float32)
    for i, dom in enumerate(node.numa[:MAX_DOMAINS]):
        ctx[i] = len(free & set(dom.cpus)) / max(1, len(dom.cpus))
    ctx[MAX_DOMAINS:] = (len(free) / n_cpu, places / max(1, cmax), cmax / 4, len(run) / max(1, cmax),
                         min(len(queue), 4 * window) / max(1, window), min(pending, 64) / 16, float(turnaround),
                         len(sim.ended) / max(1, total), len(node.numa) / 4)
    allocs = feats.menu(free, places, cmax)
    opts = np.zeros((N_OPTIONS, len(OPTION_NAMES)), np.float32)
    for k, a in enumerate(allocs):
        if a is not None:
            n = len(a.cpus)
            opts[k] = (n / n_cpu, n / max(1, len(free)), n / slot_n, len(a.numa_nodes) / len(node.numa),
                       float(a.memory == "interleave"), float(OPTIONS[k][1] == "distributed"), float(n == len(free)))
    pairs = np.zeros((len(slots), N_OPTIONS, len(PAIR_NAMES)), np.float32)
    mask = np.zeros(len(slots) * N_OPTIONS + 1, np.bool_)
    running_sims = [r.sim for _, r in run]
    speeds = [_solo_of(r, feats) * rates[k] for k, r in run]
    t_before = [1.0 / rates[k] for k, _ in run]
    weight = [len(r.alloc.cpus) * r.left for _, r in run]
    seen: set[str] = set()
    for i, j in enumerate(slots):
        if j.name in seen:
            continue
        seen.add(j.name)
        ref = slot_n * feats.alone_s(j, slot_alloc)
        for k, a in enumerate(allocs):
            if a is None:
                continue
            mask[i * N_OPTIONS + k] = True
            alone = feats.alone_s(j, a)
            times = solve(g, running_sims + [feats.sim_job(j, a)])
            t_after = [t * r.factor for (_, r), t in zip(run, times)]
            inflicted = sum(s0 - _solo_of(r, feats) / t for s0, (_, r), t in zip(speeds, run, t_after))
            # greedy-continuous's score (the work rate it adds) and rollout's CPU-seconds ranker (env.planners.continuous)
            regret = (len(a.cpus) * times[-1] + sum(w * (t1 - t0) for w, t0, t1 in zip(weight, t_before, t_after))
                      - ref) / ref
            pairs[i, k, :6] = (math.log(alone / j.solo_s), math.log(len(a.cpus) * alone / ref), alone / times[-1],
                               inflicted, j.solo_s / times[-1] - inflicted, regret)
    if mask[:-1].any():  # each candidate's distance to the best by either score (0: the best)
        valid = mask[:-1].reshape(len(slots), N_OPTIONS)
        pairs[..., 6] = np.where(valid, pairs[..., 4] - pairs[..., 4][valid].max(), 0.0)
        pairs[..., 7] = np.where(valid, pairs[..., 5][valid].min() - pairs[..., 5], 0.0)
    mask[-1] = bool(run)
    return StreamObs(np.clip(tokens, -CLIP, CLIP), len(slots), np.clip(ctx, -CLIP, CLIP), np.clip(opts, -CLIP, CLIP),
                     np.clip(pairs, -CLIP, CLIP), mask, allocs, slots)


def _solo_of(r: Any, feats: StreamFeatures) -> float:
    """A running job's solo time on the whole node (from the stream's jobs, ``StreamFeatures.remember``)."""
    return feats.solo[r.name]


def needs_choice(sim: StreamNode, queue: Sequence[StreamJob], cmax: int) -> bool:
    """Whether a start is possible now (a queued job, a free place, a free CPU)."""
    return bool(queue) and len(sim.running) < cmax and bool(sim.free_cpus())


StreamSource = Callable[[np.random.Generator], tuple[list[StreamJob], int]]


class CoScheduleStreamEnv(gym.Env):
    """See the module docstring (the contract)."""

    metadata = {"render_modes": []}

    def __init__(self, node: NodeSpec | str = DEFAULT_SIM_NODE, *, window: int = MAX_WINDOW,
                 programs: Sequence[str] | None = None, n_jobs: int = 48, cmaxes: Sequence[int] = (1, 2, 3, 4),
                 streams: StreamSource | None = None, provider: JobInfoProvider | None = None) -> None:
        from env.sim.world import world_for

        self.node = load_node(node) if isinstance(node, str) else node
        if not 1 <= window <= MAX_WINDOW or not cmaxes or not all(1 <= c <= MAX_RUNNING for c in cmaxes):
            raise ValueError(f"window {window} / cmaxes {tuple(cmaxes)}: need 1 <= window <= {MAX_WINDOW} and each "
                             f"Cmax in 1..{MAX_RUNNING}")
        self.window, self.cmaxes, self.n_jobs, self.streams = window, tuple(cmaxes), n_jobs, streams
        self.programs = list(programs) if programs is not None else list(world_for(self.node).train_jobs)
        self.feats = StreamFeatures(self.node, provider)
        d = self.feats.d_token
        self.action_space = spaces.Discrete(window * N_OPTIONS + 1)
        self.nothing = window * N_OPTIONS
        box = lambda *shape: spaces.Box(-CLIP, CLIP, shape=shape, dtype=np.float32)  # noqa: E731
        self.observation_space = spaces.Dict({
            "tokens": box(window + MAX_RUNNING, d), "token_valid": spaces.MultiBinary(window + MAX_RUNNING),
            "context": box(len(CONTEXT_NAMES)), "options": box(N_OPTIONS, len(OPTION_NAMES)),
            "pairs": box(window, N_OPTIONS, len(PAIR_NAMES))})
        self.sim: StreamNode | None = None
        self.obs: StreamObs | None = None

    # -- the stream --
    def _draw(self) -> tuple[list[StreamJob], int]:
        from env.sim.catalogue import catalogue
        from env.sim.world import world_for

        if self.streams is not None:
            return self.streams(self.np_random)
        world, cat = world_for(self.node), catalogue(self.node)
        names = [self.programs[int(i)] for i in self.np_random.integers(len(self.programs), size=self.n_jobs)]
        jobs = [StreamJob(f"{k}-{x}", x, world.entries[x].params, cat[x].solo_s) for k, x in enumerate(names)]
        return jobs, int(self.np_random.choice(self.cmaxes))

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = options or {}
        if "jobs" in options:
            jobs, cmax = list(options["jobs"]), int(options.get("max_concurrency") or self.np_random.choice(self.cmaxes))
        else:
            jobs, cmax = self._draw()
        w = int(options.get("window", self.window))
        if not jobs or not 1 <= cmax <= MAX_RUNNING or not 1 <= w <= self.window:
            raise ValueError(f"a stream needs jobs, Cmax in 1..{MAX_RUNNING} and a window in 1..{self.window}")
        if len({j.id for j in jobs}) != len(jobs):
            raise ValueError("job ids must be unique in a stream")
        order = sorted(range(len(jobs)), key=lambda i: (jobs[i].submit_s, i))
        self.jobs, self.cmax, self.w = jobs, cmax, w
        self.pending = [jobs[i] for i in order]
        self.turnaround = len({j.submit_s for j in jobs}) > 1  # the objective: as rollout's "auto"
        solo = sum(j.solo_s for j in jobs)
        self.metric_scale = solo if self.turnaround else solo / cmax
        self.feats.remember(jobs)
        self.sim = StreamNode(self.node, self.feats.alone.params)
        self.sim.now = self.pending[0].submit_s
        self.queue: list[StreamJob] = []
        self.runs: dict[str, JobRun] = {}
        self.cost = 0.0
        self._arrive()
        self._skip()
        return self._observation(), self._info()

    def _arrive(self) -> None:
        while self.pending and self.pending[0].submit_s <= self.sim.now:  # type: ignore[union-attr]
            self.queue.append(self.pending.pop(0))

    def _advance(self) -> float:
        """Time moves to the next event; the metric's growth meanwhile."""
        sim = self.sim
        assert sim is not None
        until = self.pending[0].submit_s if self.pending else math.inf
        in_system, t0 = len(self.queue) + len(sim.running), sim.now
        for jid in sim.advance(until):
            self.runs[jid].end_s = sim.ended[jid]
        self._arrive()
        dt = sim.now - t0
        return dt * in_system if self.turnaround else dt

    def _skip(self) -> float:
        """Time moves on while no start is possible; the metric's growth meanwhile."""
        cost = 0.0
        while not self.done and not needs_choice(self.sim, self.queue, self.cmax):  # type: ignore[arg-type]
            cost += self._advance()
        return cost

    @property
    def done(self) -> bool:
        return not (self.pending or self.queue or self.sim.running)  # type: ignore[union-attr]

    def step(self, action):
        if self.sim is None:
            raise RuntimeError("call reset() before step()")
        if self.done:
            raise RuntimeError("the stream has ended: call reset() before step()")
        a = int(action)
        mask = self.action_masks()
        if not 0 <= a < len(mask) or not mask[a]:
            raise ValueError(f"action {a} is masked in this state (see info['action_mask'])")
        obs = self.obs
        assert obs is not None
        if a == self.nothing:
            cost = self._advance() + self._skip()
        else:
            job, alloc = obs.start(a)  # type: ignore[misc]
            self.sim.start(job.id, job.name, job.params, alloc)
            self.runs[job.id] = JobRun(job.id, job.name, job.submit_s, self.sim.now, math.nan, job.solo_s,
                                       tuple(alloc.cpus))
            self.queue.remove(job)
            cost = self._skip()
        self.cost += cost
        terminated = self.done
        observation = self._observation()
        info = self._info()
        if terminated:
            run = self.stream_run()
            m = run.metrics()
            info.update(metrics=m, metric_name="sum_turnaround_s" if self.turnaround else "makespan_s",
                        metric=sum(j.turnaround_s for j in run.jobs) if self.turnaround else m["makespan_s"])
        return observation, -cost / self.metric_scale, terminated, False, info

    def stream_run(self) -> StreamRun:
        """What the episode did (each job's start and end), as ``run_stream`` reports it."""
        return StreamRun("env", [self.runs[j.id] for j in self.jobs if j.id in self.runs])

    # -- what the policy sees --
    def state(self) -> StreamObs:
        """The current state unpadded (the learner's batches read this); its action indices are the env's for
        starts, and ``len(state.slots) * N_OPTIONS`` for "nothing" (``to_env_action`` maps it)."""
        assert self.obs is not None
        return self.obs

    def to_env_action(self, a: int) -> int:
        obs = self.state()
        return self.nothing if a == len(obs.slots) * N_OPTIONS else a

    def action_masks(self) -> np.ndarray:
        m = np.zeros(self.window * N_OPTIONS + 1, np.int8)
        if self.obs is not None and not self.done:
            m[:len(self.obs.mask) - 1] = self.obs.mask[:-1]
            m[-1] = self.obs.mask[-1]
        return m

    def _info(self) -> dict[str, Any]:
        return {"action_mask": self.action_masks(), "metric_scale": self.metric_scale,
                "max_concurrency": self.cmax, "time_s": self.sim.now}  # type: ignore[union-attr]

    def _observation(self) -> dict[str, np.ndarray]:
        sim = self.sim
        assert sim is not None
        if self.done:
            self.obs = None
            d = self.feats.d_token
            return {"tokens": np.zeros((self.window + MAX_RUNNING, d), np.float32),
                    "token_valid": np.zeros(self.window + MAX_RUNNING, np.int8),
                    "context": np.zeros(len(CONTEXT_NAMES), np.float32),
                    "options": np.zeros((N_OPTIONS, len(OPTION_NAMES)), np.float32),
                    "pairs": np.zeros((self.window, N_OPTIONS, len(PAIR_NAMES)), np.float32)}
        o = self.obs = observe(self.feats, sim, self.queue, self.cmax, self.w, pending=len(self.pending),
                               total=len(self.jobs), turnaround=self.turnaround)
        return padded(o, self.window)


def padded(o: StreamObs, window: int) -> dict[str, np.ndarray]:
    """A state as the fixed-shape gymnasium observation (queued rows, then ``MAX_RUNNING`` running rows)."""
    q, r = o.n_queue, len(o.tokens) - o.n_queue
    tokens = np.zeros((window + MAX_RUNNING, o.tokens.shape[1]), np.float32)
    valid = np.zeros(window + MAX_RUNNING, np.int8)
    tokens[:q], tokens[window:window + r] = o.tokens[:q], o.tokens[q:]
    valid[:q], valid[window:window + r] = 1, 1
    pairs = np.zeros((window, N_OPTIONS, len(PAIR_NAMES)), np.float32)
    pairs[:q] = o.pairs
    return {"tokens": tokens, "token_valid": valid, "context": o.context, "options": o.options, "pairs": pairs}


if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point="env.episode.stream_gym:CoScheduleStreamEnv")

__all__ = ["ENV_ID", "CoScheduleStreamEnv", "StreamFeatures", "StreamObs", "observe", "menu", "needs_choice", "padded",
           "OPTIONS", "N_OPTIONS", "MAX_WINDOW", "MAX_RUNNING", "TOKEN_NAMES", "CONTEXT_NAMES", "OPTION_NAMES",
           "PAIR_NAMES"]
