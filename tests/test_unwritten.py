"""A rewrite whose target cannot be written into the model is reported, never dropped silently.

Gelu is an ONNX op from opset 20 and has no decomposition; at opset 17 the rule that
re-forms BERT's erf chain into Gelu matches, but its target cannot be written. The search
records the rule, how many sites, and why; the report carries it.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto
from onnx import helper as h
from onnx import numpy_helper as nh

from taso._onnx_import import import_model
from taso.pipeline._rewriting import UnwrittenLog, default_rules, make_expand
from taso.report import CheckStatus, Decision, Latency, Report, StopReason, Unwritten

RULES = {r.id: r for r in default_rules()}


def _erf_gelu(opset: int):
    """BERT's erf gelu in float64 (the rule's sqrt 2 is the double; see the note below)."""
    nodes = [h.make_node("Div", ["x", "sqrt2"], ["d"]), h.make_node("Erf", ["d"], ["e"]),
             h.make_node("Add", ["e", "one"], ["p"]), h.make_node("Mul", ["x", "p"], ["m"]),
             h.make_node("Mul", ["m", "half"], ["y"])]
    inits = [nh.from_array(np.array(v, dtype=np.float64), n)
             for n, v in (("sqrt2", math.sqrt(2.0)), ("one", 1.0), ("half", 0.5))]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TensorProto.DOUBLE, [2, 8])],
                         [h.make_tensor_value_info("y", TensorProto.DOUBLE, [2, 8])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    model.ir_version = 10
    return import_model(onnx.shape_inference.infer_shapes(model))


def test_a_target_the_opset_lacks_is_recorded_with_its_reason():
    log = UnwrittenLog()
    expand = make_expand([RULES["ax-gelu_decompose-rev"]], unwritten=log)
    assert list(expand(_erf_gelu(17), None)) == []
    (record,) = log.records()
    assert (record.rule, record.matches) == ("ax-gelu_decompose-rev", 1)
    assert "opset" in record.reason


def test_at_an_opset_with_the_op_nothing_is_recorded():
    log = UnwrittenLog()
    assert len(list(make_expand([RULES["ax-gelu_decompose-rev"]], unwritten=log)(_erf_gelu(20), None))) == 1
    assert log.records() == ()


def test_the_report_says_what_was_not_written():
    report = Report(1, 1, {}, Latency(), {}, CheckStatus.SKIPPED, Decision.UNCHANGED,
                    StopReason.EXHAUSTED, 0, {}, unwritten=(Unwritten("r", 3, "Gelu needs opset 20"),))
    assert "not written: r x3 (Gelu needs opset 20)" in report.summary()
    assert report.to_dict()["unwritten"] == [{"rule": "r", "matches": 3, "reason": "Gelu needs opset 20"}]


def test_a_match_whose_target_contradicts_a_known_shape_is_not_listed():
    """ax-global_avgpool_as_avgpool-c0 is an instance at one kernel size: where it does not
    fit, the match is invalid, not a rewrite the opset cannot express."""
    graph_proto = h.make_graph(
        [h.make_node("GlobalAveragePool", ["x"], ["y"])], "g",
        [h.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 7, 7])],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 1, 1])])
    model = h.make_model(graph_proto, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 10
    log = UnwrittenLog()
    rules = [r for r in RULES.values() if r.id.startswith("ax-global_avgpool_as_avgpool-c")]
    list(make_expand(rules, unwritten=log)(import_model(model), None))
    assert log.records() == ()
