"""The command line's pictures: a run's schedule, an evaluation, a calibration's fit and drift, a job's
interference curves. matplotlib is imported when a picture is drawn, not before: the command line (and
`cosched serve`) start without it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from env.errors import InputError
from env.plan.models import RunReport
from env.plan.stream_plan import ContinuousPlan, ContinuousRunReport
from profiler.errors import ProfilerInputError
from profiler.interference import InterferenceProfile


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def launches_chart(bars: list[tuple[str, list[int], float, float, bool]], title: str, path: Path, node_cpus: list[int],
                   kind: str, note: str | None = None) -> Path:
    """Jobs that start at events: each job (id, CPUs, start, end, ok) a bar on each of its CPUs from its start to its
    end, a thin line at each start (no group bands: a job starts when what it needs frees)."""
    plt = _pyplot()
    from matplotlib.patches import Patch

    fig, ax = plt.subplots(figsize=(10, max(2.5, 0.35 * len(node_cpus) + 1.5)))
    cmap = plt.get_cmap("tab20")
    colours: dict[str, tuple[float, ...]] = {}
    for jid, cpus, start, end, ok in bars:
        colour = colours.setdefault(jid, cmap(len(colours) % 20))
        for c in cpus or node_cpus:
            ax.broken_barh([(start, max(end - start, 1e-6))], (c - 0.4, 0.8), facecolors=colour,
                           edgecolor="black" if ok else "red", linewidth=0.6)
        ax.axvline(start, color="grey", linewidth=0.5, linestyle=":")
    end = max((b[3] for b in bars), default=0.0)
    for jid, cpus, start, stop, _ in bars:  # each bar named where it is wide enough
        if stop - start > 0.06 * max(end, 1e-9):
            rows = sorted(cpus or node_cpus)
            ax.text((start + stop) / 2, rows[len(rows) // 2], jid, ha="center", va="center", fontsize=7, clip_on=True)
    ax.set_title(title, fontsize=10)
    if note:
        fig.text(0.01, 0.005, note, fontsize=7, color="dimgrey")
    ax.set_xlabel(f"time, s ({kind})")
    ax.set_ylabel("CPU")
    ax.set_yticks(node_cpus if len(node_cpus) <= 48 else node_cpus[::max(1, len(node_cpus) // 24)])
    ax.set_xlim(0, max(end, 1e-3) * 1.02)
    ax.legend(handles=[Patch(color=c, label=j) for j, c in list(colours.items())[:40]], loc="upper left",
              bbox_to_anchor=(1.0, 1.0), fontsize=7)
    fig.tight_layout()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
    except OSError as exc:
        raise InputError(f"cannot write the picture {path}: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)
    return path


def plan_chart(plan: ContinuousPlan, path: Path, node_cpus: list[int]) -> Path:
    """A continuous plan's predicted launches (simulated): each job on its CPUs from its predicted start to end."""
    bars = [(j.id, j.cpus, j.predicted_start_s or 0.0, j.predicted_end_s or 0.0, True) for j in plan.launches
            if j.predicted_start_s is not None and j.predicted_end_s is not None]
    if not bars:
        raise InputError("the plan has no predicted starts and ends to draw")
    span = f": {plan.predicted_makespan_s:.1f} s" if plan.predicted_makespan_s is not None else ""
    return launches_chart(bars, f"continuous plan for {plan.node.name} ({plan.policy}, Cmax {plan.max_concurrency}), "
                          f"predicted{span}", path, node_cpus, "simulated", plan.predictions_source)


def schedule_chart(report: RunReport | ContinuousRunReport, path: Path, node_cpus: list[int]) -> Path:
    """Draw the executed (or simulated) schedule: each job a bar on each of its CPUs over its run."""
    if isinstance(report, ContinuousRunReport):
        kind = "simulated" if report.simulated else "measured"
        tput = f", throughput vs time sharing {report.throughput_vs_timeshare:.2f}" if report.throughput_vs_timeshare else ""
        bars = [(j.id, j.cpus, j.start_s, j.end_s, j.exit_code == 0) for j in report.jobs]
        return launches_chart(bars, f"executed continuous plan on {report.plan.node.name} ({kind}): {report.total_s:.1f} s"
                              f"{tput}", path, node_cpus, kind,
                              f"time sharing: {report.timeshare_source}" if report.timeshare_source else None)
    plt = _pyplot()
    from matplotlib.patches import Patch

    plan_jobs = {j.id: j for g in report.plan.groups for j in g.jobs}
    fig, ax = plt.subplots(figsize=(10, max(2.5, 0.35 * len(node_cpus) + 1.5)))
    cmap = plt.get_cmap("tab20")
    colours: dict[str, tuple[float, ...]] = {}
    offset = 0.0
    for g in report.groups:
        for job in g.jobs:
            colour = colours.setdefault(job.id, cmap(len(colours) % 20))
            cpus = node_cpus if g.solo_profile or job.id not in plan_jobs else plan_jobs[job.id].cpus
            for c in cpus:
                ax.broken_barh([(offset + job.start_s, job.wall_s)], (c - 0.4, 0.8), facecolors=colour,
                               edgecolor="black" if job.exit_code == 0 else "red", linewidth=0.6)
        offset += g.makespan_s
        ax.axvline(offset, color="grey", linewidth=0.8, linestyle=":")
    kind = "simulated" if report.simulated else "measured"
    tput = f", throughput vs time sharing {report.throughput_vs_timeshare:.2f}" if report.throughput_vs_timeshare else ""
    ax.set_title(f"executed schedule on {report.plan.node.name} ({kind}): {report.total_s:.1f} s{tput}", fontsize=10)
    if report.timeshare_source:  # measured in this run, or predicted from profiles
        fig.text(0.01, 0.005, f"time sharing: {report.timeshare_source}", fontsize=7, color="dimgrey")
    ax.set_xlabel(f"time, s ({kind})")
    ax.set_ylabel("CPU")
    ax.set_yticks(node_cpus)
    ax.set_xlim(0, max(offset, 1e-3) * 1.02)
    ax.legend(handles=[Patch(color=c, label=j) for j, c in colours.items()], loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def eval_chart(doc: dict[str, Any], path: Path) -> None:
    """``cosched eval --plot``: the mean throughput per policy, and per window."""
    plt = _pyplot()
    pols = doc["policies"]
    kind = "simulated" if doc["simulated"] else "measured"
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(14, 4.5), gridspec_kw={"width_ratios": [1, 3]})
    means = [doc["mean"][p] for p in pols]
    ax1.bar(pols, means, color=[plt.get_cmap("tab10")(i) for i in range(len(pols))])
    ax1.axhline(1.0, color="black", linewidth=0.8)
    ax1.set_ylabel(f"throughput vs time sharing ({kind})")
    ax1.set_title(f"mean over {len(doc['windows'])} windows")
    for i, m in enumerate(means):
        ax1.text(i, m, f"{m:.2f}", ha="center", va="bottom", fontsize=8)
    ax1.tick_params(axis="x", rotation=30)
    n = len(doc["windows"])
    width = 0.8 / len(pols)
    for k, p in enumerate(pols):
        ax2.bar([i + k * width for i in range(n)], [w["results"][p]["throughput_vs_timeshare"] for w in doc["windows"]],
                width=width, label=p, color=plt.get_cmap("tab10")(k))
    ax2.axhline(1.0, color="black", linewidth=0.8)
    ax2.set_xticks([i + 0.4 - width / 2 for i in range(n)], [str(w["index"]) for w in doc["windows"]], fontsize=7)
    ax2.set_xlabel("window")
    ax2.set_title(f"per window, {doc['node']} ({kind})")
    ax2.legend(fontsize=7, ncol=len(pols))
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=120)
    except OSError as exc:
        raise InputError(f"cannot write the picture {path}: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)


def calibration_scatter(points: list[tuple[float, float]], path: Path, model: Any, simulated: bool, title: str | None = None) -> Path:
    """``cosched calibrate``: held-out co-runs, predicted by the node model against measured."""
    plt = _pyplot()
    kind = "simulated" if simulated else "measured"
    fig, ax = plt.subplots(figsize=(5.5, 5.5))
    if points:
        m = [a for a, _ in points]
        p = [b for _, b in points]
        ax.scatter(m, p, s=18)
        lo, hi = min(m + p) * 0.9, max(m + p) * 1.1
        ax.plot([lo, hi], [lo, hi], color="black", linewidth=0.8)
        ax.plot([lo, hi], [lo * 1.05, hi * 1.05], color="grey", linewidth=0.6, linestyle=":")
        ax.plot([lo, hi], [lo * 0.95, hi * 0.95], color="grey", linewidth=0.6, linestyle=":")
        ax.set_xscale("log")
        ax.set_yscale("log")
    h = model.provenance.heldout
    ax.set_title(title or (f"held-out co-runs on {model.provenance.measured_node}: median {h.median_abs_error_pct:.1f} %, "
                           f"p90 {h.p90_abs_error_pct:.1f} %" if h else "held-out co-runs"), fontsize=9)
    ax.set_xlabel(f"measured group makespan, s ({kind})")
    ax.set_ylabel("predicted by the node model, s")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def drift_chart(rows: list[Any], path: Path, simulated: bool) -> Path:
    """``cosched calibrate --report``: each judged group's prediction error, in the order measured."""
    plt = _pyplot()
    judged = [r for r in rows if r.source in ("heldout", "run") and r.abs_error_pct is not None]
    fig, ax = plt.subplots(figsize=(8, 3.5))
    for src, colour in (("heldout", "tab:blue"), ("run", "tab:orange")):
        pts = [(k, r.abs_error_pct) for k, r in enumerate(judged) if r.source == src]
        if pts:
            ax.scatter([k for k, _ in pts], [e for _, e in pts], s=12, color=colour, label=src)
    ax.set_xlabel("measured group, in the order measured")
    ax.set_ylabel(f"abs error of predicted makespan, % ({'simulated' if simulated else 'measured'})")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def interference_chart(c: InterferenceProfile, path: Path) -> None:
    """``cosched profiles show --plot``: a job's interference curves."""
    plt = _pyplot()
    panels = [("sensitivity: next to the pressure generator", "generator level", c.sensitivity)]
    panels += [(t, x, pts) for t, x, pts in (("slowdown by L3 ways", "ways", c.ways), ("slowdown by MBA cap", "MBA %", c.mba)) if pts]
    fig, axes = plt.subplots(1, len(panels), figsize=(max(6.5, 5 * len(panels)), 4.2), squeeze=False)
    label = "simulated" if c.simulated else "measured"
    for ax, (title, xlabel, pts) in zip(axes[0], panels):
        xs = ([0.0] if xlabel == "generator level" else []) + [p.x for p in pts]
        ys = ([1.0] if xlabel == "generator level" else []) + [p.slowdown for p in pts]
        ax.plot(xs, ys, "o-")
        ax.axhline(1.0, color="grey", lw=0.8, ls=":")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("time / time alone")
        ax.set_title(title, fontsize=10)
    axes[0][0].text(0.98, 0.04, f"pressure on the reference probe: {c.pressure:.3f}", transform=axes[0][0].transAxes, ha="right", va="bottom")
    fig.suptitle(f"{c.name} on {c.node_id} ({label}, one run per point)", fontsize=10)
    fig.tight_layout()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=100)
    except OSError as exc:
        raise ProfilerInputError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)
