"""Deciding on a search's result with scripted decisions (`check_and_choose` with a `Duel`
whose verdict depends on the graph it measures; the check runs on ORT for real), and a
searched model whose canonical stage simplified something, shared by the fallback and
output-check tests."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
import onnx
import pytest
from onnx import helper as h
from onnx import numpy_helper as nh

from taso._model_io import load_model
from taso._onnx_import import import_model
from taso.backends import AnalyticalCostModel
from taso.backends.compare import run_reference
from taso.ir import INTERNAL_DOMAIN, Graph
from taso.pipeline import _choose
from taso.pipeline._canonical import canonicalize
from taso.pipeline._choose import Phases, check_and_choose
from taso.pipeline._decide import Duel, Verdict
from taso.pipeline._export import export
from taso.pipeline._rewriting import SearchOutcome, Sweeping, default_rules, run_search
from taso.pipeline.api import _with_simplifications
from taso.pipeline.budget import Budget
from taso.search.sweep import Judgement
from tests.helpers.models import scaled_chain_model


def nodes_run(graph: Graph) -> int:
    """What the stand-in device runs: every node but the weight transforms export folds."""
    return sum(1 for node in graph.nodes.values() if node.domain != INTERNAL_DOMAIN)


def scripted(faster: Callable[[Graph], bool]) -> type[Duel]:
    class Scripted(Duel):
        def __init__(self, original_graph: Graph, optimized_graph: Graph, *args: object, **kwargs: object) -> None:
            super().__init__(original_graph, optimized_graph, *args, **kwargs)  # type: ignore[arg-type]
            self.graph = optimized_graph

        def verdict(self, deadline: float = math.inf) -> Verdict:
            yes = faster(self.graph)
            return Verdict(yes, 10.0, 8.0 if yes else 10.0, 8.0, 0.01, (1.25, 1.25) if yes else (1.0,))

    return Scripted


def chain_with_a_no_op() -> onnx.ModelProto:
    """`scaled_chain_model` at batch 1, with a `+ 0` before its Relus (a simplification of the canonical stage)."""
    model = scaled_chain_model()
    graph = model.graph
    graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1
    graph.output[0].type.tensor_type.shape.dim[0].dim_value = 1
    graph.node[3].input[0] = "m2_plus_0"
    graph.node.insert(3, h.make_node("Add", ["m2", "zero"], ["m2_plus_0"]))
    graph.initializer.append(nh.from_array(np.zeros((1,), np.float32), "zero"))
    onnx.checker.check_model(model, full_check=True)
    return model


def search_with_a_no_op() -> tuple[onnx.ModelProto, Graph, SearchOutcome]:
    """`chain_with_a_no_op`, canonicalized and searched (every sweep with fewer nodes kept),
    with the canonical graph left to fall back on."""
    model = chain_with_a_no_op()
    graph = import_model(model)
    canonical = canonicalize(graph)
    outcome = run_search(canonical.graph, rules=default_rules(), cost_model=AnalyticalCostModel(), alpha=1.0,
                         budget=Budget.of(30), sweeping=Sweeping(FewerNodesRun(), AnalyticalCostModel()))
    return model, graph, _with_simplifications(outcome, canonical)


@dataclasses.dataclass
class FewerNodesRun:
    def __call__(self, current: Graph, candidate: Graph, deadline: float, *, look: int = 0) -> Judgement:
        speedup = nodes_run(current) / nodes_run(candidate)
        return Judgement(speedup, speedup > 1.01)


def choose_on(searched: tuple[onnx.ModelProto, Graph, SearchOutcome], monkeypatch: pytest.MonkeyPatch,
              faster: Callable[[Graph], bool], *, differs: Graph | None = None,
              deadline: float = math.inf) -> _choose.OptimizeResult:
    """check_and_choose, its decisions scripted by `faster`; `differs` computes something else."""
    base = scripted(faster)

    class Scripted(base):  # type: ignore[valid-type, misc]
        def optimized_outputs(self) -> dict[str, np.ndarray]:
            outputs = super().optimized_outputs()
            return {name: value + 1.0 for name, value in outputs.items()} if self.graph is differs else outputs

    monkeypatch.setattr(_choose, "Duel", Scripted)
    model, graph, outcome = searched
    loaded = load_model(model)
    return check_and_choose(loaded, graph, export(graph), export(outcome.graph), outcome, run_reference(loaded.model),
                            check=True, profile=None, phases=Phases(), say=lambda _: None, notes=[],
                            measured_costs=False, deadline=deadline)
