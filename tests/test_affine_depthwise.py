"""`affine_as_depthwise_conv` / `scale_as_depthwise_conv`: a constant scale (and shift) of a
4-d tensor as a 1x1 depthwise conv, so that ORT keeps it in its blocked layout (PP-OCR's
LearnableAffineBlock after an activation), and never where a conv absorbs the constants."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from onnx import TensorProto
from onnx import helper as h
from onnx import numpy_helper as nh

from taso.opspecs.axioms import find_axiom
from taso.opspecs.axioms.validate import validate_axiom
from taso.pipeline._canonical import canonicalize
from taso.pipeline._export import export
from taso.substitutions._constraints import tensor_env
from taso.substitutions.generate._axiom_rules import rules_from_axiom
from taso.substitutions.matching import apply, find_matches
from taso.substitutions.rule import Rule
from tests.helpers.graphs import make_graph, weight
from tests.helpers.ort import assert_same_outputs

AFFINE, SCALE = "affine_as_depthwise_conv", "scale_as_depthwise_conv"
C = 4


def _rule(name: str) -> Rule:
    (rule,) = rules_from_axiom(find_axiom(name))
    return rule


def _without(rule: Rule, dropped: str) -> Rule:
    constraints = tuple(c for c in rule.constraints if dropped not in c)
    assert constraints != rule.constraints
    return replace(rule, id=f"{rule.id}-without-{dropped}", constraints=constraints)


def _const(name: str, value: np.ndarray) -> TensorProto:
    return nh.from_array(np.asarray(value, dtype=np.float32), name)


def _block(*, producer: str = "Relu", scale: tuple[int, ...] = (1,), next_pads: int = 1, shift: bool = True,
           width: int = 6):
    """conv(producer(x) * s [+ t]; next pads): an affine after an activation, then a 3x3 conv."""
    rng = np.random.default_rng(3)
    nodes = [h.make_node("Conv", ["x", "w0"], ["c0"]) if producer == "Conv" else h.make_node(producer, ["x"], ["c0"]),
             h.make_node("Mul", ["c0", "s"], ["m"])]
    if shift:
        nodes.append(h.make_node("Add", ["m", "t"], ["a"]))
    kernel = 2 * next_pads + 1
    nodes.append(h.make_node("Conv", ["a" if shift else "m", "w"], ["y"], pads=[next_pads] * 4))
    inits = [weight("w", (C, C, kernel, kernel), 1), weight("w0", (C, C, 1, 1), 2),
             _const("s", rng.uniform(0.5, 1.5, scale)), _const("t", rng.uniform(-0.2, 0.2, scale))]
    return canonicalize(make_graph(nodes, {"x": (1, C, 6, width)}, ["y"], inits)).graph


@pytest.mark.parametrize("name", [AFFINE, SCALE])
def test_the_axiom_holds_and_fails_for_a_width_wise_constant(name: str) -> None:
    axiom = find_axiom(name)
    assert validate_axiom(axiom, draws=2).ok
    config = axiom.configs[0]
    along_width = {k: ((1, 1, 1, config.shapes["x"][3]) if k in ("s", "t") else v) for k, v in config.shapes.items()}
    loose = replace(axiom, configs=(replace(config, shapes=along_width), *axiom.configs[1:]),
                    condition=lambda s, p: True)
    assert not validate_axiom(loose, draws=0).ok


@pytest.mark.ort
@pytest.mark.parametrize(("producer", "scale"), [("Relu", (1,)), ("HardSwish", (1, C, 1, 1)), ("Sigmoid", (C, 1, 1))])
def test_an_affine_after_an_activation_becomes_a_depthwise_conv(producer: str, scale: tuple[int, ...]) -> None:
    graph = _block(producer=producer, scale=scale)
    (match,) = find_matches(graph, _rule(AFFINE))
    rewritten = apply(graph, _rule(AFFINE), match)
    assert rewritten is not None
    convs = [n for n in export(rewritten).graph.node if n.op_type == "Conv"]
    assert [n.op_type for n in export(rewritten).graph.node] == [producer, "Conv", "Conv"]
    assert h.get_attribute_value(next(a for a in convs[0].attribute if a.name == "group")) == C
    assert_same_outputs(graph, rewritten)


@pytest.mark.ort
def test_a_scale_alone_becomes_a_bias_free_depthwise_conv() -> None:
    graph = _block(shift=False)
    (match,) = find_matches(graph, _rule(SCALE))
    rewritten = apply(graph, _rule(SCALE), match)
    assert rewritten is not None
    assert [len(n.input) for n in export(rewritten).graph.node if n.op_type == "Conv"] == [2, 2]
    assert_same_outputs(graph, rewritten)


@pytest.mark.parametrize(("block", "guard"), [
    ({"producer": "Conv"}, "after_linear"),  # ORT folds the constants into that conv
    ({"next_pads": 0}, "feeds_unpadded_conv"),  # cv-conv_affine_input folds them into the next one
])
def test_constants_a_conv_absorbs_are_left_to_it(block: dict, guard: str) -> None:
    graph = _block(**block)
    assert find_matches(graph, _rule(AFFINE)) == []
    assert len(find_matches(graph, _without(_rule(AFFINE), guard))) == 1  # left alone by that guard alone


@pytest.mark.ort
def test_a_width_wise_constant_is_left_alone_and_would_compute_something_else() -> None:
    """As wide as x has channels, a (1, 1, 1, W) constant would pass for a per-channel one."""
    graph = _block(scale=(1, 1, 1, C), width=C)
    assert find_matches(graph, _rule(AFFINE)) == []
    loose = _rule(AFFINE)
    for guard in ("tuple(shape('s'))", "tuple(shape('t'))"):
        loose = _without(loose, guard)
    (match,) = find_matches(graph, loose)
    wrong = apply(graph, loose, match)
    assert wrong is not None
    with pytest.raises(AssertionError):
        assert_same_outputs(graph, wrong)


def test_integer_tensors_are_left_alone() -> None:
    nodes = [h.make_node("Cast", ["x"], ["i"], to=TensorProto.INT64), h.make_node("Relu", ["i"], ["r"]),
             h.make_node("Mul", ["r", "s"], ["m"]), h.make_node("Add", ["m", "t"], ["y"])]
    inits = [nh.from_array(np.array(2, np.int64), "s"), nh.from_array(np.array(1, np.int64), "t")]
    graph = canonicalize(make_graph(nodes, {"x": (1, C, 3, 3)}, ["y"], inits)).graph
    assert find_matches(graph, _rule(AFFINE)) == []  # a Conv of int64 would not even load


def test_after_linear_looks_through_constant_steps_only() -> None:
    nodes = [h.make_node("Conv", ["x", "w"], ["c"]), h.make_node("Add", ["c", "b"], ["cb"]),
             h.make_node("Mul", ["k", "cb"], ["ck"]), h.make_node("Add", ["ck", "x"], ["res"]),
             h.make_node("Relu", ["ck"], ["r"])]
    inits = [weight("w", (C, C, 1, 1)), _const("b", np.ones((1, C, 1, 1))), _const("k", np.float32(2.0))]
    graph = make_graph(nodes, {"x": (1, C, 3, 3)}, ["res", "r"], inits)
    env = tensor_env(graph, {n: n for n in ("x", "c", "cb", "ck", "res", "r")},
                     lambda name: name in graph.initializers)
    after_linear = env["after_linear"]
    assert [after_linear(n) for n in ("c", "cb", "ck")] == [True, True, True]  # type: ignore[operator]
    assert [after_linear(n) for n in ("x", "res", "r")] == [False, False, False]  # type: ignore[operator]
