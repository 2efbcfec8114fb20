"""A layer scale after a dense layer folded into it: ``(x @ w + b) * g = x @ (w * g) + b * g``
for a constant g with one value per column of w (timm EdgeNeXt's ``gamma``, LayerScale),
the axiom ``matmul_mul_columns`` and the converter form ``fold_mul_matmul_bias`` proved
from it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from onnx import helper as h

from taso.opspecs.axioms import cfg, find_axiom
from taso.opspecs.axioms.converter import scales_columns, scales_moved_columns, scales_unit_columns
from taso.opspecs.axioms.validate import validate_axiom
from taso.pipeline._canonical import canonicalize
from taso.pipeline._export import export
from taso.substitutions.generate._refute import compare_sides, refute
from taso.substitutions.matching import apply, find_matches
from tests.helpers.graphs import make_graph, weight
from tests.helpers.ort import assert_same_outputs
from tests.helpers.rules import applied_once, loosened, shipped

FORM = "cv-fold_mul_matmul_bias"


def _mlp_tail(*, gamma: tuple[int, ...] = (4,), weight_input: bool = False, constants_first: bool = True):  # noqa: ANN202
    """EdgeNeXt's ``gamma * (fc2(x))`` as torch exports it: constants as first operands."""
    pair = (lambda c, v: [c, v]) if constants_first else (lambda c, v: [v, c])
    nodes = [h.make_node("MatMul", ["x", "w"], ["m"]), h.make_node("Add", pair("b", "m"), ["a"]),
             h.make_node("Mul", pair("g", "a"), ["s"]), h.make_node("Relu", ["s"], ["y"])]
    inits = [weight("b", (4,), 2), weight("g", gamma, 3)]
    inputs = {"x": (1, 5, 6)}
    if weight_input:
        inputs["w"] = (6, 4)
    else:
        inits.append(weight("w", (6, 4), 1))
    return canonicalize(make_graph(nodes, inputs, ["y"], inits)).graph


def test_the_axiom_holds_for_columns_and_fails_for_rows() -> None:
    axiom = find_axiom("matmul_mul_columns")
    assert validate_axiom(axiom, draws=2).ok
    rows = cfg({"x": (3, 3), "w": (3, 3), "g": (3, 1)})  # g scales the product's rows: w cannot
    loose = replace(axiom, configs=(rows, *axiom.configs[1:]), condition=lambda s, p: True)
    assert not validate_axiom(loose, draws=0).ok
    assert not scales_columns(rows.shapes)
    assert not scales_columns({"x": (3,), "w": (3, 2), "g": (1, 2)})  # a vector's product gains an axis
    assert scales_columns({"x": (3, 3), "w": (3, 2), "g": (1, 2)})


def test_the_form_ships_proved_and_its_shape_constraint_is_needed() -> None:
    rule = shipped(FORM)
    assert rule.proof.method == "z3" and "matmul_mul_columns" in rule.proof.axioms_used
    assert refute(rule) is None
    assert refute(loosened(rule, "shape('g')")) is not None


@pytest.mark.parametrize("constants_first", [True, False])
def test_the_layer_scale_folds_into_the_dense_layer(constants_first: bool) -> None:
    graph = _mlp_tail(constants_first=constants_first)
    rule = shipped(FORM)
    folded = applied_once(graph, rule)
    assert [n.op_type for n in export(folded).graph.node] == ["MatMul", "Add", "Relu"]  # w * g, b * g folded
    assert_same_outputs(graph, folded)


@pytest.mark.parametrize("case", [{"gamma": (5, 1)}, {"gamma": (1, 5, 4)}, {"weight_input": True}],
                         ids=["rows", "wider-rank", "weight-at-run-time"])
def test_other_scales_and_run_time_weights_stay(case: dict) -> None:
    assert not find_matches(_mlp_tail(**case), shipped(FORM))


MOVED = "ax-transpose_matmul_bias_mul_columns"


def _permuted_tail(*, gamma: tuple[int, ...] = (4, 1, 1)):  # noqa: ANN202
    """ConvNeXt's MLP tail as torchvision (gamma (C, 1, 1)) and timm ((1, C, 1, 1)) export it:
    ``gamma * permute(fc2(x), (0, 3, 1, 2))``, constants first."""
    nodes = [h.make_node("MatMul", ["x", "w"], ["m"]), h.make_node("Add", ["b", "m"], ["a"]),
             h.make_node("Transpose", ["a"], ["t"], perm=[0, 3, 1, 2]),
             h.make_node("Mul", ["g", "t"], ["s"]), h.make_node("Relu", ["s"], ["y"])]
    inits = [weight("w", (6, 4), 1), weight("b", (4,), 2), weight("g", gamma, 3)]
    return canonicalize(make_graph(nodes, {"x": (1, 3, 5, 6)}, ["y"], inits)).graph


def test_the_permuted_axiom_holds_for_the_moved_columns_only() -> None:
    axiom = find_axiom("transpose_matmul_bias_mul_columns")
    assert validate_axiom(axiom, draws=2).ok
    width = cfg({"x": (1, 2, 3, 4), "w": (4, 3), "b": (3,), "g": (1, 1, 1, 3)}, perm=(0, 3, 1, 2))
    loose = replace(axiom, configs=(width, *axiom.configs[1:]), condition=lambda s, p: True)
    assert not validate_axiom(loose, draws=0).ok  # g scales the width there, not the columns
    assert not scales_moved_columns(width.shapes, (0, 3, 1, 2))
    assert scales_moved_columns({**width.shapes, "g": (3, 1, 1)}, (0, 3, 1, 2))


def test_the_permuted_rule_ships_and_its_shape_constraint_is_needed() -> None:
    rule = shipped(MOVED)
    assert rule.proof.axioms_used == ("transpose_matmul_bias_mul_columns",)
    assert refute(rule) is None
    assert refute(loosened(rule, "shape('g')")) is not None


@pytest.mark.parametrize("gamma", [(4, 1, 1), (1, 4, 1, 1)], ids=["torchvision", "timm"])
def test_the_layer_scale_folds_through_the_permute_back(gamma: tuple[int, ...]) -> None:
    graph = _permuted_tail(gamma=gamma)
    folded = applied_once(graph, shipped(MOVED))
    assert [n.op_type for n in export(folded).graph.node] == ["MatMul", "Add", "Transpose", "Relu"]
    assert_same_outputs(graph, folded)


@pytest.mark.parametrize("gamma", [(1, 1, 3, 1), (5,), (4, 3, 1)], ids=["height", "width", "channels-and-height"])
def test_a_scale_of_another_axis_stays(gamma: tuple[int, ...]) -> None:
    assert not find_matches(_permuted_tail(gamma=gamma), shipped(MOVED))


UNIT = "ax-matmul_bias_mul_unit_columns"


def _convnext_blocks(gamma: tuple[int, ...] = (4, 1, 1)):  # noqa: ANN202
    """Two torchvision ConvNeXt blocks between channels-last norms (the stem's, the downsample's):
    depthwise conv, permute to NHWC, dense layer, permute back, layer scale, residual Add. The canonical stage sinks the
    permute back below the scale and the residual, where the constant becomes (1, 1, 1, C)."""
    nodes = [h.make_node("Transpose", ["x"], ["xn"], perm=[0, 2, 3, 1]),  # the stem's channels-last norm
             h.make_node("LayerNormalization", ["xn", "ln_s", "ln_b"], ["xl"], axis=-1),
             h.make_node("Transpose", ["xl"], ["x0"], perm=[0, 3, 1, 2])]
    inits, x = [weight("ln_s", (4,), 1), weight("ln_b", (4,), 2)], "x0"
    for i in range(2):
        nodes += [h.make_node("Conv", [x, f"dw{i}"], [f"d{i}"], group=4, pads=[1, 1, 1, 1]),
                  h.make_node("Transpose", [f"d{i}"], [f"n{i}"], perm=[0, 2, 3, 1]),
                  h.make_node("MatMul", [f"n{i}", f"w{i}"], [f"m{i}"]), h.make_node("Add", [f"b{i}", f"m{i}"], [f"a{i}"]),
                  h.make_node("Transpose", [f"a{i}"], [f"t{i}"], perm=[0, 3, 1, 2]),
                  h.make_node("Mul", [f"g{i}", f"t{i}"], [f"s{i}"]), h.make_node("Add", [f"s{i}", x], [f"r{i}"])]
        inits += [weight(f"dw{i}", (4, 1, 3, 3), 10 + i), weight(f"w{i}", (4, 4), 20 + i),
                  weight(f"b{i}", (4,), 30 + i), weight(f"g{i}", gamma, 40 + i)]
        x = f"r{i}"
    nodes += [h.make_node("Transpose", [x], ["yn"], perm=[0, 2, 3, 1]),  # the downsample's norm
              h.make_node("LayerNormalization", ["yn", "ln_s", "ln_b"], ["yl"], axis=-1),
              h.make_node("Transpose", ["yl"], ["y"], perm=[0, 3, 1, 2])]
    return make_graph(nodes, {"x": (1, 4, 5, 5)}, ["y"], inits, opset=17)


def test_the_axiom_at_the_products_rank_refuses_rows() -> None:
    axiom = find_axiom("matmul_bias_mul_unit_columns")
    assert validate_axiom(axiom, draws=2).ok
    rows = cfg({"x": (1, 2, 3, 3), "w": (3, 3), "b": (3,), "g": (1, 1, 3, 1)})  # the product's rows
    assert not validate_axiom(replace(axiom, configs=(rows, *axiom.configs[1:]), condition=lambda s, p: True),
                              draws=0).ok
    assert not scales_unit_columns(rows.shapes)
    assert not scales_unit_columns({**rows.shapes, "g": (1, 1, 1, 1, 3)})  # would add an axis
    assert scales_unit_columns({**rows.shapes, "g": (1, 3)})


def test_the_rule_at_the_products_rank_ships_and_needs_its_shape_constraint() -> None:
    rule = shipped(UNIT)
    assert refute(rule) is None
    inputs = {"x": np.ones((1, 2, 3, 3)), "w": np.eye(3), "b": np.zeros(3), "g": np.arange(1.0, 4.0).reshape(1, 1, 3, 1)}
    assert compare_sides(loosened(rule, "shape('g')"), inputs, {})  # rows scaled by columns' values
    assert compare_sides(rule, {**inputs, "g": inputs["g"].reshape(1, 1, 1, 3)}, {}) == ""


def test_convnext_blocks_fold_their_layer_scales_after_the_canonical_stage() -> None:
    canonical = canonicalize(_convnext_blocks())
    graph = canonical.graph
    scales = [n for n in graph.nodes.values() if n.op_type == "Mul"]
    assert len(scales) == 2 and all(graph.types[n.inputs[0]].shape == (1, 1, 1, 4) for n in scales)  # typed
    rule = shipped(UNIT)
    folded = graph
    for _ in range(2):
        folded = apply(folded, rule, find_matches(folded, rule)[0])
    assert not find_matches(folded, rule)
    assert "Mul" not in [n.op_type for n in export(folded).graph.node]
    assert_same_outputs(_convnext_blocks(), folded)
