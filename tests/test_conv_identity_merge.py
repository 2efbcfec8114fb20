"""`conv_bias_bn_identity_merge`: conv(x, w, b) + bn(x) = one conv whose kernel adds the batch
norm's scale on its centre diagonal, the identity branch of a RepVGG block (timm
``repvgg_a0`` as exported: after its 3x3 and 1x1 branches merge, a BatchNormalization of
the block's input is still added)."""

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

NAME = "conv_bias_bn_identity_merge"


def _rule() -> Rule:
    (rule,) = rules_from_axiom(find_axiom(NAME))
    return rule


def _loosened(rule: Rule, dropped: str) -> Rule:
    constraints = tuple(c for c in rule.constraints if not c.startswith(dropped))
    assert constraints != rule.constraints
    return replace(rule, id=f"{rule.id}-without-{dropped}", constraints=constraints)


def _block(*, pads: tuple[int, ...] = (1, 1, 1, 1), strides: tuple[int, int] = (1, 1), conv_first: bool = True,
           out_channels: int = 6, kernel: int = 3, group: int = 1):  # noqa: ANN202
    """relu(conv(x, w, b) + bn(x)), the merged RepVGG block."""
    conv = h.make_node("Conv", ["x", "w", "b"], ["c"], pads=list(pads), strides=list(strides), group=group)
    bn = h.make_node("BatchNormalization", ["x", "g", "beta", "mean", "var"], ["n"], epsilon=1e-5)
    add = h.make_node("Add", ["c", "n"] if conv_first else ["n", "c"], ["s"])
    stats = [weight("g", (6,), 5), weight("beta", (6,), 6), weight("mean", (6,), 7),
             h.make_tensor("var", 1, (6,), np.linspace(0.5, 2.0, 6).tolist())]
    inits = [weight("w", (out_channels, 6 // group, kernel, kernel), 1), weight("b", (out_channels,), 2), *stats]
    nodes = [conv, bn, add, h.make_node("Relu", ["s"], ["y"])]
    return canonicalize(make_graph(nodes, {"x": (1, 6, 7, 7)}, ["y"], inits)).graph


def test_the_axiom_holds_and_fails_off_centre_or_strided() -> None:
    axiom = find_axiom(NAME)
    assert validate_axiom(axiom, draws=2).ok
    config = axiom.configs[0]
    shifted = replace(config, params={**config.params, "pads": (2, 1, 0, 1)})
    strided = replace(config, params={**config.params, "strides": (2, 2)})
    for wrong in (shifted, strided):
        loose = replace(axiom, configs=(wrong, *axiom.configs[1:]), condition=lambda s, p: True)
        assert not validate_axiom(loose, draws=0).ok


def test_the_bank_leaves_the_axiom_to_its_hand_built_rule() -> None:
    assert NAME not in {b.name for b in axiom_bank()}


def test_the_rule_passes_its_witnesses_and_the_refuter() -> None:
    rule = _rule()
    assert type_error(rule) == "" and check_witness(rule).outcome is WitnessOutcome.AGREE
    assert refute(rule) is None


@pytest.mark.parametrize("conv_first", [True, False])
def test_a_merged_repvgg_block_with_its_identity_is_one_conv(conv_first: bool) -> None:
    graph = _block(conv_first=conv_first)
    (match,) = find_matches(graph, _rule())
    rewritten = apply(graph, _rule(), match)
    assert rewritten is not None
    assert [n.op_type for n in export(rewritten).graph.node] == ["Conv", "Relu"]


@pytest.mark.ort
@pytest.mark.parametrize(("block", "guards"), [
    ({"pads": (2, 1, 0, 1)}, ("tuple(pads)",)),  # windows shifted a row: same shape, not centred on x
    ({"strides": (2, 2), "pads": (4, 4, 4, 4)}, ("tuple(pads)", "tuple(strides)")),  # strided, padded back to 7x7
])
def test_blocks_the_identity_cannot_join_are_left_alone(block: dict, guards: tuple[str, ...]) -> None:
    graph = _block(**block)
    assert find_matches(graph, _rule()) == []
    loose = _rule()
    for guard in guards:
        loose = _loosened(loose, guard)
    (match,) = find_matches(graph, loose)  # left alone by those constraints, not by the block's form
    wrong = apply(graph, loose, match)
    assert wrong is not None
    with pytest.raises(AssertionError):  # and without them the rewrite computes something else
        assert_same_outputs(graph, wrong)


def test_a_grouped_conv_is_left_alone() -> None:
    assert find_matches(_block(kernel=1, pads=(0, 0, 0, 0), group=2), _rule()) == []


@pytest.mark.ort
@pytest.mark.parametrize(("kernel", "pads"), [(3, (1, 1, 1, 1)), (1, (0, 0, 0, 0))])
def test_the_merged_block_computes_the_same_on_ort(kernel: int, pads: tuple[int, ...]) -> None:
    graph = _block(kernel=kernel, pads=pads)
    (match,) = find_matches(graph, _rule())
    rewritten = apply(graph, _rule(), match)
    assert rewritten is not None
    assert_same_outputs(graph, rewritten)
