"""The twin test's premise: the calibrator reaches the simulated node only through the measuring protocol."""

from __future__ import annotations

import pytest

from env.calibration.calibrate import PROTOCOL, CalibrationConfig, ProtocolOnly, calibrate
from env.measure.probing import PROBE, Placement
from env.sim.measuring import sim_measuring_backend
from env.sim.variants import reference_model

SMALL = CalibrationConfig(probes=2, heldout=3, seed=0, jobs=["EP", "MG"], max_nfev=8, rounds=1, ensemble=4, candidates=20)


class Audited:
    """A backend wrapper that records every attribute asked of it and refuses anything beyond the protocol."""

    def __init__(self, inner) -> None:
        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "asked", set())

    def __getattribute__(self, name: str):
        if name in ("_inner", "asked", "__class__"):
            return object.__getattribute__(self, name)
        object.__getattribute__(self, "asked").add(name)
        if name not in PROTOCOL:
            raise AssertionError(f"the calibrator asked the backend for {name!r}")
        return getattr(object.__getattribute__(self, "_inner"), name)


def test_the_simulated_node_holds_its_parameters_in_no_attribute():
    b = sim_measuring_backend(reference_model(), noise_sd=0.0, seed=0)
    assert not hasattr(b, "__dict__")  # slots only: nothing to read the model from
    public = {n for n in dir(b) if not n.startswith("__")}
    assert public == set(PROTOCOL)
    shape = b.shape()
    assert all(d.memory_bandwidth_gbs is None for d in shape.numa)  # discovery does not know bandwidth
    assert shape.l3[0].ways == 11 and len(shape.cpus) == 24  # it does know the shape


def test_protocol_only_refuses_everything_else():
    g = ProtocolOnly(sim_measuring_backend(reference_model()))
    assert g.simulated is True and "MG" in g.jobs()
    for name in ("_b", "model", "params", "__dict__"):
        with pytest.raises(AttributeError):
            getattr(g, name)


def test_the_calibrator_asks_the_backend_for_the_protocol_only():
    audited = Audited(sim_measuring_backend(reference_model(), noise_sd=0.03, seed=1))
    result = calibrate(audited, SMALL)
    asked = object.__getattribute__(audited, "asked")
    assert asked <= set(PROTOCOL) and "measure" in asked
    assert result.model.provenance.heldout.n == 3
    assert result.model.provenance.corun_probes == 2


def test_noise_is_seeded_per_measurement():
    b = sim_measuring_backend(reference_model(), noise_sd=0.05, seed=0)
    g = [Placement("MG", tuple(range(6))), Placement(PROBE, tuple(range(6, 12)))]
    a1, a2, c = b.measure(g, seed=5), b.measure(g, seed=5), b.measure(g, seed=6)
    assert a1.times_s == a2.times_s and a1.times_s != c.times_s
    quiet = sim_measuring_backend(reference_model(), noise_sd=0.0, seed=0).measure(g, seed=5)
    assert all(abs(x / y - 1) < 0.25 for x, y in zip(a1.times_s, quiet.times_s))
    assert a1.node_seconds == max(a1.times_s)


def test_a_node_without_jobs_is_one_line():
    from env.errors import InputError

    b = sim_measuring_backend(reference_model())

    class NoJobs:
        simulated = True
        shape, measure = b.shape, b.measure

        def jobs(self):
            return []

    with pytest.raises(InputError, match="no jobs to calibrate on: profile some first"):
        calibrate(NoJobs(), SMALL.__class__(probes=2))
