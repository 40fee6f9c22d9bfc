"""The stream learner's replay buffer: transitions of unpadded ``StreamObs`` states (a state is stored once; the next
state of a transition is the state of the next), padded into batches of the largest training window."""

from __future__ import annotations

from typing import Any

import numpy as np

from env.episode.stream_gym import N_OPTIONS, StreamObs

State = tuple[np.ndarray, int, np.ndarray, np.ndarray, np.ndarray]  # tokens, n_queue, context, options, pairs


def compact(o: StreamObs) -> State:
    return (o.tokens, o.n_queue, o.context, o.options, o.pairs.astype(np.float16))


def padded_mask(o: StreamObs | None, window: int) -> np.ndarray:
    """The state's mask in the batch's action space (``window`` slots; "nothing" last); all False for no state."""
    m = np.zeros(window * N_OPTIONS + 1, np.bool_)
    if o is not None:
        m[:len(o.mask) - 1] = o.mask[:-1]
        m[-1] = o.mask[-1]
    return m


def padded_action(o: StreamObs, a: int, window: int) -> int:
    """A state's own action index in the batch's action space."""
    return window * N_OPTIONS if a == len(o.slots) * N_OPTIONS else a


class Replay:
    def __init__(self, capacity: int, window: int) -> None:
        self.capacity, self.window = capacity, window
        self.items: list[tuple] = []
        self.pos = 0

    @property
    def size(self) -> int:
        return len(self.items)

    def add(self, o: StreamObs, a: int, r: float, o2: StreamObs | None, done: bool) -> None:
        s = compact(o)
        tr = (s, padded_mask(o, self.window), padded_action(o, a, self.window), float(r),
              compact(o2) if o2 is not None else s, padded_mask(o2, self.window), float(done))
        if len(self.items) < self.capacity:
            self.items.append(tr)
        else:
            self.items[self.pos] = tr
        self.pos = (self.pos + 1) % self.capacity

    def sample(self, n: int, rng: np.random.Generator) -> dict[str, Any]:
        import torch

        from agent.streamnet_torch import collate

        idx = rng.integers(len(self.items), size=n)
        b = [self.items[i] for i in idx]
        # padded to this batch's longest queue and running set (the action space: q slots x options, "nothing" last)
        q = max(1, max(max(t[0][1], t[4][1]) for t in b))
        r = max(1, max(max(t[0][0].shape[0] - t[0][1], t[4][0].shape[0] - t[4][1]) for t in b))
        W, K = self.window, N_OPTIONS
        f32 = lambda s: (s[0], s[1], s[2], s[3], s[4].astype(np.float32))  # noqa: E731
        cut = lambda m: np.concatenate([m[:q * K], m[-1:]])  # noqa: E731
        mask = torch.from_numpy(np.stack([cut(t[1]) for t in b]))
        nmask = torch.from_numpy(np.stack([cut(t[5]) for t in b]))
        # the masks travel with the states: the networks then score only the valid starts
        return {"s": (*collate([f32(t[0]) for t in b], q, r), mask),
                "s2": (*collate([f32(t[4]) for t in b], q, r), nmask),
                "mask": mask, "nmask": nmask,
                "action": torch.from_numpy(np.array([t[2] if t[2] < W * K else q * K for t in b], np.int64)),
                "reward": torch.from_numpy(np.array([t[3] for t in b], np.float32)),
                "done": torch.from_numpy(np.array([t[6] for t in b], np.float32))}

__all__ = ["Replay", "compact", "padded_mask", "padded_action"]
