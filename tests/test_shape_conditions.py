"""An axiom's condition on shapes travels into its rules' constraints.

`global_avgpool_as_avgpool` holds only where the kernel is the input's spatial size; its
rules said only `rank('x') == 4`, so `AveragePool(x; kernel 3x3)` on x of unknown H and W
was rewritten to `GlobalAveragePool(x)` (the applier refuses a contradicting shape only
where both shapes are known). With the condition as a constraint, and verify's drawn
configs reporting sides of different shapes as a counterexample, the old rules are
refuted and the new ones match only where they hold.
"""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto
from onnx import helper as h

from taso._onnx_import import import_model
from taso.ir import Graph
from taso.pipeline._rewriting import default_rules
from taso.substitutions.generate._verify import Verdict, verify_rule
from taso.substitutions.matching import find_matches
from taso.substitutions.rule import Rule

RULES = {r.id: r for r in default_rules()}


def _avgpool(shape: list[object]) -> Graph:
    graph = h.make_graph([h.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3])], "g",
                         [h.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                         [h.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 10
    return import_model(onnx.shape_inference.infer_shapes(model))


@pytest.mark.parametrize("shape", [["N", 8, "H", "W"], [1, 8, 5, 5], [1, 8, 3, "W"]])
def test_avgpool_is_not_global_where_the_kernel_may_not_cover_the_input(shape: list[object]) -> None:
    assert find_matches(_avgpool(shape), RULES["ax-global_avgpool_as_avgpool-rev"]) == []


def test_avgpool_covering_the_input_is_still_global() -> None:
    assert len(find_matches(_avgpool([1, 8, 3, 3]), RULES["ax-global_avgpool_as_avgpool-rev"])) == 1


def _without_the_condition(rule: Rule) -> Rule:
    kept = tuple(c for c in rule.constraints if "shape('x')[2:]" not in c)
    assert kept != rule.constraints
    return Rule(rule.id, rule.math, rule.inputs, rule.source, rule.target, rule.outputs, kept,
                rule.exactness, rule.proof, rule.provenance)


@pytest.mark.parametrize("rule_id", ["ax-global_avgpool_as_avgpool-rev", "ax-global_avgpool_as_avgpool-c0"])
def test_verify_refutes_the_rule_without_its_condition(rule_id: str) -> None:
    assert verify_rule(RULES[rule_id]).verdict is Verdict.PROVED
    check = verify_rule(_without_the_condition(RULES[rule_id]))
    assert check.verdict is Verdict.REFUTED, check.detail
