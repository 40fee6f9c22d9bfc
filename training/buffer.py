"""The learner's replay buffer: transitions of the set-encoder's states, padded to the largest training window."""

from __future__ import annotations

from typing import Any

import numpy as np

from env.plan import actions


class Replay:
    """Transitions with their states padded to ``n_max`` tokens (the largest training window). A transition is
    (state, mask, action, reward, next state, next mask, terminated), a state (tokens, context, current)."""

    def __init__(self, capacity: int, n_max: int, d_token: int, d_context: int) -> None:
        self.capacity, self.pos, self.size = capacity, 0, 0
        z = lambda *s, t=np.float32: np.zeros((capacity, *s), t)  # noqa: E731
        self.arrays = {
            "tok": z(n_max, d_token), "n": z(t=np.int16), "ctx": z(d_context), "cur": z(t=np.int16),
            "mask": z(actions.N_ACTIONS, t=np.bool_), "action": z(t=np.int64), "reward": z(),
            "ntok": z(n_max, d_token), "nn": z(t=np.int16), "nctx": z(d_context), "ncur": z(t=np.int16),
            "nmask": z(actions.N_ACTIONS, t=np.bool_), "done": z(),
            "soft": z(),  # a demonstration's soft label of skip (training.expert.skip_target); -1: none
        }

    def add(self, tr: tuple, soft: float = -1.0) -> None:
        (tok, ctx, cur), mask, a, r, (ntok, nctx, ncur), nmask, done = tr
        i, A = self.pos, self.arrays
        A["tok"][i] = 0.0
        A["tok"][i, : len(tok)] = tok
        A["ntok"][i] = 0.0
        A["ntok"][i, : len(ntok)] = ntok
        for k, v in (("n", len(tok)), ("ctx", ctx), ("cur", cur), ("mask", mask), ("action", a), ("reward", r),
                     ("nn", len(ntok)), ("nctx", nctx), ("ncur", ncur), ("nmask", nmask), ("done", float(done)),
                     ("soft", soft)):
            A[k][i] = v
        self.pos = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def sample(self, batch: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        idx = rng.integers(0, self.size, size=batch)
        return {k: v[idx] for k, v in self.arrays.items()}

    def state_dict(self) -> dict[str, Any]:
        return {"pos": self.pos, "size": self.size, **{k: v[: self.size].copy() for k, v in self.arrays.items()}}

    def load_state_dict(self, d: dict[str, Any]) -> None:
        self.pos, self.size = int(d["pos"]), int(d["size"])
        for k, v in self.arrays.items():
            v[: self.size] = d[k] if k in d else (-1.0 if k == "soft" else 0)  # "soft": checkpoints before it


def batch_tensors(b: dict[str, np.ndarray], pre: str) -> tuple[Any, ...]:
    """A sampled batch's states (``pre`` "": the states, "n": the next states) as the set network's tensors:
    tokens, which tokens are jobs, context, current."""
    import torch

    tok, n, ctx, cur = b[pre + "tok"], b["n" if not pre else "nn"], b[pre + "ctx"], b[pre + "cur"]
    valid = np.arange(tok.shape[1])[None, :] < n[:, None]
    return (torch.from_numpy(tok), torch.from_numpy(valid), torch.from_numpy(ctx), torch.from_numpy(cur.astype(np.int64)))
