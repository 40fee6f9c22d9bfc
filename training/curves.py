"""What a training run records as it goes: ``RUN/log.jsonl`` (one record per episode and per validation, the
project's own record, read back by ``--export-only`` and the curves) and the same numbers as TensorBoard scalars
in ``RUN/tensorboard`` (``torch.utils.tensorboard.SummaryWriter``: ``tensorboard --logdir RUN``); at the end
``RUN/curves.png`` from the log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

#: record field -> TensorBoard tag (the learner's numbers, present once updates have begun)
_EPISODE_TAGS = {"throughput": "episode/throughput_vs_timeshare", "critic_loss": "losses/critic",
                 "actor_loss": "losses/actor", "distill": "losses/distill", "alpha": "losses/alpha",
                 "entropy": "losses/entropy"}


class RunLog:
    """The run's log and its TensorBoard writer. A resumed run (``resume_step``) cuts both after its checkpoint's
    step: the episodes after it are played again."""

    def __init__(self, run_dir: Path, resume_step: int | None = None) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.path = run_dir / "log.jsonl"
        if resume_step is not None and self.path.exists():
            kept = [ln for ln in self.path.read_text().splitlines() if ln.strip() and json.loads(ln)["step"] <= resume_step]
            self.path.write_text("".join(ln + "\n" for ln in kept))
        self.file = open(self.path, "a" if resume_step is not None else "w", encoding="utf-8")  # noqa: SIM115 - open for the run
        self.writer = SummaryWriter(str(run_dir / "tensorboard"), purge_step=resume_step)

    def episode(self, rec: dict[str, Any]) -> None:
        """An episode's record (``kind`` "episode")."""
        self.file.write(json.dumps(rec) + "\n")
        for k, tag in _EPISODE_TAGS.items():
            if k in rec:
                self.writer.add_scalar(tag, rec[k], rec["step"])
        for t in rec.get("taught", ()):
            self.writer.add_scalar("episode/teacher_throughput_vs_timeshare", t["throughput"], rec["step"])

    def validation(self, rec: dict[str, Any]) -> None:
        """A validation's record (``kind`` "eval")."""
        self.file.write(json.dumps(rec) + "\n")
        self.writer.add_scalar("validation/agent", rec["agent"], rec["step"])
        self.writer.add_scalar("validation/greedy", rec["baseline_greedy"], rec["step"])
        self.writer.add_scalar("validation/cells_below_greedy", rec["cells_below_greedy"], rec["step"])
        for cell, v in rec["cells"].items():
            self.writer.add_scalar(f"validation_cells/{cell}", v, rec["step"])

    def flush(self) -> None:
        self.file.flush()
        self.writer.flush()

    def close(self) -> None:
        self.file.close()
        self.writer.close()


def plot_curves(log_path: Path, png: Path) -> None:
    """The training episodes' throughput (a 100-episode mean) and the validations against greedy; α."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    recs = [json.loads(ln) for ln in log_path.read_text().splitlines() if ln.strip()]
    eps = [r for r in recs if r["kind"] == "episode"]
    evs = [r for r in recs if r["kind"] == "eval"]
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    if eps:
        k = 100
        y = np.array([r["throughput"] for r in eps])
        sm = np.convolve(y, np.ones(k) / k, mode="valid") if len(y) >= k else y
        ax[0].plot([r["step"] for r in eps][len(eps) - len(sm):], sm, color="tab:gray", label="training episodes (sampled)")
    if evs:
        ax[0].plot([r["step"] for r in evs], [r["agent"] for r in evs], "o-", color="tab:red", label="validation: agent")
        ax[0].axhline(evs[-1]["baseline_greedy"], color="tab:green", linestyle=":", label="validation: greedy")
    ax[0].axhline(1.0, color="black", linewidth=0.7)
    ax[0].set_title("throughput vs time sharing (simulated)")
    ax[0].legend(fontsize=8)
    al = [(r["step"], r["alpha"]) for r in eps if "alpha" in r]
    if al:
        ax[1].plot(*zip(*al), color="tab:purple")
        ax[1].set_yscale("log")
    ax[1].set_title("α")
    for a in ax:
        a.set_xlabel("env steps")
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)
