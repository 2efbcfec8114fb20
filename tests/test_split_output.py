"""Un-merging a Conv whose activated output is split in two (axioms `conv[_bias]_split_output`)."""

from __future__ import annotations

import dataclasses

import pytest
from onnx import helper as h

from taso.substitutions.generate._axiom_families import split_output_rule, split_output_rules
from taso.substitutions.generate._verify import verify_rule
from taso.substitutions.generate._witness import check_witness
from taso.substitutions.matching import apply, find_matches
from taso.substitutions.rule import Pattern, PatternNode, ProofStatus
from tests.helpers.graphs import make_graph, weight
from tests.helpers.ort import assert_same_outputs


def _activation(kind: str, value: str) -> tuple[list, str]:
    if kind == "relu":
        return [h.make_node("Relu", [value], ["act"])], "act"
    if kind == "silu":
        return [h.make_node("Sigmoid", [value], ["sig"]), h.make_node("Mul", [value, "sig"], ["act"])], "act"
    return [], value


def _split_net(kind: str, *, bias: bool = True, sizes: tuple[int, ...] = (3, 5), group: int = 1,
               axis: int = 1, extra_reader: bool = False):  # noqa: ANN202
    """Conv(3x3) -> activation -> Split -> Relu on each part (as a C2f block's first conv)."""
    weights = ["w", "b"] if bias else ["w"]
    nodes = [h.make_node("Conv", ["x", *weights], ["c"], pads=[1, 1, 1, 1], group=group)]
    chain, last = _activation(kind, "c")
    parts = [f"p{i}" for i in range(len(sizes))]
    nodes += [*chain, h.make_node("Split", [last, "sizes"], parts, axis=axis)]
    nodes += [h.make_node("Relu", [p], [f"y{i}"]) for i, p in enumerate(parts)]
    outputs = [f"y{i}" for i in range(len(parts))] + (["c"] if extra_reader else [])
    out_channels = sum(sizes) if axis == 1 else 8
    inits = [weight("w", (out_channels, 4 // group, 3, 3), 1), weight("b", (out_channels,), 2),
             h.make_tensor("sizes", 7, [len(sizes)], list(sizes))]
    return make_graph(nodes, {"x": [1, 4, 6, 6]}, outputs, inits if bias else [inits[0], inits[2]])


def test_every_split_output_rule_is_an_axiom_instance_and_passes_its_witness() -> None:
    rules = split_output_rules(bias=False) + split_output_rules(bias=True)
    assert len(rules) == 6
    for rule in rules:
        check = verify_rule(rule)
        assert check.status is ProofStatus.PROVED and check.witness_ok and check_witness(rule).configs == 3, rule.id


@pytest.mark.ort
@pytest.mark.parametrize("kind", ["none", "relu", "silu"])
@pytest.mark.parametrize("bias", [False, True])
def test_a_split_conv_becomes_two_convs_that_compute_the_same(kind: str, bias: bool) -> None:
    graph = _split_net(kind, bias=bias)
    rule = split_output_rule(kind, bias=bias)
    (match,) = find_matches(graph, rule)
    result = apply(graph, rule, match)
    assert result is not None
    assert_same_outputs(graph, result)
    ops = sorted(n.op_type for n in result.nodes.values() if not n.domain)
    assert ops.count("Conv") == 2 and "Split" not in ops


def test_split_output_rules_match_only_what_they_may_unmerge() -> None:
    rule = split_output_rule("silu", bias=True)
    assert not find_matches(_split_net("silu", sizes=(2, 3, 3)), rule)  # three parts
    assert not find_matches(_split_net("silu", group=2), rule)  # grouped conv
    assert not find_matches(_split_net("silu", sizes=(3, 3), axis=2), rule)  # not the channels
    assert not find_matches(_split_net("relu"), rule)  # another activation
    graph = _split_net("silu", extra_reader=True)  # the conv's output is also a graph output
    assert all(apply(graph, rule, m) is None for m in find_matches(graph, rule))


def test_a_wrong_split_output_rule_is_refuted() -> None:
    rule = split_output_rule("none", bias=True)
    target = list(rule.target.nodes)
    first, second = (i for i, n in enumerate(target) if n.op == "Conv")
    swap = {"sb:0": "sb:1", "sb:1": "sb:0"}  # each half gets the other half's bias
    for i in (first, second):
        node = target[i]
        target[i] = PatternNode(node.id, node.op, tuple(swap.get(r, r) for r in node.inputs), node.params)
    wrong = dataclasses.replace(rule, target=Pattern(tuple(target)))
    assert not check_witness(wrong).ok
