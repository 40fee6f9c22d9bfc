"""Pictures of schedules: CPUs (rows) by time (columns), one colour per job."""

from __future__ import annotations

from pathlib import Path

from env.plan.models import RunReport


def schedule_chart(report: RunReport, path: Path, node_cpus: list[int]) -> Path:
    """Draw the executed (or simulated) schedule: each job a bar on each of its CPUs over its run."""
    import matplotlib  # here, not at import: the command line (and `cosched serve`) start without it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
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
