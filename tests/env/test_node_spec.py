"""The node spec is frozen and hashed by its content: caches key on the node itself."""

from __future__ import annotations

import pickle

import pytest
from pydantic import ValidationError

from env.node.spec import NodeSpec
from env.sim.catalogue import catalogue
from env.sim.model import geometry
from env.sim.nodes import load_node


def test_frozen_to_the_leaves(ref_node):
    with pytest.raises(ValidationError):
        ref_node.name = "sim:other"
    with pytest.raises(ValidationError):
        ref_node.numa[0].id = 7
    with pytest.raises(ValidationError):
        ref_node.capabilities.mba.available = False


def test_equal_specs_hash_alike_and_share_cache_entries(ref_node):
    twin = NodeSpec.model_validate_json(ref_node.model_dump_json())
    assert twin is not ref_node and twin == ref_node and hash(twin) == hash(ref_node)
    assert pickle.loads(pickle.dumps(ref_node)) == ref_node
    assert geometry(twin) is geometry(ref_node)
    assert catalogue(twin) is catalogue(ref_node)
    assert len({ref_node, twin}) == 1


def test_a_changed_copy_is_another_node(ref_node):
    ways, _ = ref_node.total_ways, hash(ref_node)  # derived values made before the copy
    fewer = ref_node.model_copy(update={"name": "sim:fewer", "l3": [d.model_copy(update={"ways": d.ways - 1})
                                                                     for d in ref_node.l3]})
    assert fewer != ref_node and hash(fewer) != hash(ref_node) and fewer.name == "sim:fewer"
    assert fewer.total_ways == ways - len(ref_node.l3)
    assert ref_node.model_copy() == ref_node and ref_node.model_copy(deep=True) == ref_node


def test_cpus_are_sorted_and_checked(ref_node):
    doc = ref_node.model_dump()
    doc["cpus"] = list(reversed(doc["cpus"]))
    assert NodeSpec.model_validate(doc).cpus == ref_node.cpus
    doc["cpus"].append(doc["cpus"][0])
    with pytest.raises(ValidationError, match="cpus has duplicates"):
        NodeSpec.model_validate(doc)


def test_simulated():
    assert load_node("sim:reference").simulated and load_node("sim:variant-b").simulated
    assert not load_node("local").simulated
