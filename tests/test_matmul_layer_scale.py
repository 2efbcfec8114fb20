"""A layer scale after a dense layer folded into it: ``(x @ w + b) * g = x @ (w * g) + b * g``
for a constant g with one value per column of w (timm EdgeNeXt's ``gamma``, LayerScale),
the axiom ``matmul_mul_columns`` and the converter form ``fold_mul_matmul_bias`` proved
from it."""

from __future__ import annotations

from dataclasses import replace

import pytest
from onnx import helper as h

from taso.opspecs.axioms import cfg, find_axiom
from taso.opspecs.axioms.converter import scales_columns
from taso.opspecs.axioms.validate import validate_axiom
from taso.pipeline._canonical import canonicalize
from taso.pipeline._export import export
from taso.substitutions.generate._refute import refute
from taso.substitutions.matching import find_matches
from taso.substitutions.rule import Rule, load_rules
from tests.helpers.graphs import make_graph, weight
from tests.helpers.ort import assert_same_outputs
from tests.helpers.rules import LIBRARY, applied_once, loosened

FORM = "cv-fold_mul_matmul_bias"


def _library_rule(rule_id: str) -> Rule:
    return next(r for r in load_rules(LIBRARY).rules if r.id == rule_id)


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
    rule = _library_rule(FORM)
    assert rule.proof.method == "z3" and "matmul_mul_columns" in rule.proof.axioms_used
    assert refute(rule) is None
    assert refute(loosened(rule, "shape('g')")) is not None


@pytest.mark.parametrize("constants_first", [True, False])
def test_the_layer_scale_folds_into_the_dense_layer(constants_first: bool) -> None:
    graph = _mlp_tail(constants_first=constants_first)
    rule = _library_rule(FORM)
    folded = applied_once(graph, rule)
    assert [n.op_type for n in export(folded).graph.node] == ["MatMul", "Add", "Relu"]  # w * g, b * g folded
    assert_same_outputs(graph, folded)


@pytest.mark.parametrize("case", [{"gamma": (5, 1)}, {"gamma": (1, 5, 4)}, {"weight_input": True}],
                         ids=["rows", "wider-rank", "weight-at-run-time"])
def test_other_scales_and_run_time_weights_stay(case: dict) -> None:
    assert not find_matches(_mlp_tail(**case), _library_rule(FORM))
