"""The final evaluation of a trained model (the table a training run ends with), through ``env.planners.evaluate``.

* sim: the standard evaluation file (``training/eval_windows.json``, held-out jobs included) with ``agent``,
  ``fifo``, ``timeshare``, ``greedy`` and ``random`` evaluated now; ``pairs`` and ``best-found`` (searches of
  a few seconds per window) are taken from ``training/results/eval_baselines_<node>.json`` when that file was
  made on the same windows (said so in the table), else evaluated now when ``search`` is asked for.
* real: the training window on this node through the same ``RealBackend`` (measured; reused measurements of
  identical group configurations are counted and labelled), with ``agent``, ``fifo``, ``greedy``, ``timeshare``.

The result is ``cosched eval --json``'s document plus a ``summary`` (means, the agent's fraction of
best-found) that goes into the model file's training figures.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Sequence


STANDARD_WINDOWS = Path(__file__).resolve().parent / "eval_windows.json"
RESULTS_DIR = Path(__file__).resolve().parent / "results"
CHEAP_POLICIES = ("agent", "fifo", "timeshare", "greedy", "random")
SEARCH_POLICIES = ("pairs", "best-found")


def baseline_cache(node_name: str) -> Path:
    return RESULTS_DIR / f"eval_baselines_{node_name.replace(':', '_')}.json"


def cached_search_results(node_name: str, windows: Sequence[Any], fingerprint: str | None = None) -> dict[str, Any] | None:
    """The cached search baselines when they were made on the same windows and (given ``fingerprint``) by the
    same simulated model: a file from an earlier model is not used."""
    p = baseline_cache(node_name)
    if not p.exists():
        return None
    try:
        doc = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    jobs = [[j.profile_name for j in w.jobs] for w in windows]
    if [w["jobs"] for w in doc.get("windows", [])] != jobs or not all(s in doc.get("policies", []) for s in SEARCH_POLICIES):
        return None
    if [w.get("max_concurrency", 4) for w in doc["windows"]] != [w.max_concurrency for w in windows]:
        return None
    if fingerprint is not None and doc.get("model_fingerprint") != fingerprint:
        return None
    return doc


def evaluate_model(model: Any, node: Any, windows: Sequence[Any], policies: Sequence[str], *, backend: Any = None,
                   provider: Any = None, seed: int = 0, search: bool = False, window_size: int = 6,
                   progress: Callable[[int, str, float], None] | None = None,
                   search_budget: int | None = None, extra: dict[str, Callable[[], Any]] | None = None) -> dict[str, Any]:
    """``env.planners.evaluate.evaluate`` with the agent policies bound to ``model`` (``training.registry.policy_registry``; ``extra``: more policies by name); the search baselines from the cache
    when allowed and available (``doc["from_cache"]`` lists them)."""
    from env.planners.evaluate import evaluate
    from training.registry import policy_registry

    pols = list(policies)
    cached = None
    if node.simulated and (backend is None or backend.simulated) and not search and window_size == 6:
        from env.sim.world import fingerprint

        cached = (cached_search_results(node.name, windows, fingerprint(node))
                  if any(p in SEARCH_POLICIES for p in pols) else None)
        if cached is None:
            pols = [p for p in pols if p not in SEARCH_POLICIES]
    live = [p for p in pols if not (cached and p in SEARCH_POLICIES)]
    doc = evaluate(windows, node, live, backend=backend, provider=provider, seed=seed, progress=progress,
                   window_size=window_size, registry=policy_registry(model, search_budget).extended(extra or {}))
    if cached:
        from_cache = [p for p in pols if p in SEARCH_POLICIES]
        for w, cw in zip(doc["windows"], cached["windows"]):
            for p in from_cache:
                w["results"][p] = cw["results"][p]
        for p in from_cache:
            doc["mean"][p] = cached["mean"][p]
        doc["policies"] = pols
        doc["from_cache"] = {"policies": from_cache, "file": str(baseline_cache(node.name))}
    doc["summary"] = summary(doc)
    return doc


def summary(doc: dict[str, Any]) -> dict[str, Any]:
    mean = doc["mean"]
    out: dict[str, Any] = {"windows": len(doc["windows"]), "mean": {k: round(v, 4) for k, v in mean.items()},
                           "simulated": doc["simulated"], "node": doc["node"]}
    if "best-found" in mean and "agent" in mean:
        out["agent_fraction_of_best_found"] = round(mean["agent"] / mean["best-found"], 4)
    if "agent" in mean:
        out["agent_beats"] = sorted(p for p in mean if p not in ("agent", "best-found") and mean["agent"] > mean[p])
    return out


def final_evaluation(model_path: Path, setup: Any, cfg: Any, run_dir: Path, *, windows_file: str | None = None,
                     say: Callable[[str], None] = print) -> dict[str, Any]:
    from env.planners.evaluate import read_windows

    if setup.backend.name == "sim":
        windows = read_windows(windows_file or STANDARD_WINDOWS)
        policies = [*CHEAP_POLICIES, *SEARCH_POLICIES]
        doc = evaluate_model(model_path, setup.node, windows, policies, backend=setup.backend)
    else:
        rb = setup.backend
        before = (rb.runs, rb.reused)
        say("final evaluation on this node (groups run for real unless their configuration was measured before)")
        doc = evaluate_model(model_path, setup.node, setup.validation, ["agent", "fifo", "greedy", "timeshare"],
                             backend=rb, provider=setup.provider)
        doc["real_groups"] = {"executed": rb.runs - before[0], "reused_measurements": rb.reused - before[1]}
        doc["summary"]["real_groups"] = doc["real_groups"]
    (run_dir / "evaluation.json").write_text(json.dumps(doc, indent=1))
    render_table(doc, say)
    return doc


def render_table(doc: dict[str, Any], say: Callable[[str], None] = print) -> None:
    kind = "simulated" if doc["simulated"] else "measured"
    pols = doc["policies"]
    width = max(10, *(len(p) + 2 for p in pols))
    lines = [f"final evaluation on {doc['node']} ({kind}): mean throughput vs time sharing over {len(doc['windows'])} window(s)"]
    lines.append("".join(p.rjust(width) for p in pols))
    lines.append("".join(f"{doc['mean'][p]:.3f}".rjust(width) for p in pols))
    s = doc["summary"]
    if "agent_fraction_of_best_found" in s:
        lines.append(f"agent: {s['agent_fraction_of_best_found'] * 100:.1f} % of best-found; beats {', '.join(s['agent_beats']) or 'none'}")
    if doc.get("from_cache"):
        lines.append(f"({', '.join(doc['from_cache']['policies'])}: from {doc['from_cache']['file']}, the same windows)")
    if doc.get("real_groups"):
        rg = doc["real_groups"]
        lines.append(f"(groups executed now: {rg['executed']}; reused measurements of identical configurations: {rg['reused_measurements']})")
    for ln in lines:
        say(ln)
