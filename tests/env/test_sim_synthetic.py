"""Generated jobs (env.sim.synthetic): a name is the whole description, every sim component resolves it, the
catalogue listing is unchanged, and training mixes them in only on the simulated node."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from env.planners.baselines import GroupEvaluator, search
from env.errors import InputError
from env.episode.jobinfo import sim_provider
from env.sim.nodes import load_node
from env.sim.catalogue import ALL_JOBS, BY_NAME, HELD_OUT_JOBS, catalogue, is_known
from env.sim.simulate import plan_from_actions, simulate_plan
from env.sim.synthetic import is_synthetic, synthetic_entry, synthetic_names

NODE = load_node("sim:reference")


def test_a_name_gives_the_same_job_in_every_process() -> None:
    here = dataclasses.asdict(synthetic_entry("syn-4-17").params)
    code = ("import dataclasses, json; from env.sim.synthetic import synthetic_entry; "
            "print(json.dumps(dataclasses.asdict(synthetic_entry('syn-4-17').params)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    import json

    assert json.loads(out) == here
    assert synthetic_entry("syn-4-18").params != synthetic_entry("syn-4-17").params
    assert synthetic_entry("syn-5-17").params != synthetic_entry("syn-4-17").params


@pytest.mark.parametrize("name", ["syn-1", "syn-a-1", "SYN-1-2", "syn-1-2-3", "fft", ""])
def test_other_names_are_not_generated_jobs(name: str) -> None:
    assert not is_synthetic(name) and synthetic_entry(name) is None
    if name != "fft":
        assert not is_known(name)
        with pytest.raises(KeyError):
            BY_NAME[name]


def test_generated_jobs_stay_in_their_ranges_and_spread() -> None:
    ps = [synthetic_entry(n).params for n in synthetic_names(300, 9)]
    assert all(0.6 < p.parallel < 1.0 and 100 <= p.work_s <= 2000 and 1 <= p.ws_mb <= 32 for p in ps)
    assert all(0 <= p.comm <= 0.45 and 0 <= p.irregular <= 0.85 and 0 <= p.init_serial <= 0.45 for p in ps)
    # spread: both ends of the widest ranges are visited
    assert min(p.stream_gb for p in ps) < 20 and max(p.stream_gb for p in ps) > 5000
    assert min(p.parallel for p in ps) < 0.75 and max(p.parallel for p in ps) > 0.99


def test_every_sim_component_resolves_a_generated_job() -> None:
    names = synthetic_names(3, 2)
    prov = sim_provider(NODE)
    for n in names:
        info = prov.get(n)
        assert info is not None and info.solo_s == pytest.approx(catalogue(NODE)[n].solo_s)
        assert info.features.shape == prov.get("fft").features.shape
    plan = plan_from_actions(NODE, 0, [[(names[0], 6 + 2 * 50), (names[1], 6 + 2 * 50)], [(names[2], 6 + 4 * 50)]])
    res = simulate_plan(plan, NODE)
    assert res.total_s > 0 and res.timeshare_s == pytest.approx(sum(catalogue(NODE)[n].solo_s for n in names))
    assert GroupEvaluator(NODE).makespan(0, [(names[0], 6 + 2 * 50)]) > 0
    assert search(NODE, names, 2).predicted_total_s > 0


def test_the_catalogue_listing_is_unchanged_by_use() -> None:
    catalogue(NODE)[synthetic_names(1, 3)[0]]
    from env.episode.listing import catalogue_document

    doc = catalogue_document("sim:reference")
    assert [j["name"] for j in doc["jobs"]] == list(ALL_JOBS)


def test_training_mixes_generated_jobs_in_on_the_sim_only(tmp_path) -> None:
    from env.episode.window import RewardConfig
    from training.setup import sim_setup
    from training.set_sac import Args

    setup = sim_setup(NODE, window_size=6, cmaxes=(4,), jobs=None, n_validation=4, reward=RewardConfig(),
                      synthetic=(5, 11))
    assert setup.jobs[-5:] == synthetic_names(5, 11) and not set(setup.jobs) & set(HELD_OUT_JOBS)
    many = sim_setup(NODE, window_size=6, cmaxes=(4,), jobs=None, n_validation=4, reward=RewardConfig(),
                     synthetic=(120, 11))
    share = sum(not is_synthetic(j) for j in many.jobs) / len(many.jobs)
    assert 0.4 < share < 0.6  # the paper's programs keep about half the slots of a training window
    # the pipeline is the planner's (fitted on the paper's 12), so a model scales features as the service does
    assert setup.pipeline.to_dict() == sim_provider(NODE).pipeline.to_dict()
    assert all(not is_synthetic(j.profile_name) for w in setup.validation for j in w.jobs)
    with pytest.raises(ValueError, match="--synthetic-jobs is for --backend sim"):
        Args(backend="real", synthetic_jobs=3, search_every=0, expert_max_window=0)


def test_a_training_window_may_hold_a_job_twice() -> None:
    """Training pools list the paper's programs many times, so a window can hold one twice: the ids differ."""
    from env.episode.gym_env import CoScheduleEnv

    env = CoScheduleEnv(NODE, ["FT", "EP"], window_size=4, max_concurrency=2)
    env.reset(seed=0, options={"jobs": ["FT", "FT", "EP", "FT"]})
    ids = [j.id for j in env.episode.jobs]
    assert len(set(ids)) == 4 and [j.profile for j in env.episode.jobs] == ["FT", "FT", "EP", "FT"]
    plan = plan_from_actions(NODE, 0, [[("EP", 6), ("EP", 6)]])
    assert len({j.id for g in plan.groups for j in g.jobs}) == 2
