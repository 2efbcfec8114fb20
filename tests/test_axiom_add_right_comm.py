"""`add_right_comm`: (x + y) + z = (x + z) + y, and the transformer residual it serves.

A BERT layer ends in LayerNorm(dense(h) + r): a MatMul, its bias b, the residual r. The
TorchScript exporter writes the sum (b + h @ W) + r, the dynamo exporter (h @ W + b) + r.
ORT (1.32, CPU) fuses either into Gemm + SkipLayerNormalization, whose kernel runs 2.5-4x
slower than an Add and a LayerNormalization on (1, 128, 256). With the bias added last,
(h @ W + r) + b or b + (h @ W + r), ORT's SkipLayerNorm fusion no longer matches (its outer
Add must have two 3-D operands of one shape, or a 1-D constant as the inner Add's second
operand), and it runs MatMul, Add, Add, LayerNormalization instead. The TorchScript form
reaches that in one step with add_assoc; the dynamo form needs this axiom (add_assoc gives
h @ W + (b + r), which ORT fuses again). Measured on the corpus' BERT exports: 1.10-1.16x.
"""

from __future__ import annotations

import onnx
import onnxruntime as ort
import pytest
from onnx import helper as h

from taso.opspecs.axioms import find_axiom
from taso.pipeline._canonical import canonicalize
from taso.pipeline._export import export
from taso.substitutions.generate._axiom_bank import shape_generic_axioms
from taso.substitutions.generate._axiom_rules import rules_from_axiom
from taso.substitutions.generate.cli import main
from taso.substitutions.matching import apply, find_matches
from tests.helpers.graphs import make_graph, weight
from tests.helpers.ort import assert_same_outputs

D = 16


def _rule():
    return next(r for r in rules_from_axiom(find_axiom("add_right_comm")) if r.id == "ax-add_right_comm")


SUMS = {
    "dynamo": [("mm", "b", "dense"), ("dense", "r", "sum")],  # (h @ W + b) + r
    "torchscript": [("b", "mm", "dense"), ("dense", "r", "sum")],  # (b + h @ W) + r
    "residual first": [("mm", "b", "dense"), ("r", "dense", "sum")],  # r + (h @ W + b)
    "after add_assoc": [("b", "r", "br"), ("mm", "br", "sum")],  # h @ W + (b + r)
}
"""Spellings of the residual sum (operands of each Add, then its output name)."""


def _residual_block(sums: list[tuple[str, str, str]] = SUMS["dynamo"]):
    """LayerNorm(`sums` of h @ W, its bias b and the residual r)."""
    nodes = [h.make_node("MatMul", ["h", "w"], ["mm"]),
             *(h.make_node("Add", [a, b], [out]) for a, b, out in sums),
             h.make_node("LayerNormalization", ["sum", "gamma", "beta"], ["y"], axis=-1, epsilon=1e-12)]
    inits = [weight("w", (D, D), 1), weight("b", (D,), 2), weight("gamma", (D,), 3), weight("beta", (D,), 4)]
    return canonicalize(make_graph(nodes, {"h": (1, 8, D), "r": (1, 8, D)}, ["y"], inits)).graph


def _producer(graph, name: str):
    return graph.nodes[graph.producers[name][0]]


def _ort_ops(graph, tmp_path) -> list[str]:
    """The op types ORT runs for `graph` after its own optimizations (ORT_ENABLE_ALL)."""
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.optimized_model_filepath = str(tmp_path / "ort.onnx")
    ort.InferenceSession(export(graph).SerializeToString(), options, providers=["CPUExecutionProvider"])
    return [n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node]


def test_the_axiom_checks(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-axioms", "--only", "add_right_comm"]) == 0
    assert "1 axioms, 0 failed" in capsys.readouterr().out


def test_the_axiom_holds_at_every_broadcast_shape() -> None:
    assert "add_right_comm" in shape_generic_axioms()


@pytest.mark.parametrize("spelling", sorted(SUMS))
def test_the_bias_is_added_last_whatever_the_spelling(spelling: str) -> None:
    graph = _residual_block(SUMS[spelling])
    matches = find_matches(graph, _rule())
    assert len(matches) == 1
    rewritten = apply(graph, _rule(), matches[0])
    assert rewritten is not None
    norm = next(n for n in rewritten.nodes.values() if n.op_type == "LayerNormalization")
    outer = _producer(rewritten, norm.inputs[0])
    inner = _producer(rewritten, outer.inputs[0])
    assert outer.op_type == inner.op_type == "Add"
    assert outer.inputs[1] == "b" and set(inner.inputs) == {"mm", "r"}


def test_a_sum_with_its_constant_last_is_left_alone() -> None:
    assert not find_matches(_residual_block([("mm", "r", "dense"), ("dense", "b", "sum")]), _rule())


def test_a_sum_without_a_constant_is_left_alone() -> None:
    assert not find_matches(_residual_block([("mm", "r", "dense"), ("dense", "h", "sum")]), _rule())


@pytest.mark.ort
def test_ort_runs_the_rewritten_residual_without_skip_layer_norm(tmp_path) -> None:  # noqa: ANN001
    graph = _residual_block()
    rewritten = apply(graph, _rule(), find_matches(graph, _rule())[0])
    assert rewritten is not None
    assert "SkipLayerNormalization" in _ort_ops(graph, tmp_path)
    assert "SkipLayerNormalization" not in _ort_ops(rewritten, tmp_path)
    assert_same_outputs(graph, rewritten)


@pytest.mark.ort
@pytest.mark.parametrize("spelling", sorted(SUMS))
def test_the_rewrite_keeps_the_values(spelling: str) -> None:
    graph = _residual_block(SUMS[spelling])
    rewritten = apply(graph, _rule(), find_matches(graph, _rule())[0])
    assert rewritten is not None
    assert_same_outputs(graph, rewritten)
