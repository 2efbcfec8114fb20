"""Transposes at their lowest rank (`taso.pipeline._lower_transposes`): the lemma holds and
wrong ones are refuted; the attention and shuffle Transposes are lowered and move every
element where it was, on ORT; the layout Transposes ORT fuses are left alone."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import pytest
from onnx import helper as h

from taso.backends import AnalyticalCostModel
from taso.ir import Graph
from taso.opspecs.axioms.lowering import LEMMAS, Lowering, lowering
from taso.opspecs.axioms.validate import validate_axiom
from taso.pipeline._lower_transposes import (
    LOWER_TRANSPOSES,
    MIN_RANK,
    lower_transposes,
    lowerable,
    lowered_rewrites,
)
from taso.pipeline._rewriting import Sweeping, default_rules, run_search
from taso.pipeline.budget import Budget
from taso.search.sweep import Judgement
from tests.helpers.graphs import make_graph
from tests.helpers.ort import assert_same_outputs

(_LEMMA,) = LEMMAS


def test_the_lemma_is_proved_and_agrees_numerically() -> None:
    assert validate_axiom(_LEMMA, draws=1).ok


def test_a_wrong_lowering_is_refuted() -> None:
    """Merging two axes that do not stay adjacent (ViT's heads: 3 and h stay, N moves
    between them and d) would move elements elsewhere: validation must say so."""
    def merged_too_much(s, p):  # noqa: ANN001, ANN202
        shape, perm = tuple(s["x"]), tuple(p["perm"])
        return {"m": (shape[1], shape[2] * shape[3] * shape[4]), "q": (1, 0), "out": tuple(shape[a] for a in perm)}

    wrong = dataclasses.replace(_LEMMA, name="transpose_lowered_wrong", derive=merged_too_much)
    assert not validate_axiom(wrong, draws=0).ok


@pytest.mark.parametrize("shape, perm, low", [
    ((1, 784, 3, 4, 12), (2, 0, 3, 4, 1), Lowering((784, 144), (1, 0))),  # EdgeNeXt's q, k, v
    ((1, 197, 3, 3, 64), (2, 0, 3, 1, 4), Lowering((197, 9, 64), (1, 0, 2))),  # DeiT's heads
    ((1, 2, 24, 28, 28), (0, 2, 1, 3, 4), Lowering((2, 24, 784), (1, 0, 2))),  # ShuffleNet
    ((1, 96, 56, 56), (0, 2, 3, 1), Lowering((96, 3136), (1, 0))),  # NCHW -> NHWC
    ((2, 1, 3), (1, 0, 2), Lowering((6,), (0,))),  # only a size-1 axis moves
])
def test_runs_that_stay_adjacent_are_merged(shape, perm, low) -> None:  # noqa: ANN001
    assert lowering(shape, perm) == low


@pytest.mark.parametrize("shape, perm", [
    ((1, 96, 56, 56), (0, 2, 3, 1)),  # NCHW -> NHWC: ORT folds it into its reorder
    ((1, 56, 56, 96), (0, 3, 1, 2)),
    ((1, 4, 784, 12), (0, 1, 3, 2)),  # nothing merges
    ((2, 3, 4, 5), (3, 2, 1, 0)),
])
def test_what_is_not_lowered(shape, perm) -> None:  # noqa: ANN001
    assert lowerable(shape, perm) is None


def _attention_split(perm: tuple[int, ...] = (2, 0, 3, 4, 1)):  # noqa: ANN202
    """(1, 6, 12) -> (1, 6, 3, 2, 2) -> Transpose `perm` -> Split into three, and an NCHW ->
    NHWC Transpose beside it."""
    nodes = [h.make_node("Reshape", ["x", "s"], ["r"]),
             h.make_node("Transpose", ["r"], ["t"], perm=list(perm)),
             h.make_node("Split", ["t", "sizes"], ["q", "k", "v"], axis=0),
             h.make_node("Transpose", ["c"], ["n"], perm=[0, 2, 3, 1])]
    inits = [onnx.numpy_helper.from_array(np.array([1, 6, 3, 2, 2], np.int64), "s"),
             onnx.numpy_helper.from_array(np.array([1, 1, 1], np.int64), "sizes")]
    return make_graph(nodes, {"x": (1, 6, 12), "c": (1, 4, 3, 5)}, ["q", "k", "v", "n"], inits)


@pytest.mark.parametrize("perm", [(2, 0, 3, 4, 1), (2, 0, 3, 1, 4)])
def test_an_attention_transpose_is_lowered_and_moves_every_element_where_it_was(perm) -> None:  # noqa: ANN001
    graph = _attention_split(perm)
    lowered = lower_transposes(graph)
    assert lowered is not None
    transposes = [n for n in lowered.nodes.values() if n.op_type == "Transpose"]
    assert len(transposes) == 2  # the lowered one, and the NHWC one untouched
    lowered_perm = next(n.attr("perm") for n in transposes if n.outputs != ("n",))
    assert lowered_perm == lowering((1, 6, 3, 2, 2), perm).perm and len(lowered_perm) < MIN_RANK
    assert lowered.types["t"] == graph.types["t"]
    assert_same_outputs(graph, lowered, rtol=0.0)


def test_the_lowering_is_one_whole_graph_rewrite_of_the_sweeps() -> None:
    graph = _attention_split()
    (rewrite,) = lowered_rewrites(graph, None)
    assert rewrite.rule_id == LOWER_TRANSPOSES
    assert list(lowered_rewrites(graph, frozenset(graph.nodes))) == []
    only_layout = make_graph([h.make_node("Transpose", ["c"], ["n"], perm=[0, 2, 3, 1])], {"c": (1, 4, 3, 5)}, ["n"])
    assert lower_transposes(only_layout) is None


def _faster_when_lowered(current: Graph, candidate: Graph, deadline: float, *, look: int = 0) -> Judgement:
    def rank(graph: Graph) -> int:
        return min(len(n.attr("perm") or ()) for n in graph.nodes.values() if n.op_type == "Transpose")

    change = rank(current) - rank(candidate)
    return Judgement(1.2 if change > 0 else 1 / 1.2 if change < 0 else 1.0, change > 0)


def test_the_sweeps_offer_the_lowering_and_keep_it_when_judged_faster() -> None:
    rules = [rule for rule in default_rules() if rule.id == "ax-relu_idempotent"]
    outcome = run_search(_attention_split(), rules=rules, cost_model=AnalyticalCostModel(), alpha=1.0,
                         budget=Budget.of(5), sweeping=Sweeping(_faster_when_lowered, AnalyticalCostModel()))
    assert [step.rule_id for step in outcome.sweeps if step.accepted] == [LOWER_TRANSPOSES]
    assert outcome.applied == {LOWER_TRANSPOSES: 1}


def test_a_transpose_that_only_matmuls_read_is_left_to_ort() -> None:
    """Keys transposed for ``q @ k^T`` with a batch of 2: ORT folds that Transpose into its
    MatMul, which a Reshape in between would stop."""
    nodes = [h.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             h.make_node("MatMul", ["q", "kt"], ["a"])]
    graph = make_graph(nodes, {"q": (2, 3, 5, 4), "k": (2, 3, 5, 4)}, ["a"])
    assert lowerable((2, 3, 5, 4), (0, 1, 3, 2)) is not None and lower_transposes(graph) is None
    also_read = make_graph([*nodes, h.make_node("Relu", ["kt"], ["r"])], {"q": (2, 3, 5, 4), "k": (2, 3, 5, 4)},
                           ["a", "r"])
    assert lower_transposes(also_read) is not None


def test_a_perm_that_is_not_a_plain_list_is_left_alone() -> None:
    """Inside a function body a Transpose's perm can refer to the caller's attribute: no
    permutation is known, nothing is lowered (and nothing crashes)."""
    graph = _attention_split()
    node_id, node = next((i, n) for i, n in graph.nodes.items() if n.op_type == "Transpose" and n.outputs == ("t",))
    reference = onnx.AttributeProto(name="perm", ref_attr_name="perm", type=onnx.AttributeProto.INTS)
    referring = dataclasses.replace(node, attributes=(("perm", reference),))
    nodes = {**graph.nodes, node_id: referring}
    assert lower_transposes(dataclasses.replace(graph, nodes=nodes)) is None
