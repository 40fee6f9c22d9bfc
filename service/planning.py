"""Planning a window for the command line, the service and the Slurm controller: one path, a chosen policy.

The caller hands down the loaded ``NodeSpec``. Simulated nodes (``sim:NAME``) plan from the simulated catalogue,
the local node from its profile store (``env.episode.jobinfo.provider_for``); a model's policies read features
scaled by the model's own pipeline. Every plan passes the guard (``env.planners.guard``), which plans its fallbacks
itself with the baselines' job information.
"""

from __future__ import annotations

from pathlib import Path

from env.calibration.learned import KNOWN_AFTER
from env.episode.jobinfo import provider_for
from env.errors import InputError
from env.node.spec import NodeSpec
from env.plan.launch import PINRT_LIB
from env.plan.models import Plan, RunReport, Window
from env.planners.baselines import PlanContext
from env.planners.guard import guard_plan
from env.sim.nodes import load_node
from training.policies import MODEL_POLICIES, default_policy, shipped_model_for
from training.registry import policy_registry


def plan_window(window: Window, node: NodeSpec, *, policy: str | None = None, model: object | None = None,
                pin_runtime: bool = False, seed: int | None = None, search_budget: int | None = None,
                guard: bool = True) -> Plan:
    """The plan of ``window`` for ``node``: the policy's, unless it is predicted below time sharing (then the best
    baseline's, saying why: ``env.planners.guard``). ``guard=False``: the policy's own plan, always."""
    given = own_lengths(window)
    if given:
        raise InputError(f"{given} own time alone (solo_s), which only continuous decisions take (groups "
                         "plans take each program's profile): plan with --mode continuous (\"mode\": \"continuous\"), "
                         "or without solo_s")
    name = policy or default_policy(node, model)
    if model is not None and name not in MODEL_POLICIES:
        raise InputError(f"--model is for the agent policies; policy {name!r} does not use a model")
    if search_budget is not None and name != "agent-search":
        raise InputError(f"--search-budget is for the agent-search policy, not {name!r}")
    chosen = model if model is not None or name not in MODEL_POLICIES else shipped_model_for(node)  # given, else shipped
    pol = policy_registry(chosen, search_budget).get(name)  # type: ignore[arg-type]
    pipeline = pol.pipeline(node) if name in MODEL_POLICIES else None  # type: ignore[attr-defined] # as in training
    ctx = PlanContext(node=node, provider=provider_for(node, pipeline), seed=seed, simulated=node.simulated,
                      pin_runtime=PINRT_LIB if pin_runtime else None,
                      baseline_provider=provider_for(node) if pipeline is not None else None)  # else the same one
    plan = pol.plan(window, ctx)
    plan = guard_plan(plan, window, ctx) if guard else plan
    if not node.simulated:  # the real node: its calibrated model's predictions, labelled with its held-out error
        from env.calibration.runs import predict_plan
        from env.node.discover import node_id

        plan = predict_plan(plan, node_id(node)) or plan
    if name in MODEL_POLICIES:  # programs unlike those the model was trained on: one line, the refresh command
        from service.staleness import stale_note

        names = {j.profile or j.id for j in window.jobs}
        profiles = {n: i.profile for n in names if (i := ctx.provider.get(n)) is not None and i.profile is not None}
        note = stale_note(pol.model_for(node).meta, node, profiles)  # type: ignore[attr-defined]
        plan = plan.model_copy(update={"stale_model": note}) if note else plan
    return plan


def own_lengths(window: Window) -> str:
    """'job a gives its' / 'jobs a, b give their' (at most three named) when jobs of ``window`` give their own
    solo_s, else ''."""
    ids = [j.id for j in window.jobs if j.solo_s is not None]
    if not ids:
        return ""
    return (f"job {ids[0]} gives its" if len(ids) == 1 else
            f"jobs {', '.join(ids[:3])}" + (f" and {len(ids) - 3} more" if len(ids) > 3 else "") + " give their")


def own_lengths_reason(window: Window) -> str:
    """Why the default mode is continuous for a window whose jobs give their own lengths ('' when none do)."""
    given = own_lengths(window)
    return (f"continuous: {given} own time alone (solo_s), which only continuous decisions take (groups plans take "
            "each program's profile)") if given else ""


def simulate(plan: Plan, seed: int | None = None) -> RunReport:
    """The run report of ``plan`` on the simulated node it was made for."""
    from env.sim.backend import SimBackend

    if not plan.node.name.startswith("sim:"):
        raise InputError(f"the plan is for node {plan.node.name!r}; the sim backend runs plans made for a simulated "
                         "node: plan the window again with --node sim:reference")
    return SimBackend(load_node(plan.node.name)).run(plan, seed=seed)


# -- modes: groups (barriers) or continuous (jobs start at events) ----------------------------------------------


def decision_node(node: NodeSpec) -> tuple[NodeSpec, str]:
    """The node model a continuous plan is decided on, and how its figures are labelled: the one online decisions use
    (``env.real.online.stream_model``: a simulated node is its own; this node's is its calibrated node model)."""
    from env.real.online import stream_model

    model = stream_model(node)
    if model is None:
        raise InputError(f"node {node.name!r} has no node model to decide a continuous plan on: run 'cosched "
                         "calibrate' first (or plan for a simulated node, --node sim:reference)")
    if model.kind == "simulated":
        return node, f"simulated: node model {node.name}"
    return model.node, "simulated: this node's calibrated node model (its predictions, not measurements)"


class _Recorder:
    """A stream policy whose started allocations are kept (``run_stream`` checks and applies them as they are), and
    its give-backs: (the job, its allocation from then on, the CPUs it held, the start the same decision made)."""

    def __init__(self, inner) -> None:
        self.inner, self.name = inner, inner.name
        self.allocs: dict = {}
        self.gives: list = []

    def reset(self, node, jobs, max_concurrency) -> None:
        self.inner.reset(node, jobs, max_concurrency)

    def decide(self, view):
        d = self.inner.decide(view)
        for jid, alloc in d.starts:
            self.allocs[jid] = alloc
        for jid, alloc in d.changes:
            held = view.running[jid].alloc.cpus if jid in view.running else alloc.cpus
            if set(alloc.cpus) != set(held):
                if not d.starts:
                    raise InputError(f"policy {self.name!r} took CPUs from {jid} with nothing to start on them: a "
                                     "continuous plan gives CPUs back only to make room for a launch")
                self.gives.append((jid, alloc, tuple(held), d.starts[0][0]))
        return d


def plan_continuous(window: Window, node: NodeSpec, *, policy: str | None = None, pin_runtime: bool = False,
                    window_size: int | None = None, seed: int | None = None, model: str | None = None):
    """The continuous plan of ``window`` for ``node``: the stream policy (default ``DEFAULT_CONTINUOUS_POLICY``) decides
    at every event of the node model (``env.episode.stream.run_stream``); its starts become the launches in start
    order with their ``after`` (``after_sets``), predicted starts and ends; its changes, tied to the job ends that
    trigger them, and its give-backs (rollout-giveback), tied to the launch each makes room for. A job adapts as the
    window says, else as its profile measured (``cosched profile --adapts``). Jobs the node model does not know are
    excluded (run alone after the launches, profiled)."""
    from dataclasses import replace

    from env.episode.stream import DEFAULT_STREAM_WINDOW, run_stream, sim_stream
    from env.plan.models import Excluded
    from env.plan.stream_plan import SAME_EVENT_S, after_sets, build_continuous_plan
    from env.planners.streams import DEFAULT_CONTINUOUS_POLICY, stream_registry
    from env.sim.world import world_for
    from service.decide import profile_adapts

    name = policy or DEFAULT_CONTINUOUS_POLICY
    w = window_size or DEFAULT_STREAM_WINDOW
    if w < 1:
        raise InputError("the stream window must be at least 1 job")
    registry = stream_registry(lambda win: plan_window(win, node, seed=seed), w, give_back=True)  # plans carry them
    if name in ("agent", "agent-search"):  # a stream model: the node's shipped one, or --model
        from training.stream.policy import stream_agents

        registry = registry.extended(*stream_agents(node, model, w))
    elif model is not None:
        raise InputError(f"--model is for the agent policies; the continuous policy {name} takes no model")
    recorder = _Recorder(registry.get(name))
    mnode, source = decision_node(node)
    world = world_for(mnode)
    provider = provider_for(node) if node.simulated else None
    known, excluded = [], []
    for j in window.jobs:
        if world.is_known(j.profile_name):
            known.append(j)
            continue
        reason = (provider.missing_reason(j.profile_name) if provider is not None else
                  f"the node model of this node does not know {j.profile_name!r}: will run alone and be profiled "
                  "(then 'cosched calibrate --update')")
        excluded.append(Excluded(id=j.id, profile=j.profile, command=j.command or [], env=j.env, reason=reason))
    notes: dict = {"predictions_source": source}
    launches, changes, gives = [], [], []
    adapts = [j.id for j in known if (j.adapts if j.adapts is not None else profile_adapts(node, j.profile_name))]
    if known:
        stream = [replace(s, adapts=s.id in adapts) for s in sim_stream(mnode, known)]
        try:
            run = run_stream(mnode, stream, window.max_concurrency, recorder)
        except ValueError as exc:  # the policy's own refusal (packing's slots above the CPUs, ...): bad input here
            raise InputError(f"policy {name!r} cannot plan this window continuously: {exc}") from None
        by_id = {j.id: j for j in known}
        order = sorted(run.jobs, key=lambda r: (r.start_s, list(recorder.allocs).index(r.id)))
        pos = {r.id: k for k, r in enumerate(order)}
        releases: dict[int, set[int]] = {}
        for jid, kept, held, before in recorder.gives:
            releases.setdefault(pos[before], set()).update(set(held) - set(kept.cpus))
            gives.append((before, jid, kept))
        after = after_sets([(r.start_s, r.cpus) for r in order], [r.end_s for r in order], window.max_concurrency,
                           releases)
        t0 = min(r.start_s for r in order)
        for r, a in zip(order, after):
            wj = by_id[r.id]
            launches.append((wj, recorder.allocs[r.id], [order[i].id for i in a], round(r.start_s - t0, 4),
                             round(r.end_s - t0, 4), wj.submit_s if wj.submit_s else None))
        given = [(jid, kept) for jid, kept, _, _ in recorder.gives]
        for when, jid, alloc in run.changes:
            if any(jid == g and alloc is kept for g, kept in given):
                continue  # a give-back: tied to the launch it makes room for (above)
            ended = [r.id for r in order if abs(r.end_s - when) <= SAME_EVENT_S]
            if not ended:
                raise InputError(f"policy {name!r} changed {jid} at {when:.1f} s, which is no job's end: a continuous "
                                 "plan ties each change to the end of a job")
            changes.append((ended[-1], jid, alloc))
        m = run.metrics()
        notes.update(predicted_makespan_s=round(m["makespan_s"], 4),
                     predicted_throughput_vs_timeshare=round(m["throughput_vs_timeshare"], 4))
    return build_continuous_plan(node, launches, policy=name, max_concurrency=window.max_concurrency, window_size=w,
                                 changes=changes, excluded=excluded, give_backs=gives, adapts=adapts,
                                 pin_runtime=PINRT_LIB if pin_runtime else None, **notes)


def as_groups(plan: Plan, reason: str, continuous_s: float | None = None):
    """``plan`` saying it is the groups mode and why (the same fields and values, and these three)."""
    from env.plan.stream_plan import GroupsPlan

    return GroupsPlan.model_construct(**{k: getattr(plan, k) for k in Plan.model_fields}, mode="groups",
                                      mode_reason=reason, continuous_predicted_makespan_s=continuous_s)


def choose_mode(window: Window, node: NodeSpec, groups: Plan, *, pin_runtime: bool = False, seed: int | None = None):
    """The default mode: the groups plan ``groups`` or the continuous plan of ``window``, whichever the node model
    predicts to end sooner; the plan says which and why. On a simulated node ties go to groups (today's plans). On a
    real node, whose model is a fit with an error, continuous is the default and groups are taken only when predicted
    shorter by more than that error (``model_uncertainty``, the p90 of its held-out errors): continuous decisions
    there fall back to packing, the node sharing a site already has, which no barrier plan predicted within the
    model's error of it is trusted to beat (measured: docs/real-node.md). Where the groups plan has no prediction (a
    node without a node model), or both modes run the same (Cmax 1, one job), groups."""
    placed = sum(len(g.jobs) for g in groups.groups)
    if window.max_concurrency == 1 or placed < 2:
        return as_groups(groups, "groups: with Cmax 1 or one job to co-schedule both modes run the same")
    preds = [g.predicted_makespan_s for g in groups.groups]
    if any(p is None for p in preds):
        return as_groups(groups, f"groups: {groups.no_prediction or 'the groups plan has no predicted makespan'}; "
                         "no continuous plan is compared with it")
    g_s = sum(preds)  # type: ignore[arg-type]
    try:
        cont = plan_continuous(window, node, pin_runtime=pin_runtime, seed=seed)
    except InputError as exc:  # e.g. this node has no node model, or a program it does not know
        return as_groups(groups, f"groups: no continuous plan to compare with ({exc})")
    c_s = cont.predicted_makespan_s
    label = cont.predictions_source or "simulated"
    error = _real_error(node)
    unknown = [] if error is None else _not_yet_known(window, node)
    if c_s is not None and unknown and c_s > g_s * (1 + error):
        why = (f"continuous: the node model predicts {g_s:.1f} s for the co-scheduled jobs in groups ({groups.policy}) "
               f"against {c_s:.1f} s continuously ({cont.policy}), but it knows {', '.join(unknown)} from fewer than "
               f"{KNOWN_AFTER} co-runs (a prior stands for their interference), so no groups plan is trusted over "
               f"packing's node sharing, which continuous decisions fall back to; {label}")
        return cont.model_copy(update={"mode_reason": why, "groups_predicted_makespan_s": round(g_s, 4)})
    if c_s is not None and (c_s < g_s if error is None else c_s <= g_s * (1 + error)):
        within = "" if error is None or c_s < g_s else (
            f", within the node model's error ({error:.1%}: the p90 of its held-out errors), so continuous, whose "
            "decisions fall back to packing")
        why = (f"continuous: the node model predicts {c_s:.1f} s for the co-scheduled jobs continuously ({cont.policy}) "
               f"against {g_s:.1f} s in groups ({groups.policy}){within}; {label}")
        return cont.model_copy(update={"mode_reason": why, "groups_predicted_makespan_s": round(g_s, 4)})
    beyond = "" if error is None else f", shorter by more than the node model's error ({error:.1%})"
    why = (f"groups: the node model predicts {g_s:.1f} s for the co-scheduled jobs in groups ({groups.policy}) against "
           f"{c_s if c_s is None else round(c_s, 1)} s continuously ({cont.policy}){beyond}; {label}")
    return as_groups(groups, why, c_s)


def _not_yet_known(window: Window, node: NodeSpec) -> list[str]:
    """The window's programs that a real node's model learned from production runs and knows from fewer than
    ``KNOWN_AFTER`` co-runs: their interference is the cautious prior's, not a measurement. Measured: a groups plan
    chosen on such priors ran every job alone in 3 of 18 first windows of new programs (0.999-1.019 x time sharing,
    where packing ran 1.53-1.86 x in the same repeat; docs/real-node.md)."""
    from env.calibration.learned import planning_model
    from env.node.discover import node_id

    got = planning_model(node_id(node))
    if got is None:
        return []
    names = {j.profile_name for j in window.jobs}
    return sorted(lj.name for lj in got[2] if lj.name in names and not lj.known)


def _real_error(node: NodeSpec) -> float | None:
    """A real node's model error as a fraction (the p90 of its calibration's held-out errors; 0 when none was
    measured), None on a simulated node (its own model)."""
    if node.simulated:
        return None
    from env.calibration.learned import model_uncertainty
    from env.planners.scoring import model_node

    mnode = model_node(node)
    return model_uncertainty(mnode) if mnode is not None else 0.0


def plan_document(window: Window, node: NodeSpec, *, mode: str | None = None, policy: str | None = None,
                  model: object | None = None, pin_runtime: bool = False, seed: int | None = None,
                  search_budget: int | None = None, window_size: int | None = None):
    """The plan of ``window`` in ``mode`` (groups, continuous, or None: ``choose_mode``); ``policy`` is the mode's
    policy (a window policy for groups, a stream policy for continuous). Without a mode a policy of one mode only
    chooses it (a name of both, e.g. timeshare, plans groups as before)."""
    from env.plan.stream_plan import ContinuousPlan
    from env.planners.streams import stream_registry
    from training.registry import policy_registry

    if mode is None and own_lengths(window):
        mode, reason = "continuous", own_lengths_reason(window)
    elif mode is None and policy is not None:
        groups_names = set(policy_registry().names())
        stream_only = policy in stream_registry(lambda w: None).names() and policy not in groups_names  # type: ignore[arg-type,return-value]
        mode = "continuous" if stream_only else "groups"
        reason = f"{mode}: policy {policy!r} plans {'continuously' if stream_only else 'groups'}"
    else:
        reason = f"{mode}: asked for"
    if mode == "continuous":
        if search_budget is not None:
            raise InputError("--search-budget is for the groups mode's agent-search; in continuous mode the search "
                             "is rollout's own (--window-size sets the jobs each decision chooses among)")
        if model is not None and not isinstance(model, (str, Path)):
            raise InputError("a continuous plan takes a stream model file (--model STREAM.npz)")
        plan: ContinuousPlan = plan_continuous(window, node, policy=policy, pin_runtime=pin_runtime,
                                               window_size=window_size, seed=seed,
                                               model=str(model) if model is not None else None)
        return plan.model_copy(update={"mode_reason": reason})
    if window_size is not None:
        raise InputError("--window-size is for the continuous mode (the queued jobs each decision chooses among)")
    groups = plan_window(window, node, policy=policy, model=model, pin_runtime=pin_runtime, seed=seed,
                         search_budget=search_budget)
    if mode == "groups":
        return as_groups(groups, reason)
    if mode is not None:
        raise InputError(f"unknown mode {mode!r}: choose groups or continuous")
    return choose_mode(window, node, groups, pin_runtime=pin_runtime, seed=seed)
