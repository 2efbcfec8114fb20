"""`conv_bias_merge_parallel`: conv(x, w, b; pads) + conv(x, w2, b2; pads - m) = one conv with
w + enlarge(w2) and b + b2, the structural re-parameterization of RepVGG-style blocks
(timm ``repvgg_a0`` exported as it is trains with a 3x3 and a 1x1 branch of one input)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from onnx import helper as h

from taso.opspecs.axioms import find_axiom
from taso.opspecs.axioms.validate import validate_axiom
from taso.pipeline._canonical import canonicalize
from taso.pipeline._export import export
from taso.substitutions.generate._axiom_bank import axiom_bank
from taso.substitutions.generate._axiom_rules import rules_from_axiom
from taso.substitutions.generate._refute import refute
from taso.substitutions.generate._witness import WitnessOutcome, check_witness, type_error
from taso.substitutions.matching import apply, find_matches
from taso.substitutions.rule import Rule
from tests.helpers.graphs import make_graph, weight
from tests.helpers.ort import assert_same_outputs


def _rule() -> Rule:
    (rule,) = rules_from_axiom(find_axiom("conv_bias_merge_parallel"))
    return rule


def _uncentred(rule: Rule) -> Rule:
    """The rule with the smaller conv's window shifted down one row (same output shape)."""
    shifted = ("tuple(pads2) == (pads[0] - 1 - (shape('w')[2] - shape('w2')[2]) // 2, "
               "pads[1] - (shape('w')[3] - shape('w2')[3]) // 2, pads[2] + 1 - (shape('w')[2] - shape('w2')[2]) // 2, "
               "pads[3] - (shape('w')[3] - shape('w2')[3]) // 2)")
    constraints = tuple(shifted if c.startswith("tuple(pads2)") else c for c in rule.constraints)
    assert constraints != rule.constraints
    return replace(rule, id=f"{rule.id}-uncentred", constraints=constraints)


def _branches(*, small_pads: tuple[int, ...] = (0, 0, 0, 0), big_first: bool = True, small_kernel: int = 1,
              strides: tuple[int, int] = (1, 1), small_dilations: tuple[int, int] = (1, 1)):  # noqa: ANN202
    """relu(conv3x3(x) + conv_kxk(x)), both with a bias, as torch.onnx writes a RepVGG block."""
    big = h.make_node("Conv", ["x", "w", "b"], ["c3"], pads=[1, 1, 1, 1], strides=list(strides))
    small = h.make_node("Conv", ["x", "w2", "b2"], ["c1"], pads=list(small_pads),
                        strides=list(strides), dilations=list(small_dilations))
    add = h.make_node("Add", ["c3", "c1"] if big_first else ["c1", "c3"], ["s"])
    nodes = [big, small, add, h.make_node("Relu", ["s"], ["y"])]
    inits = [weight("w", (8, 4, 3, 3), 1), weight("b", (8,), 2),
             weight("w2", (8, 4, small_kernel, small_kernel), 3), weight("b2", (8,), 4)]
    return canonicalize(make_graph(nodes, {"x": (1, 4, 7, 7)}, ["y"], inits)).graph


def test_the_axiom_holds_and_fails_without_the_margin() -> None:
    axiom = find_axiom("conv_bias_merge_parallel")
    report = validate_axiom(axiom, draws=2)
    assert report.ok, report.failures

    def same_pads(shapes, params):  # noqa: ANN001, ANN202
        return {**axiom.derive(shapes, params), "small_pads": tuple(params.get("pads", (0, 0, 0, 0)))}

    assert not validate_axiom(replace(axiom, derive=same_pads), draws=0).ok


def test_the_bank_leaves_the_axiom_to_its_hand_built_rule() -> None:
    assert "conv_bias_merge_parallel" not in {b.name for b in axiom_bank()}
    assert {"conv_enlarge_kernel", "conv_linear_weight"} <= {b.name for b in axiom_bank()}


def test_the_rule_passes_its_witnesses_and_the_refuter_needs_the_margin() -> None:
    rule = _rule()
    assert type_error(rule) == ""
    assert check_witness(rule).outcome is WitnessOutcome.AGREE
    assert refute(rule) is None
    assert refute(_uncentred(rule)) is not None


@pytest.mark.parametrize("big_first", [True, False])
def test_a_repvgg_block_is_one_conv_in_either_operand_order(big_first: bool) -> None:
    graph = _branches(big_first=big_first)
    rule = _rule()
    (match,) = find_matches(graph, rule)
    rewritten = apply(graph, rule, match)
    assert rewritten is not None
    assert [n.op_type for n in export(rewritten).graph.node] == ["Conv", "Relu"]


@pytest.mark.parametrize(("small_pads", "small_kernel", "small_dilations"), [
    ((2, 1, 0, 1), 3, (1, 1)),  # the second 3x3 reads windows one row up: same shape, other pads
    ((1, 1, 0, 0), 2, (1, 1)),  # an even kernel cannot sit centred in a 3x3
    ((2, 2, 2, 2), 3, (2, 2)),  # a dilated 3x3: same shape, other windows
])
def test_convs_reading_other_windows_are_left_alone(small_pads, small_kernel, small_dilations) -> None:  # noqa: ANN001
    graph = _branches(small_pads=small_pads, small_kernel=small_kernel, small_dilations=small_dilations)
    assert find_matches(graph, _rule()) == []


def test_two_equal_kernels_merge_too() -> None:
    assert find_matches(_branches(small_pads=(1, 1, 1, 1), small_kernel=3), _rule())


@pytest.mark.ort
@pytest.mark.parametrize("strides", [(1, 1), (2, 2)])
def test_the_merged_block_computes_the_same_on_ort(strides: tuple[int, int]) -> None:
    graph = _branches(strides=strides)
    rule = _rule()
    (match,) = find_matches(graph, rule)
    rewritten = apply(graph, rule, match)
    assert rewritten is not None
    assert_same_outputs(graph, rewritten)
    np.testing.assert_equal(len(export(rewritten).graph.node), 2)
