"""The simulated node's L3 mechanism: miss-ratio curves, LRU sharing, partitions, MBA, and the paper's Fig. 2."""

from __future__ import annotations

import json

import pytest

from env.errors import InputError
from env.sim.nodes import load_node
from env.measure.probing import Placement
from env.sim.catalogue import ALL_JOBS, BY_NAME, catalogue
from env.sim.model import SimJob, _cache_mb, geometry, miss_ratio, traffic_gb
from env.sim.nodemodel import NodeModel
from env.planners.partitioning import pair_gain
from env.sim.probes import GroupModel
from env.sim.synthetic import synthetic_entry, synthetic_names
from env.sim.variants import reference_model
from env.sim.world import world_for

MB = [0.0, 0.25, 0.5, 1, 1.5, 2, 3, 4.5, 6, 9, 12, 16.5, 24, 33, 48, 64, 128, 512, 4096]


def _jobs():
    return [BY_NAME[n].params for n in ALL_JOBS] + [synthetic_entry(n).params for n in synthetic_names(40, 7)]


@pytest.mark.parametrize("params", _jobs(), ids=lambda p: p.name)
def test_miss_ratio_curve_is_monotone_and_bounded(params):
    m = [params.miss(x) for x in MB]
    assert m[0] == 1.0 and all(0.0 <= v <= 1.0 for v in m)
    assert all(b <= a for a, b in zip(m, m[1:])), params.name
    assert m[-1] < 0.05 or params.ws2_mb > 400  # every working set fits in enough cache


def test_misses_fall_in_steps_at_each_working_set():
    # two working sets 1 MB and 20 MB, 85 % of the reuse in the second: a step near each (water_spatial's shape)
    drop = [miss_ratio(a, 1.0, 20.0, 0.85) - miss_ratio(b, 1.0, 20.0, 0.85) for a, b in ((0.5, 2), (2, 8), (8, 40))]
    assert drop[0] > 0.1 and drop[2] > 0.5 and drop[1] < min(drop[0], drop[2])


@pytest.mark.parametrize("job", ["water_spatial", "fmm", "lu_ncb", "MG", "EP"])
def test_simulated_ways_curve_is_monotone(ref_node, job):
    """What the profiler's L3-way curve measures on an RDT node: the job alone on half a socket with w ways."""
    w = world_for(ref_node)
    gm = GroupModel(ref_node, w.params, {n: e.params for n, e in w.entries.items()}, w.probe)
    cpus = tuple(range(6))
    t = [gm.times([Placement(job, cpus, l3_ways=k)])[0][0] for k in range(1, 12)]
    assert all(b <= a * (1 + 1e-9) for a, b in zip(t, t[1:])), job
    if job in ("water_spatial", "fmm"):
        assert t[0] > 1.15 * t[-1]  # cache-sensitive at the L3 scale (simulated: 1.23x for fmm, more for water_spatial)
    if job == "EP":
        assert t[0] < 1.001 * t[-1]


def _pair_cache(node, a, b, masks_a=None, masks_b=None, mba_a=None):
    g = geometry(node, world_for(node).params)
    half0, half1 = list(range(0, 6)), list(range(6, 12))  # both on socket 0 (L3 0)
    ja = SimJob(g, BY_NAME[a].params, half0, "first-touch", masks_a, mba_a)
    jb = SimJob(g, BY_NAME[b].params, half1, "first-touch", masks_b)
    c = _cache_mb(g, [ja, jb])
    return [x[0] for x in c], traffic_gb([ja, jb], c)


def test_a_streaming_job_crowds_a_cache_friendly_one_out_of_shared_ways(ref_node):
    (mg, ws), _ = _pair_cache(ref_node, "MG", "water_spatial")
    assert mg + ws == pytest.approx(16.5)
    assert ws < 0.4 * 16.5  # half the cores, well under half the L3: LRU keeps what the streaming job inserts


def test_disjoint_ways_protect_and_an_mba_cap_on_the_streamer_helps(ref_node):
    (_, ws_shared), (_, v_shared) = _pair_cache(ref_node, "MG", "water_spatial")
    (mg, ws), (_, v_part) = _pair_cache(ref_node, "MG", "water_spatial", {0: 0b11}, {0: 0b11111111100})
    assert mg == pytest.approx(3.0) and ws == pytest.approx(13.5)
    assert v_part < 0.85 * v_shared  # water_spatial's traffic with 9 private ways (simulated: -21 %)
    (_, ws_capped), _ = _pair_cache(ref_node, "MG", "water_spatial", mba_a={0: 20})
    assert ws_capped > 1.5 * ws_shared  # a capped streamer inserts lines more slowly (simulated: 6.0 -> 12.5 MB)


@pytest.mark.parametrize("a,b", [("ocean_cp", "water_spatial"), ("FT", "fmm")])
def test_fig2_partitioning_is_very_effective_for_the_named_mixes(ref_node, a, b):
    g = pair_gain(ref_node, a, b)
    assert g.gain_pct > 8.0, g.describe()  # simulated: +21.8 % and +10.6 % with the catalogue's numbers


def test_fig2_partitioning_is_ineffective_for_mg_ep_where_affinity_matters(ref_node):
    g = pair_gain(ref_node, "MG", "EP")
    assert g.gain_pct < 1.0, g.describe()
    compact = pair_gain(ref_node, "MG", "EP", schedules=(0,))
    assert g.shared > 1.1 * compact.partitioned  # distributed beats compact by far, partitioned or not


def test_node_model_round_trips_the_cache_fields(tmp_path, ref_node):
    ref = reference_model()
    path = tmp_path / "ref.json"
    path.write_text(ref.model_dump_json())
    back = NodeModel.model_validate_json(path.read_text())
    for j, k in zip(ref.jobs, back.jobs):
        assert (k.params.ws_mb, k.params.ws2_mb, k.params.ws2_share) == (j.params.ws_mb, j.params.ws2_mb, j.params.ws2_share)
        assert k.params == BY_NAME[j.name].params
    node = load_node(f"sim:{path}")
    assert catalogue(node)["water_spatial"].solo_s == pytest.approx(catalogue(ref_node)["water_spatial"].solo_s)


def test_a_schema_1_file_is_refused_in_one_line(tmp_path):
    doc = json.loads(reference_model().model_dump_json())
    doc["schema_version"] = 1
    for j in doc["jobs"]:
        del j["params"]["ws2_mb"], j["params"]["ws2_share"]
    p = tmp_path / "old.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(InputError) as e:
        load_node(f"sim:{p}")
    msg = str(e.value)
    assert "\n" not in msg and "schema_version 1" in msg and "recalibrate" in msg
