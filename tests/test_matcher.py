"""find_matches: what the matcher finds, what it refuses and why, and node views."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from onnx import TensorProto
from onnx import helper as h
from onnx import numpy_helper as nh

from taso._onnx_import import import_model
from taso.substitutions.matching import Match, find_matches, is_constant, node_view
from tests.helpers import models
from tests.helpers.graphs import make_graph, weight
from tests.helpers.rules import (
    ADD_RELU_PAIR,
    BATCH_NOT_TWO,
    BATCH_ONE,
    CONV_MERGE,
    CONV_MUL,
    CONV_RELU,
    RELU_MERGE,
    RELU_RELU,
)


def _relu_chain(*, extra_use: bool = False, inner_is_output: bool = False, batch: int | str = 2):
    nodes = [h.make_node("Relu", ["x"], ["a"]), h.make_node("Relu", ["a"], ["b"]), h.make_node("Sigmoid", ["b"], ["y"])]
    outputs = ["y"]
    if extra_use:
        nodes.append(h.make_node("Tanh", ["a"], ["z"]))
        outputs.append("z")
    if inner_is_output:
        outputs.append("a")
    return make_graph(nodes, {"x": [batch, 3]}, outputs)


def _conv_mul(scale_shape=(1, 4, 1, 1), *, scale_is_input: bool = False):
    inits = [weight("w", (4, 3, 3, 3))]
    inputs = {"x": [1, 3, 8, 8]}
    if scale_is_input:
        inputs["s"] = list(scale_shape)
    else:
        inits.append(weight("s", scale_shape, 1))
    nodes = [h.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), h.make_node("Mul", ["c", "s"], ["y"])]
    return make_graph(nodes, inputs, ["y"], inits)


def _two_convs(strides=(1, 1), second_strides=(1, 1)):
    nodes = [
        h.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1], strides=list(strides)),
        h.make_node("Conv", ["x", "w2"], ["c2"], pads=[1, 1, 1, 1], strides=list(second_strides)),
        h.make_node("Relu", ["c1"], ["y1"]),
        h.make_node("Relu", ["c2"], ["y2"]),
    ]
    inits = [weight("w1", (4, 3, 3, 3)), weight("w2", (5, 3, 3, 3), 1)]
    return make_graph(nodes, {"x": [1, 3, 8, 8]}, ["y1", "y2"], inits)


# ----- found --------------------------------------------------------------------------------


def test_single_output_chain_is_found_with_bindings() -> None:
    (match,) = find_matches(_relu_chain(), RELU_RELU)
    assert match == Match("relu_relu", (("n0", 0), ("n1", 1)), (("x", "x"),), ())
    assert match.node_ids == {0, 1}
    assert hash(match) == hash(dataclasses.replace(match))
    with pytest.raises(dataclasses.FrozenInstanceError):
        match.rule_id = "other"  # type: ignore[misc]


def test_overlapping_matches_are_all_found_in_order() -> None:
    nodes = [h.make_node("Relu", [f"v{i}"], [f"v{i + 1}"]) for i in range(4)]
    graph = make_graph(nodes, {"v0": [2, 3]}, ["v4"])
    assert [m.node_ids for m in find_matches(graph, RELU_RELU)] == [{0, 1}, {1, 2}, {2, 3}]


def test_param_variables_bind_across_nodes() -> None:
    (match,) = find_matches(_conv_mul(), CONV_MUL)
    assert match.param_map() == {"s": (1, 1), "p": (1, 1, 1, 1), "d": (1, 1)}
    assert match.tensor_map() == {"x": "x", "w": "w", "c": "s"}


def test_two_output_pattern_matches_both_orders() -> None:
    matches = find_matches(_two_convs(), CONV_MERGE)
    assert [m.nodes for m in matches] == [(("n0", 0), ("n1", 1)), (("n0", 1), ("n1", 0))]


def test_two_output_pattern_needs_equal_params() -> None:
    assert find_matches(_two_convs(second_strides=(2, 2)), CONV_MERGE) == []


def test_param_variable_constraint() -> None:
    def graph(strides):
        nodes = [h.make_node("Conv", ["x", "w"], ["c"], strides=strides), h.make_node("Relu", ["c"], ["y"])]
        return make_graph(nodes, {"x": [1, 3, 9, 9]}, ["y"], [weight("w", (4, 3, 3, 3))])

    (match,) = find_matches(graph([2, 2]), CONV_RELU)
    assert match.param_map() == {"s": (2, 2)}
    assert find_matches(graph([1, 2]), CONV_RELU) == []


def test_same_variable_binds_the_same_value() -> None:
    same = [h.make_node("Relu", ["x"], ["a"]), h.make_node("Relu", ["x"], ["b"]), h.make_node("Add", ["a", "b"], ["y"])]
    # Add is commutative: both assignments of the two Relus to the pattern match
    assert len(find_matches(make_graph(same, {"x": [2]}, ["y"]), ADD_RELU_PAIR)) == 2
    different = [h.make_node("Relu", ["x"], ["a"]), h.make_node("Relu", ["z"], ["b"]), h.make_node("Add", ["a", "b"], ["y"])]
    assert find_matches(make_graph(different, {"x": [2], "z": [2]}, ["y"]), ADD_RELU_PAIR) == []


def test_one_graph_node_never_plays_two_pattern_nodes() -> None:
    nodes = [h.make_node("Relu", ["x"], ["a"]), h.make_node("Add", ["a", "a"], ["y"])]
    assert find_matches(make_graph(nodes, {"x": [2]}, ["y"]), ADD_RELU_PAIR) == []


def test_near_restricts_to_matches_touching_the_nodes() -> None:
    nodes = [h.make_node("Relu", [f"v{i}"], [f"v{i + 1}"]) for i in range(4)]
    graph = make_graph(nodes, {"v0": [2, 3]}, ["v4"])
    assert [m.node_ids for m in find_matches(graph, RELU_RELU, near=[3])] == [{2, 3}]
    assert [m.node_ids for m in find_matches(graph, RELU_RELU, near=[1, 99])] == [{0, 1}, {1, 2}]
    assert find_matches(graph, RELU_RELU, near=[]) == []
    full = find_matches(graph, RELU_RELU)
    assert find_matches(graph, RELU_RELU, near=graph.nodes) == full


def test_near_finds_multi_output_matches_from_any_member() -> None:
    graph = _two_convs()
    assert find_matches(graph, CONV_MERGE, near=[0]) == find_matches(graph, CONV_MERGE)
    assert find_matches(graph, CONV_MERGE, near=[2]) == []  # a Relu: not in the pattern


# ----- refused ------------------------------------------------------------------------------


def test_internal_value_read_outside_is_refused() -> None:
    assert find_matches(_relu_chain(extra_use=True), RELU_RELU) == []


def test_internal_value_that_is_a_graph_output_is_refused() -> None:
    assert find_matches(_relu_chain(inner_is_output=True), RELU_RELU) == []


def test_mapped_output_may_be_a_graph_output() -> None:
    nodes = [h.make_node("Relu", ["x"], ["a"]), h.make_node("Relu", ["a"], ["b"])]
    assert len(find_matches(make_graph(nodes, {"x": [2]}, ["b"]), RELU_RELU)) == 1


def test_const_role_needs_a_constant() -> None:
    assert len(find_matches(_conv_mul(), CONV_MUL)) == 1
    assert find_matches(_conv_mul(scale_is_input=True), CONV_MUL) == []


def test_false_constraint_is_refused() -> None:
    assert find_matches(_conv_mul(scale_shape=(1, 4, 8, 8)), CONV_MUL) == []


def test_constraints_on_symbolic_dims_are_never_guessed() -> None:
    assert len(find_matches(_relu_chain(batch=1), BATCH_ONE)) == 1
    assert find_matches(_relu_chain(batch=2), BATCH_ONE) == []
    assert find_matches(_relu_chain(batch="N"), BATCH_ONE) == []
    assert len(find_matches(_relu_chain(batch=3), BATCH_NOT_TWO)) == 1
    assert find_matches(_relu_chain(batch="N"), BATCH_NOT_TWO) == []


def test_merge_that_would_create_a_cycle_is_refused() -> None:
    """Relu(x) feeds Sigmoid which feeds the second Relu: merging both Relus would
    make the merged node read its own output."""
    nodes = [
        h.make_node("Relu", ["x"], ["r1"]),
        h.make_node("Sigmoid", ["r1"], ["s"]),
        h.make_node("Relu", ["s"], ["r2"]),
        h.make_node("Relu", ["z"], ["r3"]),
    ]
    graph = make_graph(nodes, {"x": [2, 3], "z": [2, 3]}, ["r2", "r3"])
    pairs = {tuple(node_id for _, node_id in m.nodes) for m in find_matches(graph, RELU_MERGE)}
    assert (0, 2) not in pairs and (2, 0) not in pairs  # r1 -> s -> r2: a cycle
    assert pairs == {(0, 3), (3, 0), (2, 3), (3, 2)}


def test_pattern_input_bound_to_a_matched_value_is_refused() -> None:
    """Relu(a), Relu(b) with b = the first Relu's output: the target would read a removed value."""
    nodes = [h.make_node("Relu", ["x"], ["r1"]), h.make_node("Relu", ["r1"], ["r2"])]
    graph = make_graph(nodes, {"x": [2, 3]}, ["r1", "r2"])
    assert find_matches(graph, RELU_MERGE) == []


def test_opaque_nodes_are_never_matched() -> None:
    graph = import_model(models.custom_domain_model())
    assert all(node_view(graph, i) is None for i, n in graph.nodes.items() if n.domain not in ("", "ai.onnx"))


# ----- node views -------------------------------------------------------------------------


def test_view_reads_constant_input_params_and_drops_those_inputs() -> None:
    nodes = [
        h.make_node("Constant", [], ["lo"], value=nh.from_array(np.array(0.0, np.float32))),
        h.make_node("Clip", ["x", "lo", "hi"], ["y"]),
    ]
    graph = make_graph(nodes, {"x": [2, 3]}, ["y"], [nh.from_array(np.array(6.0, np.float32), "hi")])
    view = node_view(graph, 1)
    assert view is not None and view.spec.name == "Clip"
    assert dict(view.params) == {"min": 0.0, "max": 6.0}
    assert view.inputs == ("x",) and view.outputs == ("y",)
    assert node_view(graph, graph.nodes[1]) == view


def test_view_of_clip_with_a_dynamic_bound_is_opaque() -> None:
    graph = make_graph([h.make_node("Clip", ["x", "", "hi"], ["y"])], {"x": [2, 3], "hi": []}, ["y"])
    assert node_view(graph, 0) is None


def test_view_of_clip_with_an_omitted_bound() -> None:
    inits = [nh.from_array(np.array(6.0, np.float32), "hi")]
    graph = make_graph([h.make_node("Clip", ["x", "", "hi"], ["y"])], {"x": [2, 3]}, ["y"], inits)
    view = node_view(graph, 0)
    assert view is not None and dict(view.params) == {"min": None, "max": 6.0}


def test_view_ignores_derived_conv_kernel_shape_but_not_unknown_attributes() -> None:
    graph = make_graph(
        [h.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3])], {"x": [1, 3, 8, 8]}, ["y"], [weight("w", (4, 3, 3, 3))]
    )
    view = node_view(graph, 0)
    assert view is not None and view.params["strides"] == (1, 1) and view.inputs == ("x", "w")
    graph = make_graph(
        [h.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], dilations=[2, 2])], {"x": [1, 3, 8, 8]}, ["y"], opset=19
    )
    assert node_view(graph, 0) is None


def test_view_of_subgraph_nodes_is_opaque() -> None:
    graph = import_model(models.if_loop_model())
    assert all(node_view(graph, i) is None for i, n in graph.nodes.items() if n.has_subgraphs)


def test_constness_of_initializers_constants_and_overridable_initializers() -> None:
    graph = make_graph(
        [h.make_node("Constant", [], ["k"], value_float=2.0), h.make_node("Mul", ["x", "k"], ["y"])],
        {"x": [2]}, ["y"], [weight("w", (2,))],
    )
    assert is_constant(graph, "w") and is_constant(graph, "k")
    assert not is_constant(graph, "x") and not is_constant(graph, "y")
    model = models.conv_net()
    model.graph.input.append(h.make_tensor_value_info("w2", TensorProto.FLOAT, [8, 8, 1, 1]))
    overridable = import_model(model)
    assert is_constant(overridable, "w1") and not is_constant(overridable, "w2")


def test_public_matching_api_is_pinned() -> None:
    import inspect

    from taso.substitutions import matching

    assert sorted(matching.__all__) == ["Match", "NodeView", "NotApplied", "Unapplicable", "apply", "apply_or_reason", "find_matches",
                                      "is_constant", "node_view"]
    assert str(inspect.signature(matching.find_matches)) == (
        "(graph: 'Graph', rule: 'Rule', *, near: 'Collection[int] | None' = None) -> 'list[Match]'"
    )
    assert str(inspect.signature(matching.apply)) == "(graph: 'Graph', rule: 'Rule', match: 'Match') -> 'Graph | None'"
    assert [f.name for f in dataclasses.fields(Match)] == ["rule_id", "nodes", "tensors", "params"]


def test_commutative_ops_match_in_either_operand_order() -> None:
    """Add(x, Relu(y)) matches a pattern written Add(Relu(y), x): Add's operands commute."""
    from taso.substitutions.rule import Pattern, PatternInput, PatternNode, Rule

    rule = Rule(
        "relu_then_add", "Relu(y) + x", (PatternInput("x"), PatternInput("y")),
        Pattern((PatternNode("r", "Relu", ("y",)), PatternNode("a", "Add", ("r", "x")))),
        Pattern((PatternNode("r2", "Relu", ("y",)), PatternNode("a2", "Add", ("r2", "x")))),
        (("a", "a2"),),
    ).validate()
    swapped = [h.make_node("Relu", ["y"], ["r"]), h.make_node("Add", ["x", "r"], ["out"])]
    graph = make_graph(swapped, {"x": [2], "y": [2]}, ["out"])
    matches = find_matches(graph, rule)
    assert len(matches) == 1 and matches[0].tensor_map() == {"x": "x", "y": "y"}
    not_commutative = [h.make_node("Relu", ["y"], ["r"]), h.make_node("Sub", ["x", "r"], ["out"])]
    assert find_matches(make_graph(not_commutative, {"x": [2], "y": [2]}, ["out"]), rule) == []


def test_anonymous_dims_are_distinct_unknowns() -> None:
    """paddle2onnx's `x: float[-1,3,?,?]`: two `?` dims are not the same size (issue 16, item 5)."""
    from taso.substitutions._constraints import constraint_holds, tensor_env

    def holds(dims_x: list[object], dims_y: list[object]) -> bool:
        graph = make_graph([h.make_node("Add", ["x", "y"], ["z"])], {"x": dims_x, "y": dims_y}, ["z"])
        env = tensor_env(graph, {"a": "x", "b": "y"}, lambda _name: False)
        return constraint_holds("shape('a') == shape('b')", env)

    assert holds([1, "H"], [1, "H"])
    assert not holds([1, "?"], [1, "?"])
    assert not holds([1, ""], [1, ""])
    assert not holds([1, "H"], [1, "W"])
