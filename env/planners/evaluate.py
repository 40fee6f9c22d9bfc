"""Comparing policies on many windows (``cosched eval``): per window and mean throughput vs time sharing.

The result is the ``cosched eval --json`` document of docs/design/interfaces.md (``"simulated": true`` on the sim
backend). Time sharing's total is the sum of the planned jobs' solo times (profiles / catalogue), so its
throughput is 1.0 by definition; ``mean`` is the arithmetic mean over windows (the paper's "AM").
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from pydantic import ValidationError

from env.errors import InputError
from env.episode.jobinfo import JobInfoProvider, sim_provider
from env.node.spec import NodeSpec
from env.plan.models import Window
from env.planners.baselines import PlanContext
from env.planners.registry import BASELINES, Registry
from env.sim.backend import Backend, SimBackend

DEFAULT_EVAL_POLICIES = ("timeshare", "greedy", "random", "pairs", "best-found")


def read_windows(path: str | Path, what: str = "window") -> list[Window]:
    """A JSON array of window documents (``what="stream"``: of stream documents, windows whose jobs may carry
    ``submit_s``; a top-level ``{"windows": [...]}`` or ``{"streams": [...]}`` is read too), one line when bad."""
    p = Path(path)
    flag = f"--{what}s"
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{p}: no such file ({flag} takes a JSON array of {what} documents)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {p}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{p} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    if isinstance(doc, dict) and isinstance(doc.get(f"{what}s"), list):
        doc = doc[f"{what}s"]
    if not isinstance(doc, list) or not doc:
        raise InputError(f"{p}: expected a non-empty JSON array of {what} documents ({{\"jobs\": [...]}})")
    windows = []
    for i, w in enumerate(doc):
        try:
            windows.append(Window.model_validate(w))
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(x) for x in err["loc"]) or "document"
            raise InputError(f"{p}: {what} {i} is not valid: {where}: {err['msg']}") from None
    return windows


def evaluate(windows: Sequence[Window], node: NodeSpec, policies: Sequence[str], *,
             backend: Backend | None = None, provider: JobInfoProvider | None = None, seed: int = 0,
             window_size: int = 6, progress: Callable[[int, str, float], None] | None = None,
             guard: bool = False, registry: Registry = BASELINES) -> dict[str, Any]:
    """Every window planned by every policy (by name, from ``registry``: the agent policies are
    ``training.registry.policy_registry``'s), each plan run on ``backend`` (default: the simulated node).
    ``guard``: every plan passes ``env.planners.guard.guard_plan`` (as ``cosched schedule`` and the service plan), so a
    plan predicted below time sharing is replaced by the best baseline's; a result then names the policy that made it."""
    backend = backend if backend is not None else SimBackend(node)
    provider = provider if provider is not None else sim_provider(node)
    for i, w in enumerate(windows):
        unknown = [j.profile_name for j in w.jobs if provider.get(j.profile_name) is None]
        if unknown:
            raise InputError(f"window {i} names jobs that {node.name} does not know: {', '.join(unknown)} "
                             f"(see 'cosched jobs --backend sim')")
    pols = {name: registry.get(name) for name in policies}
    out_windows = []
    sums = {name: 0.0 for name in policies}
    for i, w in enumerate(windows):
        solo = sum(provider.get(j.profile_name).solo_s for j in w.jobs)  # type: ignore[union-attr]
        results = {}
        for name, pol in pols.items():
            t0 = time.perf_counter()
            ctx = PlanContext(node=node, provider=provider, seed=seed + i, window_size=window_size,
                              simulated=backend.simulated)
            plan = pol.plan(w, ctx)
            if guard:
                from env.planners.guard import guard_plan

                plan = guard_plan(plan, w, ctx)
            makespans = backend.evaluate(plan, seed=seed + i)
            total = sum(makespans)
            thr = solo / total if total > 0 else float("nan")
            results[name] = {"throughput_vs_timeshare": thr, "total_s": total, "groups": len(makespans)}
            if plan.fallback_reason:
                results[name]["made_by"] = plan.policy
            sums[name] += thr
            if progress is not None:
                progress(i, name, time.perf_counter() - t0)
        out_windows.append({"index": i, "jobs": [j.profile_name for j in w.jobs],
                            "max_concurrency": w.max_concurrency, "timeshare_s": solo, "results": results})
    model_fp = None
    if backend.simulated and node.simulated:
        from env.sim.world import fingerprint

        model_fp = fingerprint(node)  # which contention model and catalogue produced these figures
    return {
        "backend": backend.name,
        "node": node.name,
        "simulated": backend.simulated,
        "model_fingerprint": model_fp,
        "window_size": window_size,
        "policies": list(policies),
        "windows": out_windows,
        "mean": {name: sums[name] / len(windows) for name in policies},
    }
