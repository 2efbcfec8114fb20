"""Property: on random chains of elementwise ops, every match of a few rules applies and
the rewritten model computes the same outputs on ONNX Runtime (also after rewriting to
a fixed point)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper as h
from onnx import numpy_helper as nh

from taso.ir import Graph
from taso.substitutions.matching import apply, find_matches
from tests.helpers.graphs import make_graph
from tests.helpers.ort import assert_same_outputs
from tests.helpers.rules import IDENTITY, MUL_MUL, RELU_RELU

RULES = (RELU_RELU, IDENTITY, MUL_MUL)
UNARY = ("Relu", "Sigmoid", "Tanh", "Identity")
CONST_SHAPES = ((), (3,), (1, 3), (2, 1))

step = st.one_of(
    st.sampled_from(UNARY).map(lambda op: (op, None)),
    st.tuples(st.sampled_from(("Mul", "Add")), st.sampled_from(CONST_SHAPES)),
)


@st.composite
def chains(draw: st.DrawFn) -> Graph:
    steps = draw(st.lists(step, min_size=1, max_size=7))
    extra_outputs = draw(st.sets(st.integers(0, len(steps) - 1), max_size=2))
    nodes, inits = [], []
    for i, (op, shape) in enumerate(steps):
        inputs = [f"v{i}"]
        if shape is not None:
            value = np.random.default_rng(i).uniform(0.5, 1.5, shape).astype(np.float32)
            inits.append(nh.from_array(value, f"c{i}"))
            inputs.append(f"c{i}")
        nodes.append(h.make_node(op, inputs, [f"v{i + 1}"]))
    outputs = [f"v{len(steps)}", *(f"v{i + 1}" for i in sorted(extra_outputs) if i + 1 < len(steps))]
    return make_graph(nodes, {"v0": [2, 3]}, outputs, inits)


@pytest.mark.ort
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chains())
def test_every_match_applies_and_preserves_outputs(graph: Graph) -> None:
    for rule in RULES:
        for match in find_matches(graph, rule):
            result = apply(graph, rule, match)
            assert result is not None, (rule.id, match)
            result.validate()
            assert_same_outputs(graph, result)


@pytest.mark.ort
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chains())
def test_rewriting_to_a_fixed_point_preserves_outputs(graph: Graph) -> None:
    """Apply the first rewrite that changes the graph (as the search, which de-duplicates by
    structural hash, would: `Identity(x) = x` on an Identity that is a graph output
    rewrites it into an equal graph) until none does."""
    current = graph
    for _ in range(20):
        following = _first_progress(current)
        if following is None:
            break
        current = following
    current.validate()
    assert _first_progress(current) is None
    assert_same_outputs(graph, current)


def _first_progress(graph: Graph) -> Graph | None:
    for rule in RULES:
        for match in find_matches(graph, rule):
            rewritten = apply(graph, rule, match)
            assert rewritten is not None
            if rewritten.structural_hash != graph.structural_hash:
                return rewritten
    return None


@settings(max_examples=30, deadline=None)
@given(chains())
def test_near_matches_are_the_full_matches_touching_each_node(graph: Graph) -> None:
    for rule in RULES:
        full = find_matches(graph, rule)
        for node_id in graph.nodes:
            assert find_matches(graph, rule, near=[node_id]) == [m for m in full if node_id in m.node_ids]
