"""Control-flow bodies nested many levels deep are optimized with the default backend.

`nested_if(depth)` nests `If` `depth` levels deep. Level k (the main graph is level 0)
computes `v{k} = Sigmoid(v{k-1})` and `go{k} = sel > k` and branches on it: the then
branch is level k+1, the else branch `Neg(v{k})`. The innermost body reads `x` (a main
graph input, `depth` scopes up), `v{depth-2}` (two scopes up) and `v{depth-1}`, and
ends in `Relu(Relu(.))`, which shipped rules rewrite to one kernel (`RELU_RULES`). `sel`
picks the level whose else branch answers (`sel >= depth`: the innermost body), so
running `sel = 0 .. depth` takes both branches of every `If`. The thresholds `t{k}` are
main-graph initializers, read from up to `depth` scopes below.

The end-to-end tests optimize with the default backend (ORT's kernels price the bodies)
and check that the report has no warnings (no body left unoptimized, no graph the kernel
model failed to price), that the rewrite happened in the innermost body and that the
optimized model is valid and computes the same as the original on ONNX Runtime. The last tests pin what prices a body: a region declares (and orders
after their producers) the values its nodes' bodies read, and a body priced before the
main graph gets the main graph's shapes.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as h
from onnx import numpy_helper as nh

import taso
from taso._onnx_import import import_model
from taso.backends._region import extract_region
from taso.backends.graph_cost import AnalyticalCostModel
from taso.backends.kernel_cost import KernelCostModel
from taso.ir import Graph, TensorType
from taso.pipeline._bodies import import_body
from tests.helpers.ort import run_on_ort

F = TensorProto.FLOAT
SYMBOLIC_ROW = ["batch", 4]
STATIC_ROW = [3, 4]
RELU_RULES = {"ax-relu_idempotent", "ax-relu_as_clip"}
"""relu(relu(x)) = relu(x), or relu(x) = clip(x, 0): ORT fuses Relu -> Clip into one kernel."""


def _innermost(depth: int) -> list[onnx.NodeProto]:
    two_up = f"v{max(depth - 2, 0)}"
    return [
        h.make_node("Add", ["x", two_up], ["s0"]),
        h.make_node("Add", ["s0", f"v{depth - 1}"], ["s1"]),
        h.make_node("Relu", ["s1"], ["r0"]),
        h.make_node("Relu", ["r0"], [f"out{depth}"]),
    ]


def _level(k: int, depth: int, innermost: list[onnx.NodeProto], row: list[int | str]) -> list[onnx.NodeProto]:
    """The nodes of level `k` (0: the main graph) down to the innermost body."""
    if k == depth:
        return innermost
    then_branch = h.make_graph(_level(k + 1, depth, innermost, row), f"then{k + 1}", [],
                               [h.make_tensor_value_info(f"out{k + 1}", F, row)])
    else_branch = h.make_graph([h.make_node("Neg", [f"v{k}"], [f"neg{k}"])], f"else{k + 1}", [],
                               [h.make_tensor_value_info(f"neg{k}", F, row)])
    return [
        h.make_node("Sigmoid", [f"v{k - 1}" if k else "x"], [f"v{k}"]),
        h.make_node("Greater", ["sel", f"t{k}"], [f"go{k}"]),
        h.make_node("If", [f"go{k}"], [f"out{k}"], then_branch=then_branch, else_branch=else_branch, name=f"if{k}"),
    ]


def nested_if(
    depth: int, *, row: list[int | str] = SYMBOLIC_ROW, innermost: list[onnx.NodeProto] | None = None,
    weights: list[onnx.TensorProto] | None = None,
) -> onnx.ModelProto:
    """`If` nested `depth` deep around `innermost` (by default `_innermost(depth)`); values
    are `row`-shaped; `weights` are more main-graph initializers."""
    nodes = _level(0, depth, innermost if innermost is not None else _innermost(depth), row)
    levels = [nh.from_array(np.array(k, dtype=np.int64), f"t{k}") for k in range(depth)] + (weights or [])
    graph = h.make_graph(
        nodes, "nested",
        [h.make_tensor_value_info("x", F, row), h.make_tensor_value_info("sel", TensorProto.INT64, [])],
        [h.make_tensor_value_info("out0", F, row)], levels,
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    return model


def innermost_body(model: onnx.ModelProto, depth: int) -> onnx.GraphProto:
    graph = model.graph
    for k in range(depth):
        if_node = next(n for n in graph.node if n.name == f"if{k}")
        graph = next(a.g for a in if_node.attribute if a.name == "then_branch")
    return graph


def assert_same_on_every_branch(model: onnx.ModelProto, optimized: onnx.ModelProto, depth: int) -> None:
    onnx.checker.check_model(optimized, full_check=True)
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    for sel in range(depth + 1):
        feeds = {"x": x, "sel": np.array(sel, dtype=np.int64)}
        for want, got in zip(run_on_ort(model, feeds), run_on_ort(optimized, feeds), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def optimize_default(model: onnx.ModelProto, budget_s: float) -> taso.OptimizeResult:
    """The default backend (ORT's kernels); the original is not preferred back (check=False)."""
    return taso.optimize_onnx(model, time_budget_s=budget_s, check=False)


def _notes(result: taso.OptimizeResult) -> tuple[str, ...]:
    """What went wrong: "subgraph left unoptimized: ..." or "the kernel cost model failed
    ... (KeyError: 'v0')" (the analytical model stood in, or a body went unpriced)."""
    return result.report.warnings


@pytest.fixture(autouse=True)
def _private_cost_cache(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TASO_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.ort
@pytest.mark.parametrize(("depth", "row"), [(1, STATIC_ROW), (2, STATIC_ROW), (3, SYMBOLIC_ROW)])
def test_if_nested_deep_is_optimized_with_the_default_backend(depth: int, row: list[int | str]) -> None:
    model = nested_if(depth, row=row)
    result = optimize_default(model, budget_s=2.0)
    assert _notes(result) == ()
    assert set(result.report.applied_rewrites) & RELU_RULES
    assert [n.op_type for n in innermost_body(result.model, depth).node].count("Relu") == 1
    assert_same_on_every_branch(model, result.model, depth)


@pytest.mark.ort
@pytest.mark.slow
def test_if_nested_thirty_deep_is_optimized_with_the_default_backend() -> None:
    depth = 30
    model = nested_if(depth)
    result = optimize_default(model, budget_s=5.0)
    assert _notes(result) == ()
    assert [n.op_type for n in innermost_body(result.model, depth).node].count("Relu") == 1
    assert_same_on_every_branch(model, result.model, depth)


def _loop_and_scan_innermost(depth: int) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    """A Loop and a Scan in the innermost body, each with relu(relu(.)) in its own body;
    the Loop body reads `v{depth-1}` (two scopes up from it), the Loop's trip count and
    the Scan's initial state are main-graph weights (`depth + 1` scopes up)."""
    loop_body = h.make_graph(
        [h.make_node("Identity", ["cond_in"], ["cond_out"]),
         h.make_node("Add", ["acc_in", f"v{depth - 1}"], ["l0"]),
         h.make_node("Relu", ["l0"], ["l1"]), h.make_node("Relu", ["l1"], ["acc_out"])],
        "loop_body",
        [h.make_tensor_value_info("i", TensorProto.INT64, []), h.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         h.make_tensor_value_info("acc_in", F, SYMBOLIC_ROW)],
        [h.make_tensor_value_info("cond_out", TensorProto.BOOL, []), h.make_tensor_value_info("acc_out", F, SYMBOLIC_ROW)],
    )
    scan_body = h.make_graph(
        [h.make_node("Relu", ["row"], ["q0"]), h.make_node("Relu", ["q0"], ["q1"]),
         h.make_node("Add", ["state_in", "q1"], ["state_out"])],
        "scan_body",
        [h.make_tensor_value_info("state_in", F, [1, 4]), h.make_tensor_value_info("row", F, [1, 4])],
        [h.make_tensor_value_info("state_out", F, [1, 4])],
    )
    nodes = [
        h.make_node("Add", ["x", f"v{max(depth - 2, 0)}"], ["s0"]),
        h.make_node("Loop", ["trip", "", "s0"], ["looped"], body=loop_body, name="loop"),
        h.make_node("Unsqueeze", ["looped", "axis1"], ["rows"]),
        h.make_node("Scan", ["init", "rows"], ["final"], body=scan_body, num_scan_inputs=1, name="scan"),
        h.make_node("Add", ["looped", "final"], [f"out{depth}"]),
    ]
    weights = [nh.from_array(np.array(2, dtype=np.int64), "trip"), nh.from_array(np.array([1], dtype=np.int64), "axis1"),
               nh.from_array(np.zeros((1, 4), dtype=np.float32), "init")]
    return nodes, weights


def _body(graph: onnx.GraphProto, node_name: str) -> onnx.GraphProto:
    node = next(n for n in graph.node if n.name == node_name)
    return next(a.g for a in node.attribute if a.name == "body")


@pytest.mark.ort
def test_loop_and_scan_inside_nested_ifs_are_optimized_with_the_default_backend() -> None:
    depth = 3
    innermost, weights = _loop_and_scan_innermost(depth)
    model = nested_if(depth, innermost=innermost, weights=weights)
    result = optimize_default(model, budget_s=3.0)
    assert _notes(result) == ()
    inner = innermost_body(result.model, depth)
    for name in ("loop", "scan"):
        assert [n.op_type for n in _body(inner, name).node].count("Relu") == 1, name
    assert_same_on_every_branch(model, result.model, depth)


# ----- what prices a body: regions and the kernel model's analytical fallback -------------


def _declared(_name: str, declared: TensorType | None) -> tuple[int | str, ...] | None:
    return None if declared is None else declared.shape


def _node_id(graph: Graph, name: str) -> int:
    return next(i for i, node in graph.nodes.items() if node.name == name)


def _if_reading(value: str, name: str = "if") -> onnx.NodeProto:
    then_branch = h.make_graph([h.make_node("Relu", [value], ["r"])], "then", [],
                               [h.make_tensor_value_info("r", F, STATIC_ROW)])
    else_branch = h.make_graph([h.make_node("Neg", [value], ["n"])], "else", [],
                               [h.make_tensor_value_info("n", F, STATIC_ROW)])
    return h.make_node("If", ["cond"], ["y"], then_branch=then_branch, else_branch=else_branch, name=name)


def _graph_of(nodes: list[onnx.NodeProto], outputs: list[str]) -> Graph:
    graph = h.make_graph(
        nodes, "g", [h.make_tensor_value_info("x", F, STATIC_ROW), h.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [h.make_tensor_value_info(name, F, STATIC_ROW) for name in outputs],
    )
    return import_model(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]))


@pytest.mark.ort
def test_a_region_declares_the_values_its_bodies_read() -> None:
    graph = _graph_of([_if_reading("x")], ["y"])
    region = extract_region(graph, graph.nodes, _declared)
    onnx.checker.check_model(region.model, full_check=True)
    assert sorted(v.name for v in region.model.graph.input) == ["cond", "x"]
    feeds = {"x": np.ones((3, 4), np.float32), "cond": np.array(True)}
    np.testing.assert_array_equal(run_on_ort(region.model, feeds)[0], feeds["x"])


def test_a_region_runs_a_body_after_the_node_whose_value_it_reads() -> None:
    # If before its captured value's producer in id order (a rewrite gives new nodes larger
    # ids), and a region under a quarter of the graph: the region orders its own nodes
    padding = [h.make_node("Relu", [f"p{k}" if k else "x"], [f"p{k + 1}"]) for k in range(8)]
    nodes = [_if_reading("v"), h.make_node("Sigmoid", ["x"], ["v"], name="sigmoid"), *padding]
    graph = _graph_of(nodes, ["y", "p8"])
    region = extract_region(graph, [_node_id(graph, "if"), _node_id(graph, "sigmoid")], _declared)
    onnx.checker.check_model(region.model, full_check=True)
    assert [n.op_type for n in region.model.graph.node] == ["Sigmoid", "If"]


@pytest.mark.parametrize("cost_model", [
    pytest.param(AnalyticalCostModel, id="analytical"),
    pytest.param(lambda: KernelCostModel(cache=None), id="kernel", marks=pytest.mark.ort),  # times kernels on ORT
])
def test_a_body_priced_first_gets_the_main_graphs_shapes(cost_model) -> None:
    # the search prices no main graph when its share of the budget is spent before it
    # starts: the first graph a cost model infers shapes from can be a body
    model = nested_if(2)
    main = import_model(model)
    level1 = import_body(innermost_body(model, 1), main)
    level2 = import_body(innermost_body(model, 2), level1)  # reads x and v0 (two scopes up)
    assert cost_model().cost(level2) > 0
    assert level2.context.main is main
