"""The planner's caches on the serving path key on node and pipeline *objects* (no JSON serialisation per plan)
and still answer by content: an equal node loaded afresh gets the same plans, and the same loaded model."""

from __future__ import annotations

import pytest
from svc_support import SIM_NODE

from env.plan.models import Plan, Window
from env.sim.nodes import load_node
from service.api.served import load_served_model
from env.episode.jobinfo import _sim_with_pipeline
from service.planning import plan_window


def test_caches_are_per_object_and_answer_by_content(planning: None) -> None:
    node = load_node(SIM_NODE)
    served = load_served_model(None, node)
    if served.loaded is None:
        pytest.skip("no model ships for the node: nothing of the agent's to cache")
    from training.policies import agent_policy

    policy = agent_policy("agent", served.loaded)
    twin = node.model_copy(deep=True)  # equal content, another object
    assert twin is not node and twin == node
    assert policy.model_for(twin) is policy.model_for(node)
    assert policy.pipeline(twin) is policy.pipeline(node)
    pipeline = policy.pipeline(node)
    provider = _sim_with_pipeline(node, pipeline)
    assert _sim_with_pipeline(node, pipeline) is provider  # cached per (node, pipeline) object
    a, b = _sim_with_pipeline(twin, pipeline).get("MG"), provider.get("MG")
    assert a.solo_s == b.solo_s and a.features.tobytes() == b.features.tobytes()
    window = Window.model_validate({"jobs": [{"id": n} for n in ("MG", "EP", "CG", "FT", "BT", "IS", "SP")],
                                    "max_concurrency": 3})
    first = plan_window(window, load_node(SIM_NODE), policy="agent", model=served.loaded)
    assert isinstance(first, Plan)
    assert plan_window(window, load_node(SIM_NODE), policy="agent", model=served.loaded) == first
