"""Regrouping grouped convs (`Regroup`, axiom `conv_regroup`, its per-width rules)."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import pytest
from onnx import helper as h

from taso.opspecs import spec_by_name
from taso.substitutions.generate._axiom_families import regroup_rule, regroup_rules
from taso.substitutions.generate._verify import Verdict, verify_rule
from taso.substitutions.generate._witness import check_witness
from taso.substitutions.matching import apply, find_matches
from taso.substitutions.rule import (
    ParamExpr,
    Pattern,
    PatternNode,
    ProofStatus,
    dump_rules,
    load_rules,
)
from tests.helpers.graphs import grouped_net, make_graph, weight
from tests.helpers.ort import assert_same_outputs


def _conv(x: np.ndarray, w: np.ndarray, group: int, **params: object) -> np.ndarray:
    return spec_by_name("Conv").evaluate([x, w], {"group": group, **params})[0]


@pytest.mark.parametrize(("channels", "group", "filters", "factor"), [(4, 8, 2, 4), (8, 4, 1, 2), (1, 6, 1, 3)])
def test_regrouped_weight_gives_the_same_conv(channels: int, group: int, filters: int, factor: int) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, channels * group, 6, 6))
    w = rng.standard_normal((filters * group, channels, 3, 3))
    wide = spec_by_name("Regroup").evaluate([w], {"group": group, "factor": factor})[0]
    assert wide.shape == (filters * group, channels * factor, 3, 3)
    assert np.count_nonzero(wide) == np.count_nonzero(w)  # block-diagonal: zeros elsewhere
    want = _conv(x, w, group, pads=(1, 1, 1, 1), strides=(2, 2))
    np.testing.assert_allclose(_conv(x, wide, group // factor, pads=(1, 1, 1, 1), strides=(2, 2)), want, atol=1e-12)


def test_regroup_refuses_a_factor_that_does_not_divide_the_groups() -> None:
    result = spec_by_name("Regroup").check([(8, 4, 3, 3)], {"group": 2, "factor": 4})
    assert not result.ok and "does not divide" in result.reason


def test_every_regroup_rule_is_an_axiom_instance_and_passes_its_witness() -> None:
    rules = regroup_rules()
    assert {r.id for r in rules} == {"ax-conv_regroup-to8", "ax-conv_regroup-to16", "ax-conv_regroup-to32",
                                     "ax-conv_regroup_depthwise-to16", "ax-conv_regroup_depthwise-to32"}
    for rule in rules:
        check = verify_rule(rule)
        assert check.status is ProofStatus.PROVED and check.witness_ok, rule.id


def _with_target_group(rule, expr: str):  # noqa: ANN001, ANN202
    regroup, conv = rule.target.nodes
    params = tuple((k, ParamExpr(expr) if k == "group" else v) for k, v in conv.params)
    return dataclasses.replace(rule, target=Pattern((regroup, PatternNode(conv.id, conv.op, conv.inputs, params))))


def test_a_wrong_regroup_rule_is_refuted() -> None:
    rule = regroup_rule(16, depthwise=False)
    assert check_witness(rule).ok
    # keeping the old group count over the widened weight: shapes no longer fit
    assert not check_witness(_with_target_group(rule, "group")).ok
    # halving the groups whatever the factor: the wrong blocks meet the wrong inputs
    assert not check_witness(_with_target_group(rule, "group // 2")).ok
    # its target conv does not accept the regrouped weight: `verify` calls it ill-typed
    assert verify_rule(_with_target_group(rule, "group // 2")).verdict is Verdict.ILL_TYPED


@pytest.mark.ort
@pytest.mark.parametrize(("channels", "group", "width"), [(4, 8, 16), (8, 4, 16), (4, 16, 32), (16, 4, 32)])
def test_narrow_groups_are_widened_and_compute_the_same(channels: int, group: int, width: int) -> None:
    graph = grouped_net(channels, group)
    rule = regroup_rule(width, depthwise=False)
    (match,) = find_matches(graph, rule)
    result = apply(graph, rule, match)
    assert result is not None
    assert_same_outputs(graph, result)
    conv = next(n for n in result.nodes.values() if n.op_type == "Conv" and n.attr("group", 1) > 1)
    assert conv.attr("group") == channels * group // width


@pytest.mark.ort
def test_regroup_rules_match_only_what_they_can_widen() -> None:
    to16, dw16 = regroup_rule(16, depthwise=False), regroup_rule(16, depthwise=True)
    assert not find_matches(grouped_net(16, 4), to16)  # already 16 wide
    assert not find_matches(grouped_net(4, 2), to16)  # 2 groups cannot become 2/4
    net = grouped_net(4, 8, depthwise_too=True)
    assert len(find_matches(net, to16)) == 1 and len(find_matches(net, dw16)) == 1
    result = apply(net, dw16, find_matches(net, dw16)[0])
    assert result is not None
    assert_same_outputs(net, result)


def test_regroup_rules_survive_the_rule_file(tmp_path) -> None:  # noqa: ANN001
    from taso.substitutions.rule import RuleLibrary

    path = tmp_path / "rules.json"
    path.write_text(dump_rules(RuleLibrary(tuple(regroup_rules()), ())))
    assert [r.id for r in load_rules(path).rules] == [r.id for r in regroup_rules()]


def test_the_shipped_library_has_the_regroup_rules() -> None:
    from taso.pipeline._rewriting import default_rules

    shipped = {r.id: r for r in default_rules()}
    for rule in regroup_rules():
        mine = shipped[rule.id]
        assert (mine.source, mine.target, mine.constraints) == (rule.source, rule.target, rule.constraints)


def _with_bias(graph):  # noqa: ANN001, ANN202
    """`graph` with a bias on its grouped conv, as torch exports write every conv (BN folded)."""
    nodes, inits = [], []
    for node in graph.ordered_nodes():
        proto = onnx.NodeProto()
        proto.CopyFrom(node.proto)
        if node.op_type == "Conv" and node.attr("group", 1) > 1:
            proto.input.append("grouped_bias")
            inits.append(weight("grouped_bias", (graph.types[node.outputs[0]].shape[1],), 3))
        nodes.append(proto)
    inits += [h.make_tensor(n, i.proto.data_type, list(i.proto.dims), i.array().ravel().tolist())
              for n, i in graph.initializers.items()]
    shapes = {name: graph.types[name].shape for name in graph.inputs}
    return make_graph(nodes, shapes, list(graph.outputs), inits)


@pytest.mark.ort
@pytest.mark.parametrize(("channels", "group", "width"), [(4, 8, 8), (4, 8, 16), (8, 4, 32)])
def test_a_grouped_conv_with_a_bias_is_regrouped_too(channels: int, group: int, width: int) -> None:
    """torchvision's ResNeXt convs all carry a bias after export; the no-bias rule misses them."""
    graph = _with_bias(grouped_net(channels, group))
    assert not find_matches(graph, regroup_rule(width, depthwise=False))
    rule = regroup_rule(width, depthwise=False, bias=True)
    (match,) = find_matches(graph, rule)
    result = apply(graph, rule, match)
    assert result is not None
    assert_same_outputs(graph, result)
    assert verify_rule(rule).status is ProofStatus.PROVED
