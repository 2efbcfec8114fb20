"""`conv_bias_bn_identity_merge` and `_sub`: conv(x, w, b) +/- bn(x) = one conv whose kernel
adds (subtracts) the batch norm's scale at its centre, where the identity kernel reads each
output channel's own input channel: the identity branch of a RepVGG block (timm
``repvgg_a0`` as exported: after its 3x3 and 1x1 branches merge, a BatchNormalization of
the block's input is still added), of MobileOne's depthwise blocks and RepGhost's fusion
batch norm (depthwise), and FastViT's RepMixer, ``mixer(x) - norm(x)`` (depthwise, Sub)."""

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
from taso.substitutions.generate._refute_configs import choose_configs
from taso.substitutions.generate._witness import WitnessOutcome, check_witness, type_error
from taso.substitutions.matching import find_matches
from taso.substitutions.rule import Rule
from tests.helpers.graphs import make_graph, weight
from tests.helpers.ort import assert_same_outputs
from tests.helpers.rules import applied_once, loosened

NAME = "conv_bias_bn_identity_merge"
NAMES = {"Add": NAME, "Sub": "conv_bias_bn_identity_sub"}


def _rule(op: str = "Add") -> Rule:
    (rule,) = rules_from_axiom(find_axiom(NAMES[op]))
    return rule


def _block(*, pads: tuple[int, ...] = (1, 1, 1, 1), strides: tuple[int, int] = (1, 1), conv_first: bool = True,
           out_channels: int = 6, kernel: int = 3, group: int = 1, op: str = "Add"):  # noqa: ANN202
    """relu(conv(x, w, b) op bn(x)): the merged RepVGG block (Add), FastViT's RepMixer (Sub)."""
    conv = h.make_node("Conv", ["x", "w", "b"], ["c"], pads=list(pads), strides=list(strides), group=group)
    bn = h.make_node("BatchNormalization", ["x", "g", "beta", "mean", "var"], ["n"], epsilon=1e-5)
    add = h.make_node(op, ["c", "n"] if conv_first else ["n", "c"], ["s"])
    stats = [weight("g", (6,), 5), weight("beta", (6,), 6), weight("mean", (6,), 7),
             h.make_tensor("var", 1, (6,), np.linspace(0.5, 2.0, 6).tolist())]
    inits = [weight("w", (out_channels, 6 // group, kernel, kernel), 1), weight("b", (out_channels,), 2), *stats]
    nodes = [conv, bn, add, h.make_node("Relu", ["s"], ["y"])]
    return canonicalize(make_graph(nodes, {"x": (1, 6, 7, 7)}, ["y"], inits)).graph


@pytest.mark.parametrize("name", NAMES.values())
def test_the_axiom_holds_and_fails_off_centre_strided_or_in_other_groups(name: str) -> None:
    axiom = find_axiom(name)
    assert validate_axiom(axiom, draws=2).ok
    config = axiom.configs[0]
    shifted = replace(config, params={**config.params, "pads": (2, 1, 0, 1)})
    strided = replace(config, params={**config.params, "strides": (2, 2)})
    depthwise = next(c for c in axiom.configs if c.params.get("group", 1) > 1)
    regrouped = replace(depthwise, params={**depthwise.params, "group": 1},
                        shapes={**depthwise.shapes, "w": (3, 3, 3, 3)})  # a full 3x3 kernel, identity drawn depthwise
    for wrong in (shifted, strided):
        loose = replace(axiom, configs=(wrong, *axiom.configs[1:]), condition=lambda s, p: True)
        assert not validate_axiom(loose, draws=0).ok
    def depthwise_identity(s, p):  # noqa: ANN001, ANN202 - the identity of a depthwise conv for the full kernel
        derived = axiom.derive(s, p)
        return {**derived, "identity_group": 3} if tuple(s["w"]) == (3, 3, 3, 3) else derived

    wrong_identity = replace(axiom, configs=(regrouped, *axiom.configs[1:]), condition=lambda s, p: True,
                             derive=depthwise_identity)
    assert not validate_axiom(wrong_identity, draws=0).ok


def test_the_bank_leaves_the_axioms_to_their_hand_built_rules() -> None:
    assert not set(NAMES.values()) & {b.name for b in axiom_bank()}


@pytest.mark.parametrize("op", NAMES)
def test_the_rule_passes_its_witnesses_and_the_refuter_needs_its_constraints(op: str) -> None:
    rule = _rule(op)
    assert type_error(rule) == "" and check_witness(rule).outcome is WitnessOutcome.AGREE
    assert refute(rule) is None
    assert refute(loosened(rule, "tuple(pads)")) is not None


@pytest.mark.parametrize(("op", "conv_first"), [("Add", True), ("Add", False), ("Sub", True)])
def test_a_merged_block_with_its_identity_is_one_conv(conv_first: bool, op: str) -> None:
    graph = _block(conv_first=conv_first, op=op)
    rewritten = applied_once(graph, _rule(op))
    assert [n.op_type for n in export(rewritten).graph.node] == ["Conv", "Relu"]


def test_bn_minus_conv_is_left_alone() -> None:
    assert find_matches(_block(conv_first=False, op="Sub"), _rule("Sub")) == []


@pytest.mark.parametrize(("block", "guards"), [
    ({"pads": (2, 1, 0, 1)}, ("tuple(pads)",)),  # windows shifted a row: same shape, not centred on x
    ({"strides": (2, 2), "pads": (4, 4, 4, 4)}, ("tuple(pads)", "tuple(strides)")),  # strided, padded back to 7x7
])
def test_blocks_the_identity_cannot_join_are_left_alone(block: dict, guards: tuple[str, ...]) -> None:
    graph = _block(**block)
    assert find_matches(graph, _rule()) == []
    assert find_matches(graph, loosened(_rule(), *guards))  # left alone by those constraints, not by its form


def test_a_conv_in_groups_of_several_channels_is_left_alone() -> None:
    graph = _block(kernel=1, pads=(0, 0, 0, 0), group=2)
    assert find_matches(graph, _rule()) == []
    assert find_matches(graph, loosened(_rule(), "shape('w') in"))


def test_a_conv_to_one_channel_broadcast_over_the_batch_norm_is_left_alone() -> None:
    graph = _block(out_channels=1)
    assert find_matches(graph, _rule()) == []
    # w's channels; b's, beta's and the statistics' sizes
    assert find_matches(graph, loosened(_rule(), *(f"shape('{n}" for n in ("w') in", "b", "g", "mean", "var"))))


@pytest.mark.ort
@pytest.mark.parametrize("op", NAMES)
@pytest.mark.parametrize(("kernel", "pads", "group"), [
    (3, (1, 1, 1, 1), 1), (1, (0, 0, 0, 0), 1), (3, (1, 1, 1, 1), 6), (1, (0, 0, 0, 0), 6)])
def test_the_merged_block_computes_the_same_on_ort(kernel: int, pads: tuple[int, ...], group: int, op: str) -> None:
    graph = _block(kernel=kernel, pads=pads, group=group, op=op)
    rewritten = applied_once(graph, _rule(op))
    assert_same_outputs(graph, rewritten)


def test_the_refuter_draws_depthwise_and_full_convs_with_centred_pads() -> None:
    """Blind draws of a conv's group and pads (a divisor of the channels; 0 or 1 a side) almost
    never meet these rules' constraints: the refuter fits some draws to the weight."""
    configs = choose_configs(_rule("Sub"))
    kinds = {(c.bindings["group"] == c.shapes["x"][1] > 1, c.shapes["w"][2] > 1) for c in configs}
    assert (True, True) in kinds and (False, True) in kinds  # a depthwise 3x3 and a full 3x3


MERGE = "conv_bias_merge_parallel_identity"


def _repvgg_dw(*, pads2: tuple[int, ...] = (0, 0, 0, 0), group: int = 6, strides: tuple[int, int] = (1, 1),
               pads: tuple[int, ...] = (1, 1, 1, 1)):  # noqa: ANN202
    """bn(conv3(x) + conv1(x) + x): RepViT's RepVggDw as timm exports it."""
    conv3 = h.make_node("Conv", ["x", "w", "b"], ["c3"], pads=list(pads), strides=list(strides), group=group)
    conv1 = h.make_node("Conv", ["x", "w2", "b2"], ["c1"], pads=list(pads2), strides=list(strides), group=group)
    bn = h.make_node("BatchNormalization", ["s", "g", "beta", "mean", "var"], ["y"], epsilon=1e-5)
    stats = [weight("g", (6,), 5), weight("beta", (6,), 6), weight("mean", (6,), 7),
             h.make_tensor("var", 1, (6,), np.linspace(0.5, 2.0, 6).tolist())]
    inits = [weight("w", (6, 6 // group, 3, 3), 1), weight("b", (6,), 2), weight("w2", (6, 6 // group, 1, 1), 3),
             weight("b2", (6,), 4), *stats]
    nodes = [conv3, conv1, h.make_node("Add", ["c3", "c1"], ["t"]), h.make_node("Add", ["t", "x"], ["s"]), bn]
    return canonicalize(make_graph(nodes, {"x": (1, 6, 7, 7)}, ["y"], inits)).graph


def _merge_rule() -> Rule:
    (rule,) = rules_from_axiom(find_axiom(MERGE))
    return rule


def test_the_merge_with_identity_holds_and_fails_off_centre() -> None:
    axiom = find_axiom(MERGE)
    assert validate_axiom(axiom, draws=2).ok
    config = axiom.configs[0]
    shifted = replace(config, params={**config.params, "pads": (2, 1, 0, 1)})
    assert not validate_axiom(replace(axiom, configs=(shifted, *axiom.configs[1:]), condition=lambda s, p: True),
                              draws=0).ok
    rule = _merge_rule()
    assert type_error(rule) == "" and check_witness(rule).outcome is WitnessOutcome.AGREE
    assert refute(rule) is None


@pytest.mark.parametrize("group", [6, 1])
def test_a_repvgg_dw_block_is_one_conv_and_its_batch_norm(group: int) -> None:
    graph = _repvgg_dw(group=group)
    rewritten = applied_once(graph, _merge_rule())
    assert [n.op_type for n in export(rewritten).graph.node] == ["Conv", "BatchNormalization"]


@pytest.mark.parametrize(("block", "guards"), [
    ({"pads": (2, 1, 0, 1)}, ("tuple(pads) ==", "tuple(pads2)")),  # the 3x3's windows a row off centre
    ({"strides": (2, 2), "pads": (4, 4, 4, 4), "pads2": (3, 3, 3, 3)}, ("tuple(strides)", "tuple(pads) ==")),
])
def test_blocks_the_merge_cannot_take_are_left_alone(block: dict, guards: tuple[str, ...]) -> None:
    graph = _repvgg_dw(**block)
    assert find_matches(graph, _merge_rule()) == []
    assert find_matches(graph, loosened(_merge_rule(), *guards))  # left alone by those constraints, not by its form


@pytest.mark.ort
@pytest.mark.parametrize("group", [6, 1])
def test_the_merged_block_with_identity_computes_the_same_on_ort(group: int) -> None:
    graph = _repvgg_dw(group=group)
    rewritten = applied_once(graph, _merge_rule())
    assert_same_outputs(graph, rewritten)
