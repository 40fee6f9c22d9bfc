"""A plan as a *script* (a schedule-level action, then ordered groups of (slot, job-level action)) and its replay
through the window episode, so a search's plan is built exactly as the agent's is (``env.episode``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from env.episode.window import Episode
from env.plan.actions import SKIP


@dataclass
class Script:
    """A complete decision for one chunk: schedule action, then groups of (slot in the chunk, job action)."""

    schedule: int
    groups: list[list[tuple[int, int]]]
    predicted_total_s: float | None = None
    predicted_makespans: list[float] | None = None

    def canonical(self) -> "Script":
        """Groups ordered by their first slot, members by slot: the order the evaluator and the replay share."""
        groups = sorted((sorted(g) for g in self.groups if g), key=lambda g: g[0][0])
        return Script(self.schedule, groups, self.predicted_total_s, None)


class ScriptChooser:
    """Replays a script through an episode: the wanted job's action when it is current, skip otherwise."""

    def __init__(self, script: Script) -> None:
        self.schedule = script.schedule
        self.pending = [list(g) for g in script.groups]
        self.closing = False  # a scripted group is complete: skip until the episode closes it

    def __call__(self, obs: np.ndarray, mask: np.ndarray, ep: Episode) -> int:
        if ep.schedule_index is None:
            return self.schedule
        if self.closing:
            if ep.open_slots:
                return SKIP
            self.closing = False
        group = self.pending[0]
        slot, action = group[0]
        if ep.current != slot:
            return SKIP
        group.pop(0)
        if not group:
            self.pending.pop(0)
            self.closing = True
        return action
