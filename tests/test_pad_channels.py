"""Channel padding (`taso.pipeline._pad_channels`): its lemmas hold and wrong ones are refuted;
it widens what it can prove unchanged, on ORT, and leaves alone what it cannot."""

from __future__ import annotations

import dataclasses

import onnx
import pytest
from onnx import helper as h

from taso._onnx_import import import_model
from taso.opspecs.axioms.channel_pad import LEMMAS, concat_channels
from taso.opspecs.axioms.conv import conv
from taso.opspecs.axioms.validate import validate_axiom
from taso.pipeline._export import export
from taso.pipeline._pad_channels import BLOCK, CARRIED, pad_channels, pad_rule_id, padded_rewrites
from taso.pipeline._pad_channels import LEMMAS as LEMMAS_BY_OP
from tests.helpers.graphs import make_graph, weight
from tests.helpers.ort import assert_same_outputs

_BY_NAME = {lemma.name: lemma for lemma in LEMMAS}


@pytest.mark.parametrize("name", sorted(_BY_NAME))
def test_each_lemma_is_proved_and_agrees_numerically(name: str) -> None:
    assert validate_axiom(_BY_NAME[name], draws=1).ok


def test_every_op_the_padding_widens_through_has_its_lemmas() -> None:
    assert set(LEMMAS_BY_OP) >= {*CARRIED, "Pad", "BatchNormalization", "Add", "Sub", "Mul", "Div", "Conv", "Concat"}
    assert {name for names in LEMMAS_BY_OP.values() for name in names} <= set(_BY_NAME)


def test_wrong_lemmas_are_refuted() -> None:
    columns = _BY_NAME["conv_zero_columns"]
    nonzero = dataclasses.replace(columns, lhs=lambda a, v, p: a(
        "Conv", concat_channels(a, v["x"], v["p"]), concat_channels(a, v["w"], a("ConstFill", shape=p["zeros"], value=1e-3)), v["b"], **conv(p)))
    assert not validate_axiom(nonzero, draws=0).ok
    depthwise = _BY_NAME["depthwise_conv_concat"]
    swapped = dataclasses.replace(depthwise, rhs=lambda a, v, p: concat_channels(
        a, a("Conv", v["p"], v["v"], v["d"], **conv(p, group=p["extra"])),
        a("Conv", v["x"], v["w"], v["b"], **conv(p, group=p["real"]))))
    assert not validate_axiom(swapped, draws=0).ok
    inside = _BY_NAME["conv_zero_columns_inside"]
    nonzero_inside = dataclasses.replace(inside, lhs=lambda a, v, p: a(
        "Conv", a("Concat", v["x"], v["p"], v["y"], axis=1),
        a("Concat", v["w"], a("ConstFill", shape=p["zeros"], value=1e-3), v["u"], axis=1), v["b"], **conv(p)))
    assert not validate_axiom(nonzero_inside, draws=0).ok
    flatten = _BY_NAME["concat_flatten"]
    reordered = dataclasses.replace(flatten, rhs=lambda a, v, p: a("Concat", v["a"], v["c"], v["b"], v["d"], axis=1))
    assert not validate_axiom(reordered, draws=0).ok


def _se_block(*, output: str = "y", extra: tuple[onnx.NodeProto, ...] = ()):
    """conv(8) -> HardSwish -> depthwise 3x3 -> squeeze-excite (GAP, conv 2, Relu, conv 8,
    HardSigmoid, Mul) -> per-channel scale and shift -> conv 16."""
    nodes = [h.make_node("Conv", ["x", "w0", "b0"], ["a"]),
             h.make_node("HardSwish", ["a"], ["a1"]),
             h.make_node("Conv", ["a1", "wd"], ["d"], group=8, pads=[1, 1, 1, 1]),
             h.make_node("GlobalAveragePool", ["d"], ["g"]),
             h.make_node("Conv", ["g", "ws"], ["s"]),
             h.make_node("Relu", ["s"], ["s1"]),
             h.make_node("Conv", ["s1", "we", "be"], ["e"]),
             h.make_node("HardSigmoid", ["e"], ["e1"], alpha=1 / 6),
             h.make_node("Mul", ["d", "e1"], ["m"]),
             h.make_node("Mul", ["m", "k"], ["m1"]),
             h.make_node("Add", ["m1", "t"], ["m2"]),
             h.make_node("Conv", ["m2", "w1"], ["y"]),
             *extra]
    inits = [weight("w0", (8, 3, 1, 1), 1), weight("b0", (8,), 2), weight("wd", (8, 1, 3, 3), 3),
             weight("ws", (2, 8, 1, 1), 4), weight("we", (8, 2, 1, 1), 5), weight("be", (8,), 6),
             weight("k", (1, 8, 1, 1), 7), weight("t", (8, 1, 1), 8), weight("w1", (16, 8, 1, 1), 9)]
    return make_graph(nodes, {"x": (1, 3, 6, 6)}, [output], inits)


def test_an_se_block_is_widened_to_the_block_and_computes_the_same_on_ort() -> None:
    graph = _se_block()
    padding = pad_channels(graph)
    assert padding is not None
    assert padding.graph.types["d"].shape == (1, BLOCK, 6, 6) and padding.graph.types["s"].shape == (1, BLOCK, 1, 1)
    assert padding.graph.types["y"].shape == (1, 16, 6, 6)
    depthwise = next(n for n in padding.graph.nodes.values() if n.outputs == ("d",))
    assert depthwise.attr("group") == BLOCK
    assert_same_outputs(graph, padding.graph)


def test_the_export_drops_the_declarations_of_widened_values() -> None:
    declared = import_model(onnx.shape_inference.infer_shapes(export(_se_block())))  # value_info for every value
    padding = pad_channels(declared)
    assert padding is not None
    onnx.checker.check_model(export(padding.graph), full_check=True)  # no stale 8-channel declaration


def test_the_padding_is_one_whole_graph_rewrite() -> None:
    graph = _se_block()
    (rewrite,) = padded_rewrites(graph, None)
    assert rewrite.rule_id == pad_rule_id(BLOCK) and rewrite.graph.types["a"].shape[1] == BLOCK
    assert list(padded_rewrites(graph, frozenset(graph.nodes))) == []


@pytest.mark.parametrize("extra, output", [
    ((), "m2"),  # the class reaches a graph output
    ((h.make_node("Flatten", ["m2"], ["f"]),), "f"),  # a reshape reads it
    ((h.make_node("Div", ["d", "m2"], ["q"]), h.make_node("Conv", ["q", "w1"], ["q1"])), "q1"),  # a divisor would hold zeros
])
def test_a_class_that_leaves_through_anything_else_keeps_its_width(extra, output) -> None:
    graph = _se_block(output=output, extra=extra)
    padding = pad_channels(graph)
    widened = set() if padding is None else {n for n, t in padding.graph.types.items() if t != graph.types.get(n)}
    assert not {"d", "m2", "a"} & widened


def test_a_grouped_conv_that_is_not_depthwise_keeps_its_class() -> None:
    nodes = [h.make_node("Conv", ["x", "w0"], ["a"]),
             h.make_node("Conv", ["a", "w1"], ["b"], group=2, pads=[1, 1, 1, 1]),
             h.make_node("Conv", ["b", "w2"], ["y"])]
    inits = [weight("w0", (8, 3, 1, 1), 1), weight("w1", (8, 4, 3, 3), 2), weight("w2", (16, 8, 1, 1), 3)]
    assert pad_channels(make_graph(nodes, {"x": (1, 3, 5, 5)}, ["y"], inits)) is None


def test_widths_already_a_multiple_of_the_block_are_left_alone() -> None:
    nodes = [h.make_node("Conv", ["x", "w0"], ["a"]), h.make_node("Relu", ["a"], ["r"]),
             h.make_node("Conv", ["r", "w1"], ["y"])]
    inits = [weight("w0", (32, 3, 1, 1), 1), weight("w1", (8, 32, 1, 1), 2)]
    assert pad_channels(make_graph(nodes, {"x": (1, 3, 5, 5)}, ["y"], inits)) is None



def _ghost(*, second: tuple[str, int] = ("d", 8), outputs: tuple[str, ...] = ("y",),
           extra: tuple[onnx.NodeProto, ...] = (), extra_weights: tuple[onnx.TensorProto, ...] = (),
           inputs: dict | None = None):
    """A ghost module as GhostNet writes it: conv(8) -> Relu -> depthwise 3x3, the two halves
    concatenated over channels (16), a residual Add with a 1x1 conv of the input, then a 1x1
    conv; `second` names the Concat's second part and its width."""
    part, width = second
    nodes = [h.make_node("Conv", ["x", "w0", "b0"], ["a"]),
             h.make_node("Relu", ["a"], ["r"]),
             h.make_node("Conv", ["r", "wd", "bd"], ["d"], group=8, pads=[1, 1, 1, 1]),
             h.make_node("Concat", ["r", part], ["c"], axis=1),
             h.make_node("Conv", ["x", "ws"], ["s"]),
             h.make_node("Add", ["c", "s"], ["c1"]),
             h.make_node("Conv", ["c1", "w1"], ["y"]),
             *extra]
    inits = [weight("w0", (8, 3, 1, 1), 1), weight("b0", (8,), 2), weight("wd", (8, 1, 3, 3), 3),
             weight("bd", (8,), 4), weight("ws", (8 + width, 3, 1, 1), 5), weight("w1", (16, 8 + width, 1, 1), 6),
             *extra_weights]
    return make_graph(nodes, inputs or {"x": (1, 3, 6, 6)}, list(outputs), inits)


def test_a_channel_concat_of_widened_halves_keeps_their_extra_channels_between_the_real_ones() -> None:
    graph = _ghost()
    padding = pad_channels(graph)
    assert padding is not None
    assert padding.graph.types["r"].shape[1] == BLOCK and padding.graph.types["d"].shape[1] == BLOCK
    assert padding.graph.types["c"].shape[1] == padding.graph.types["s"].shape[1] == 2 * BLOCK
    # the shortcut conv writes the Concat's layout: real 0-7, extra 8-15, real 16-23, extra 24-31
    shortcut = next(n for n in padding.graph.nodes.values() if n.outputs == ("s",))
    rows = padding.graph.initializers[shortcut.inputs[1]].array()[:, 0, 0, 0]
    assert rows[:8].all() and rows[16:24].all() and not rows[8:16].any() and not rows[24:].any()
    assert_same_outputs(graph, padding.graph)


def _widened(graph) -> set[str]:
    padding = pad_channels(graph)
    return set() if padding is None else {n for n, t in padding.graph.types.items() if t != graph.types.get(n)}


@pytest.mark.parametrize("extra, output", [
    ((), "c1"),  # the Concat's class reaches a graph output: its parts keep their width too
    ((h.make_node("Flatten", ["c1"], ["f"]),), "f"),  # a reshape reads it
])
def test_the_parts_of_a_concat_that_keeps_its_width_keep_theirs(extra, output) -> None:
    assert not {"r", "d", "c", "c1"} & _widened(_ghost(outputs=(output,), extra=extra))


def test_a_concat_that_would_come_out_unblocked_keeps_its_width() -> None:
    # the second part is a graph input (8 channels, fixed): 16 + 8 = 24 is no multiple of the block
    graph = _ghost(second=("z", 8), inputs={"x": (1, 3, 6, 6), "z": (1, 8, 6, 6)})
    assert not {"r", "c", "c1"} & _widened(graph)


def test_concats_in_one_class_that_would_disagree_keep_their_width() -> None:
    # c = concat(r[8], d[8]) and e = concat(q[4], t[12]) are added: widened, they would hold
    # their real channels in different places (0-7 and 16-23 against 0-3 and 16-27)
    extra = (h.make_node("Conv", ["x", "wq"], ["q"]), h.make_node("Conv", ["x", "wt"], ["t"]),
             h.make_node("Concat", ["q", "t"], ["e"], axis=1), h.make_node("Add", ["c1", "e"], ["c2"]),
             h.make_node("Conv", ["c2", "w1"], ["y2"]))
    graph = _ghost(outputs=("y", "y2"), extra=extra,
                   extra_weights=(weight("wq", (4, 3, 1, 1), 7), weight("wt", (12, 3, 1, 1), 8)))
    assert not {"r", "d", "c", "c1", "q", "t", "e", "c2"} & _widened(graph)


def test_a_concat_over_another_axis_keeps_its_parts() -> None:
    nodes = [h.make_node("Conv", ["x", "w0"], ["a"]), h.make_node("Relu", ["a"], ["r"]),
             h.make_node("Concat", ["a", "r"], ["c"], axis=2), h.make_node("Conv", ["c", "w1"], ["y"])]
    inits = [weight("w0", (8, 3, 1, 1), 1), weight("w1", (16, 8, 1, 1), 2)]
    assert pad_channels(make_graph(nodes, {"x": (1, 3, 5, 5)}, ["y"], inits)) is None


def test_classes_that_feed_each_other_through_concats_end_and_compute_the_same() -> None:
    # a1 (class A) -> c1 = concat(a1) (class B) -> a2 = concat(c1), added to a1 (class A again)
    nodes = [h.make_node("Conv", ["x", "w0"], ["a1"]), h.make_node("Concat", ["a1"], ["c1"], axis=1),
             h.make_node("Concat", ["c1"], ["a2"], axis=1), h.make_node("Add", ["a2", "a1"], ["s"]),
             h.make_node("Conv", ["s", "w1"], ["y"])]
    graph = make_graph(nodes, {"x": (1, 3, 5, 5)}, ["y"], [weight("w0", (8, 3, 1, 1), 1), weight("w1", (16, 8, 1, 1), 2)])
    padding = pad_channels(graph)
    if padding is not None:
        assert_same_outputs(graph, padding.graph)
