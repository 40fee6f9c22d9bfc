"""The simulated node (``--backend sim``): a documented contention model, its job catalogue, simulated profiles.

Public API:

* ``simulate_plan(plan, node, seed=None, params=DEFAULT_PARAMS) -> SimResult`` (group makespans, per-job end
  times, the total, the time-sharing total); ``run_report(plan, node, seed=None) -> RunReport`` (backend "sim",
  simulated, no run directory); ``plan_from_actions(...)`` to write a plan from explicit action choices.
* ``catalogue(node) -> {name: CatalogueJob}`` (solo time, one-core time, scale factor: from the model itself),
  ``TRAIN_JOBS`` / ``HELD_OUT_JOBS``; ``simulated_profiles(node)``.
* The model: ``env.sim.model`` (docstring: the equations), its node parameters ``env.sim.params``.
  See ``env/sim/README.md`` for the model, the catalogue and the seven behaviours with their numbers.
"""

from env.sim.catalogue import ALL_JOBS, HELD_OUT_JOBS, TRAIN_JOBS, catalogue
from env.sim.params import DEFAULT_PARAMS, SimParams
from env.sim.profiles import simulated_profiles
from env.sim.simulate import SimResult, plan_from_actions, run_report, simulate_plan

__all__ = [
    "ALL_JOBS", "DEFAULT_PARAMS", "HELD_OUT_JOBS", "SimParams", "SimResult", "TRAIN_JOBS", "catalogue",
    "plan_from_actions", "run_report", "simulate_plan", "simulated_profiles",
]
