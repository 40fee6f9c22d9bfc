"""The stream policies that need a stream model (``training.stream.modelfile``): ``agent`` and ``agent-search``.

* ``AgentStream`` (``agent``): the learned actor alone, greedy: at an event it takes the arg-max of the actor's
  logits over the valid actions of ``CoScheduleStream-v0`` (``env.episode.stream_gym.observe``: the same state, the
  same mask as in training), starts that job, and asks again until the arg-max is "nothing more now" or no start
  is possible. Numpy only, no torch. ``next_start(sim, queue, places)`` is one such choice (a rollout base).
* ``AgentSearch`` (``agent-search``): ``rollout`` (``env.planners.continuous.Rollout``) whose candidates at each
  start are the agent's best ``top`` starts by its logits, the base's (``Fill``) start, packing's start and
  "nothing", each played forward on the node model by ``Fill`` and by packing, valued by the better of the two; the
  best is kept. Then the guard: packing's decision, played forward by packing from the same state
  (``packing_prediction``), is taken when it is predicted better, and ``fallbacks`` says why (time, both
  predictions). So agent-search is never below packing's predicted outcome on the model at any event; on a
  saturated stream (where the prediction is exact for packing) its makespan is never after packing's.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np

from agent.streamnet import stream_logits
from env.episode.stream import (
    DEFAULT_STREAM_WINDOW,
    WAIT,
    Decision,
    StreamJob,
    StreamView,
)
from env.episode.stream_gym import StreamFeatures, needs_choice, observe
from env.node.spec import NodeSpec
from env.plan.allocate import Allocation
from env.planners.continuous import Rollout, advance, play_out
from env.sim.stream import StreamNode
from training.stream.modelfile import StreamModel, load_stream_model

Start = tuple[StreamJob, Allocation]


_FEATURES: dict[str, StreamFeatures] = {}


def features_for(node: NodeSpec) -> StreamFeatures:
    """One ``StreamFeatures`` per node in this process: its memoised node-model times and allocation menus stay warm
    from one stream (one request) to the next."""
    key = node.model_dump_json()
    f = _FEATURES.get(key)
    if f is None:
        f = _FEATURES[key] = StreamFeatures(node)
    return f


class AgentStream:
    """The learned policy alone (greedy arg-max of the actor)."""

    name = "agent"

    def __init__(self, model: StreamModel, window: int = DEFAULT_STREAM_WINDOW, params: dict | None = None) -> None:
        self.model, self.shape = model, model.shape
        self.params = params if params is not None else model.actor
        self.window = min(window, model.meta.max_window)
        self.feats: StreamFeatures | None = None

    def reset(self, node: NodeSpec, jobs: Sequence[StreamJob], max_concurrency: int) -> None:
        self.feats = features_for(node)
        self.feats.remember(jobs)
        self.cmax, self.total = max_concurrency, len(jobs)
        self.turnaround = len({j.submit_s for j in jobs}) > 1
        self.pending = 0

    def logits(self, sim: StreamNode, queue: Sequence[StreamJob]) -> tuple[np.ndarray, object]:
        assert self.feats is not None
        o = observe(self.feats, sim, queue, self.cmax, self.window, pending=self.pending, total=self.total,
                    turnaround=self.turnaround)
        x = stream_logits(self.shape, self.params, o.tokens, o.n_queue, o.context, o.options, o.pairs)
        return np.where(o.mask, x, -np.inf), o

    def next_start(self, sim: StreamNode, queue: Sequence[StreamJob], places: int) -> Start | None:
        if places < 1 or not needs_choice(sim, queue, self.cmax):
            return None
        x, o = self.logits(sim, queue)
        return o.start(int(np.argmax(x)))  # type: ignore[attr-defined]

    def decide(self, view: StreamView) -> Decision:
        sim, queue, starts = view.sim.fork(), list(view.queue), []
        self.pending = view.pending
        while (s := self.next_start(sim, queue, self.cmax - len(sim.running))) is not None:
            j, alloc = s
            sim.start(j.id, j.name, j.params, alloc)
            queue.remove(j)
            starts.append((j.id, alloc))
        return Decision(starts=tuple(starts)) if starts else WAIT


class AgentSearch(Rollout):
    """Rollout guided by the agent (see the module docstring); ``fallbacks``: (time, why) of each event where
    packing's decision was taken instead."""

    name = "agent-search"

    def __init__(self, model: StreamModel, window: int = 16, top: int = 3, guard: bool = True) -> None:
        super().__init__(window, candidates=top, deep=False)  # its own play-outs (agent-search: the 50 ms budget)
        self.agent = AgentStream(model, window)
        self.top, self.guarded = top, guard
        self.fallbacks: list[tuple[float, str]] = []

    def reset(self, node: NodeSpec, jobs: Sequence[StreamJob], max_concurrency: int) -> None:
        super().reset(node, jobs, max_concurrency)
        self.agent.reset(node, jobs, max_concurrency)
        self.node = node  # self.packing: rollout's own packing base (Rollout.reset)
        self.fallbacks = []

    def _options(self, sim: StreamNode, queue: list[StreamJob], places: int, base: Start) -> list[Start | None]:
        x, o = self.agent.logits(sim, queue)
        options: list[Start | None] = [base]
        packed = self.packing.next_start(sim, queue, places)
        if packed is not None and (packed[0].name, packed[1]) != (base[0].name, base[1]):
            options.append(packed)  # packing's own start: the search's best is then never predicted below packing's
        for a in np.argsort(-x, kind="stable")[:self.top + 1]:
            if not np.isfinite(x[a]):
                break
            s = o.start(int(a))  # type: ignore[attr-defined]
            if s is not None and not any(c is not None and c[0].name == s[0].name and c[1] == s[1] for c in options):
                options.append(s)
        if sim.running:
            options.append(None)
        return options

    def _value(self, sim: StreamNode, queue: list[StreamJob], start: Start | None) -> float:
        """A candidate's predicted objective: the better of its play-outs by ``Fill`` and by packing (a candidate is
        not judged by one weak base; packing's play-out is cheap: no rates to weigh)."""
        by_fill = super()._value(sim, queue, start)
        base, self.base = self.base, self.packing  # type: ignore[assignment]
        try:
            by_packing = super()._value(sim, queue, start)
        finally:
            self.base = base
        return min(by_fill, by_packing)

    def decide(self, view: StreamView) -> Decision:
        self.agent.pending = view.pending
        sim, queue = view.sim.fork(), list(view.queue)
        places, starts, value = view.places(), [], math.inf
        if self.base.next_start(sim, queue, places) is None:
            return WAIT  # no start is possible: nothing to choose
        while True:
            base = self.base.next_start(sim, queue, places)
            if base is None:
                break
            options = self._options(sim, queue, places, base)
            values = [self._value(sim, queue, s) for s in options]
            best = min(range(len(options)), key=lambda k: (values[k], k))
            choice, value = options[best], values[best]
            if choice is None:
                break
            j, alloc = choice
            sim.start(j.id, j.name, j.params, alloc)
            queue.remove(j)
            starts.append((j.id, alloc))
            places -= 1
        return self._guard(view, Decision(starts=tuple(starts)) if starts else WAIT, sim, queue, value)

    def packing_prediction(self, view: StreamView) -> tuple[list[tuple[str, Allocation]], float]:
        """packing's decision now and its predicted objective, packing deciding the known jobs to their end."""
        psim, pqueue, pstarts = view.sim.fork(), list(view.queue), []
        places = view.places()
        while (s := self.packing.next_start(psim, pqueue, places)) is not None:
            j, alloc = s
            psim.start(j.id, j.name, j.params, alloc)
            pqueue.remove(j)
            pstarts.append((j.id, alloc))
            places -= 1
        if not psim.running:
            return pstarts, math.inf
        ended: list[float] = []
        held = advance(psim, ended)  # (the time after the advance: the jobs that ended at it)
        return pstarts, play_out(psim, pqueue, self.cmax, self.packing, self.goal, ended, held)  # type: ignore[arg-type]

    def _guard(self, view: StreamView, d: Decision, sim: StreamNode, queue: list[StreamJob], value: float) -> Decision:
        """``d`` unless packing's decision, played forward by packing, is predicted better (then that, and why)."""
        if not self.guarded:
            return d
        if not math.isfinite(value):  # nothing chosen by a comparison: value ``d`` as it stands
            value = self._value(sim, queue, None) if sim.running else math.inf
        pstarts, packed = self.packing_prediction(view)
        if not math.isfinite(packed) or pstarts == list(d.starts):
            return d
        if packed < value - 1e-9:
            why = f"packing's decision predicted {packed:.1f} against {value:.1f} ({self.goal}): packing's taken"
            self.fallbacks.append((view.now, why))
            return Decision(starts=tuple(pstarts), note=why)
        return d




def shipped_stream_model(node: NodeSpec) -> Path | None:
    """The stream model shipped for a simulated node: ``training/models/stream-<name>.npz`` (or the same name in
    ``COSCHED_MODELS_DIR``)."""
    from training.policies import models_dir

    p = models_dir() / f"stream-{node.name.replace(':', '-')}.npz"
    return p if p.is_file() else None


def stream_agents(node: NodeSpec, model: str | Path | None = None, window: int = DEFAULT_STREAM_WINDOW
                  ) -> tuple[dict, dict]:
    """(factories, refusals) of the stream policies ``agent`` and ``agent-search`` for ``stream_registry(...)
    .extended``: with ``model`` (a stream model file) or the node's shipped one; without either, each is refused
    in one line saying how to get one."""
    from agent.errors import ModelFileError
    from training.policies import node_shape

    path = Path(model) if model is not None else shipped_stream_model(node)
    why = None
    if path is None:
        why = (f"the continuous {{}} policy needs a stream model for {node.name}: train one with "
               "`python -m training.stream.sac --out MODEL.npz` and pass --model MODEL.npz")
    else:
        try:
            m = load_stream_model(path, expect_node_shape=node_shape(node))
        except ModelFileError as e:
            why = f"the continuous {{}} policy cannot use its model: {e}"
    if why is not None:
        return {}, {"agent": why.format("agent"), "agent-search": why.format("agent-search")}
    return {"agent": lambda: AgentStream(m, window), "agent-search": lambda: AgentSearch(m, window)}, {}


__all__ = ["AgentStream", "AgentSearch", "stream_agents", "shipped_stream_model"]
