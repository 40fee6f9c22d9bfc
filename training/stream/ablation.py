"""The stream learner's ablation (simulated, on the node model): on held-out streams, the trained actor alone
(``agent``) against the same network untrained, ``greedy-continuous`` and ``packing``; ``agent-search`` against
``rollout``; and the decision latency of each (median ms per event, one core, measured).

Streams (``training.stream.streams.eval_streams``): 48 jobs of the node's 19 programs (held-out programs included),
seeds 101-108 by default (never used to choose anything), saturated at each Cmax and with Poisson arrivals at each
load x packing's capacity (as ``bench/stream_arrivals.py``). The figure of a stream: its throughput (saturated) or
its mean turnaround (arrivals); ratios are written so that above 1 is better (throughput / the other's; the other's
turnaround / this one's). Latency: the time of each decide() at events where a start is possible, on this machine
(one process, one thread). ``bench/stream_ablation.py`` is its command line.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Sequence

from env.episode.stream import run_stream
from env.episode.stream_gym import needs_choice
from env.planners.streams import DeepRollout, GreedyContinuous, Packing
from training.stream.modelfile import StreamModel, load_stream_model
from training.stream.policy import AgentSearch, AgentStream
from training.stream.streams import eval_streams


class Timed:
    """A stream policy whose decide() times are kept (seconds, one per event where a start is possible: the others
    need no decision)."""

    def __init__(self, policy: Any) -> None:
        self.policy, self.name, self.times = policy, policy.name, []

    def reset(self, *a: Any) -> None:
        self.policy.reset(*a)

    def decide(self, view: Any) -> Any:
        choice = needs_choice(view.sim, view.queue, view.max_concurrency)
        t = time.perf_counter()
        d = self.policy.decide(view)
        if choice:
            self.times.append(time.perf_counter() - t)
        return d


def untrained_of(model: StreamModel) -> StreamModel:
    """The same network before training: rebuilt from the model's seed and shape as its run built it (the first
    network made after seeding torch; the run's RUN/untrained.npz holds the same numbers)."""
    import torch

    from agent.streamnet_torch import StreamNet

    torch.manual_seed(int(model.meta.training["args"]["seed"]))
    params = StreamNet(model.shape).export()
    return StreamModel(model.meta, params, params)


def arms(model: str, untrained: str | None, window: int, search_window: int, search: bool
         ) -> dict[str, Callable[[], Any]]:
    trained = load_stream_model(model)
    raw = load_stream_model(untrained) if untrained else untrained_of(trained)
    out: dict[str, Callable[[], Any]] = {
        "packing": Packing, "greedy-continuous": lambda: GreedyContinuous(window),
        "untrained": lambda: _named(AgentStream(raw, window), "untrained"), "agent": lambda: AgentStream(trained, window)}
    if search:
        out["rollout"] = lambda: DeepRollout(window)  # as it ships (with its own guard against packing)
        out["agent-search"] = lambda: AgentSearch(trained, search_window)
    return out


def _named(p: Any, name: str) -> Any:
    p.name = name
    return p


def figure(m: dict[str, float], saturated: bool) -> float:
    return m["throughput_vs_timeshare"] if saturated else 1.0 / m["mean_turnaround_s"]


def run(node: Any, model: str, untrained: str | None, seeds: Sequence[int], cmaxes: Sequence[int], loads: Sequence[float],
        window: int = 8, search_window: int = 16, search: bool = True, say: Callable[[str], None] = print) -> dict:
    factories = arms(model, untrained, window, search_window, search)
    rows, times, fallbacks = [], {}, 0
    for label, jobs, cmax in eval_streams(node, seeds, cmaxes, loads):
        sat = label.startswith("sat")
        res = {}
        for name, make in factories.items():
            pol = Timed(make())
            m = run_stream(node, jobs, cmax, pol).metrics()  # type: ignore[arg-type]
            res[name] = figure(m, sat)
            for key in (name, f"{name} ({'saturated' if sat else 'arrivals'})"):
                times.setdefault(key, []).extend(pol.times)
            fallbacks += len(getattr(pol.policy, "fallbacks", []))
        rows.append((label, res))
        say(f"{label}: " + "  ".join(f"{k} {v / res['packing']:.3f}" for k, v in res.items() if k != "packing"))
    return {"rows": rows, "latency_ms": {k: 1000 * statistics.median(v) for k, v in times.items() if v},
            "latency_p90_ms": {k: 1000 * sorted(v)[int(0.9 * (len(v) - 1))] for k, v in times.items() if v},
            "fallbacks": fallbacks}


COMPARISONS = (("agent", "greedy-continuous"), ("agent", "untrained"), ("agent", "packing"),
               ("greedy-continuous", "packing"), ("agent-search", "rollout"), ("agent-search", "packing"),
               ("rollout", "packing"))


def table(doc: dict) -> list[str]:
    """Markdown: per group of streams (saturated at Cmax c; arrivals at a load and Cmax c), each comparison as
    median [min, max] over the seeds (above 1: the first is better)."""
    groups: dict[str, list[dict]] = {}
    for label, res in doc["rows"]:
        kind, cmax, _ = label.split(" ")
        groups.setdefault(f"{kind} {cmax}", []).append(res)
    have = [c for c in COMPARISONS if all(c[0] in r and c[1] in r for rs in groups.values() for r in rs)]
    lines = ["| streams | " + " | ".join(f"{a} / {b}" for a, b in have) + " |",
             "| --- |" + " ---: |" * len(have)]
    for g, rs in groups.items():
        cells = []
        for a, b in have:
            r = [x[a] / x[b] for x in rs]
            cells.append(f"{statistics.median(r):.3f} [{min(r):.3f}, {max(r):.3f}]")
        kind, cmax = g.split(" ")
        name = "saturated" if kind == "sat" else f"arrivals {kind[3:]} %"
        lines.append(f"| {name}, Cmax {cmax[1:]} ({len(rs)}) | " + " | ".join(cells) + " |")
    return lines


__all__ = ["run", "table", "arms", "untrained_of", "Timed"]
