"""Fitting the contention model's parameter vector to measured runs (scipy.optimize.least_squares).

Residuals: log(predicted / measured) for every timed program of every run, plus a weak prior pulling each
entry toward its starting value (so a direction no measurement constrains stays put instead of wandering;
weight ``PRIOR_WEIGHT``: one unit of a transformed parameter costs like a 3 % error on one run).

Cost: a run depends on the node-level entries and on the entries of the jobs it holds, so the Jacobian is
sparse (``jac_sparsity``: scipy perturbs many jobs' columns at once) and predictions are memoised by the
entries a run depends on (a perturbation recomputes only the runs it touches).

Uncertainty, for choosing probes: the fit's Laplace approximation (covariance from the Jacobian at the
optimum, prior rows included so it is proper) gives an ensemble of plausible parameter vectors; a candidate
co-run's uncertainty is the spread of its predicted makespan over the ensemble.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from scipy.optimize import least_squares
from scipy.sparse import lil_matrix

from env.calibration.space import Space
from env.node.spec import NodeSpec
from env.measure.probing import BUBBLE, LATENCY, PROBE, STREAM, Placement
from env.sim.model import Geometry, JobParams
from env.sim.params import SimParams
from env.sim.probes import DEFAULT_PROBE, GroupModel

PRIOR_WEIGHT = 0.03
_NOT_FITTED = (STREAM, LATENCY)  # microbenchmarks: read directly as node parameters, not fitted
_CLIP = 4.0  # |log ratio| beyond this is a failed prediction (inf, nan): capped so the optimiser can recover
_FAILED_RMS = 0.7  # a fit whose typical prediction is off by more than a factor 2 is not a node model
_STATUS = {0: "stopped at the evaluation limit", 1: "converged (gradient)", 2: "converged (cost)",
           3: "converged (parameters)", 4: "converged (cost and parameters)"}


@dataclass(frozen=True)
class Obs:
    """One measured run as the fit sees it."""

    group: tuple[Placement, ...]
    times: tuple[float | None, ...]


class Predictor:
    """Times of placement groups for a parameter vector (memoised per run and the entries it depends on).

    A fit evaluates the same runs for vectors that differ in a few entries (the Jacobian perturbs one column group at
    a time), so what an evaluation builds is kept by the entries it comes from: the node-level parameters with their
    geometry and a memo of placed jobs (``GroupModel.memo``) per node-level vector, and each job's parameters per its
    own entries. The doubles are those of a model built afresh (tested)."""

    _NODES = 8  # node-level vectors kept (an ensemble of vectors cycles through more: each is rebuilt then)

    def __init__(self, node: NodeSpec, base: SimParams, space: Space) -> None:
        self.node = node
        self.base = base
        self.space = space
        self._memo: dict[tuple, list[float | None]] = {}
        self._deps: dict[object, list[int]] = {}
        self._nodes: dict[bytes, tuple[SimParams, Geometry, dict]] = {}
        self._jobs: dict[tuple[str, bytes], JobParams] = {}

    def deps(self, group: Sequence[Placement]) -> list[int]:
        idx = [0] + ([1] if any(p.job == BUBBLE for p in group) else [])
        for p in group:
            if p.job in self.space.index:
                s = self.space.job_slice(p.job)
                idx.extend(range(s.start, s.stop))
        return idx

    def _node_level(self, x: np.ndarray) -> tuple[SimParams, Geometry, dict]:
        key = x[: self.space.n_node].tobytes()
        hit = self._nodes.get(key)
        if hit is None:
            if len(self._nodes) >= self._NODES:
                self._nodes.pop(next(iter(self._nodes)))
            sp = self.space.node_params(x, self.base)
            hit = self._nodes[key] = (sp, Geometry(self.node, sp), {})
        return hit

    def _job(self, x: np.ndarray, job: str) -> JobParams:
        s = self.space.job_slice(job)
        key = (job, x[s].tobytes())
        hit = self._jobs.get(key)
        if hit is None:
            if len(self._jobs) > 100_000:
                self._jobs.clear()
            hit = self._jobs[key] = self.space.job_params(x, job)
        return hit

    def model(self, x: np.ndarray, jobs: Sequence[str]) -> GroupModel:
        sp, g, memo = self._node_level(x)
        if len(memo) > 200_000:
            memo.clear()
        params = {j: self._job(x, j) for j in jobs if j in self.space.index}
        probe = params.pop(PROBE, None)
        return GroupModel(self.node, sp, params, probe if probe is not None else DEFAULT_PROBE, memo=memo, geometry=g)

    def times(self, x: np.ndarray, group: Sequence[Placement], key: object = None) -> list[float | None]:
        gkey = key if key is not None else tuple(group)
        deps = self._deps.get(gkey)
        if deps is None:
            deps = self._deps[gkey] = self.deps(group)
        k = (gkey, x[deps].tobytes())
        hit = self._memo.get(k)
        if hit is not None:
            return hit
        try:
            t, _ = self.model(x, [p.job for p in group]).times(group)
        except (ZeroDivisionError, OverflowError, ValueError):
            t = [math.inf if p.job != BUBBLE else None for p in group]
        if len(self._memo) > 400_000:
            self._memo.clear()
        self._memo[k] = t
        return t


class Fit:
    """A least-squares fit of ``space`` to ``obs``."""

    def __init__(self, node: NodeSpec, base: SimParams, space: Space, obs: Sequence[Obs], prior: np.ndarray) -> None:
        self.space = space
        self.obs = [o for o in obs if any(t is not None and p.job not in _NOT_FITTED for p, t in zip(o.group, o.times))]
        self.pred = Predictor(node, base, space)
        self.prior = prior
        self.rows: list[tuple[int, int]] = [(i, k) for i, o in enumerate(self.obs) for k, t in enumerate(o.times)
                                            if t is not None and t > 0 and o.group[k].job not in _NOT_FITTED]

    def residuals(self, x: np.ndarray) -> np.ndarray:
        out = np.empty(len(self.rows) + self.space.size)
        cache: dict[int, list[float | None]] = {}
        for r, (i, k) in enumerate(self.rows):
            t = cache.get(i)
            if t is None:
                t = cache[i] = self.pred.times(x, self.obs[i].group, key=i)
            p = t[k]
            v = math.log(p / self.obs[i].times[k]) if p is not None and 0 < p < math.inf else _CLIP
            out[r] = v if -_CLIP <= v <= _CLIP else math.copysign(_CLIP, v)
        out[len(self.rows):] = PRIOR_WEIGHT * (x - self.prior)
        return out

    def sparsity(self) -> lil_matrix:
        m = lil_matrix((len(self.rows) + self.space.size, self.space.size), dtype=np.int8)
        for r, (i, _) in enumerate(self.rows):
            for c in self.pred.deps(self.obs[i].group):
                m[r, c] = 1
        for c in range(self.space.size):
            m[len(self.rows) + c, c] = 1
        return m

    def run(self, x0: np.ndarray, max_nfev: int = 60, progress: Callable[[str], None] | None = None):
        x0 = np.clip(x0, self.space.lo + 1e-9, self.space.hi - 1e-9)
        res = least_squares(self.residuals, x0, bounds=(self.space.lo, self.space.hi), jac_sparsity=self.sparsity(),
                            method="trf", tr_solver="lsmr", max_nfev=max_nfev, x_scale=1.0, xtol=1e-6, ftol=1e-6)
        if progress:
            problem = self.failure(res)
            progress(f"fit: {len(self.rows)} timed runs, {self.space.size} parameters, cost {res.cost:.4f}, "
                     f"{res.nfev} evaluations, " + (f"FAILED: {problem}" if problem else _STATUS.get(res.status, "stopped")))
        return res

    def failure(self, res) -> str | None:
        """Why the fit at ``res`` is no fit (one line), or None. Least squares may stop 'converged' on a flat
        cost: when most predictions sit at the clip (off by e^4 or more) nothing moves them, so the status alone
        does not say the fit worked; the share of clipped runs and the typical error do."""
        if res.status < 0:
            return f"least squares refused its input ({res.message})"
        r = np.abs(res.fun[: len(self.rows)])
        if not len(r):
            return "no timed run to fit"
        clipped = float(np.mean(r >= _CLIP - 1e-9))
        rms = float(np.sqrt(np.mean(r * r)))
        if clipped > 0.2 or rms > _FAILED_RMS:
            return (f"after {res.nfev} evaluations the model still misses the measured times by a factor "
                    f"{math.exp(rms):.1f} typical ({clipped:.0%} of {len(r)} runs beyond e^{_CLIP:.0f})")
        return None

    def rms_log(self, x: np.ndarray) -> float:
        r = self.residuals(x)[: len(self.rows)]
        return float(np.sqrt(np.mean(r * r))) if len(r) else 0.0

    def ensemble(self, res, n: int, rng: np.random.Generator) -> list[np.ndarray]:
        """``n`` parameter vectors drawn from the fit's Laplace approximation around ``res.x``."""
        J = res.jac.toarray() if hasattr(res.jac, "toarray") else np.asarray(res.jac)
        m = len(self.rows)
        dof = max(1, m - self.space.size // 4)
        s2 = max(float(np.sum(res.fun[:m] ** 2)) / dof, 1e-6)
        H = J.T @ J + 1e-8 * np.eye(J.shape[1])
        cov = s2 * np.linalg.inv(H)
        cov = (cov + cov.T) / 2
        w, v = np.linalg.eigh(cov)
        root = v * np.sqrt(np.clip(w, 0, None))
        out = []
        for _ in range(n):
            x = res.x + root @ rng.standard_normal(len(w))
            out.append(np.clip(x, self.space.lo, self.space.hi))
        return out
