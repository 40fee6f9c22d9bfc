"""A tiny masked chain with a known optimum, for the agent's tests (no dependency on env/).

start (context c ∈ {0, 1} drawn at reset) — valid {3, 7, 11}:
  3  → +0.5, to "trap" where only 256 is valid (→ 0, end): return 0.5 (a greedy bait)
  11 → +0.1, end (the next mask is all zeros, as a terminal state may report)
  7  →  0,   to "good(c)" — valid {20, 21, 22}: 21 if c = 0, 22 if c = 1 → "final", otherwise → "final-wrong"
             "final": valid {100, 200}: 200 → +1, 100 → 0, end;  "final-wrong": both → 0, end
The optimum is 7, (21 | 22 by context), 200: return 1.0 (discounted 0.81 with γ = 0.9) against the trap's 0.5.
Observations are one-hot over the 7 states. Stepping a masked action raises: the agent must never do it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

N_ACTIONS = 257
START0, START1, TRAP, GOOD0, GOOD1, FINAL, WRONG = range(7)
VALID: dict[int, tuple[int, ...]] = {
    START0: (3, 7, 11),
    START1: (3, 7, 11),
    TRAP: (256,),
    GOOD0: (20, 21, 22),
    GOOD1: (20, 21, 22),
    FINAL: (100, 200),
    WRONG: (100, 200),
}
OPTIMAL = {START0: 7, START1: 7, GOOD0: 21, GOOD1: 22, FINAL: 200}


def mask_of(state: int | None) -> np.ndarray:
    m = np.zeros(N_ACTIONS, np.int8)
    if state is not None:
        m[list(VALID[state])] = 1
    return m


def obs_of(state: int | None) -> np.ndarray:
    o = np.zeros(7, np.float32)
    if state is not None:
        o[state] = 1.0
    return o


class ToyChain:
    def __init__(self) -> None:
        self.np_random = np.random.default_rng(0)
        self.state: int | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        if seed is not None:
            self.np_random = np.random.default_rng(seed)
        self.state = START0 + int(self.np_random.integers(2))
        return obs_of(self.state), {"action_mask": mask_of(self.state)}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        s = self.state
        assert s is not None
        if action not in VALID[s]:
            raise AssertionError(f"masked action {action} taken in state {s}")
        reward, nxt = 0.0, None
        if s in (START0, START1):
            if action == 3:
                reward, nxt = 0.5, TRAP
            elif action == 11:
                reward = 0.1
            else:
                nxt = GOOD0 if s == START0 else GOOD1
        elif s in (GOOD0, GOOD1):
            nxt = FINAL if action == OPTIMAL[s] else WRONG
        elif s == FINAL:
            reward = 1.0 if action == 200 else 0.0
        self.state = nxt
        # At the end the observation is the all-zero vector and the mask is all zeros.
        return obs_of(nxt), reward, nxt is None, False, {"action_mask": mask_of(nxt)}
