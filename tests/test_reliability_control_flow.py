"""Control flow: If / Loop / Scan bodies are optimized recursively, outer-scope reads kept.

Bodies get their own search (same rules, a share of the budget by node count); the
optimized model is compared with the original on ONNX Runtime for both branches of an
If, and for a Loop and a Scan whose bodies read outer-scope values. Real models inside
control flow: benchmark models (SqueezeNet, NasRNN) wrapped as If branches and as a Loop
body.
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
from taso.pipeline._bodies import body_node_count, captured_from, import_body
from tests.helpers.ort import run_on_ort
from tests.helpers.rules import FIXTURE_RULES, fuzz_rules

F = TensorProto.FLOAT


def _const(name: str, value: np.ndarray) -> onnx.NodeProto:
    return h.make_node("Constant", [], [name], value=nh.from_array(np.asarray(value, dtype=np.float32), name))


def _branch(prefix: str, relus: int) -> onnx.GraphProto:
    """Relu^n(x_outer) * c1 * c2 with constants local to the branch; reads outer `x` and `w`."""
    nodes = [h.make_node("Add", ["x", "w"], [f"{prefix}a"])]
    last = f"{prefix}a"
    for k in range(relus):
        nodes.append(h.make_node("Relu", [last], [f"{prefix}r{k}"]))
        last = f"{prefix}r{k}"
    nodes += [
        _const(f"{prefix}c1", np.full((1, 4), 1.5)), _const(f"{prefix}c2", np.full((1, 4), -0.5)),
        h.make_node("Mul", [last, f"{prefix}c1"], [f"{prefix}m1"]),
        h.make_node("Mul", [f"{prefix}m1", f"{prefix}c2"], [f"{prefix}out"]),
    ]
    return h.make_graph(nodes, prefix, [], [h.make_tensor_value_info(f"{prefix}out", F, ["batch", 4])])


def control_flow_model() -> onnx.ModelProto:
    """If (two branches), Loop and Scan whose bodies hold rewritable chains over outer values."""
    loop_body = h.make_graph(
        [h.make_node("Identity", ["cond_in"], ["cond_out"]),
         h.make_node("Add", ["acc_in", "w"], ["l0"]), h.make_node("Relu", ["l0"], ["l1"]),
         h.make_node("Relu", ["l1"], ["acc_out"])],
        "loop_body",
        [h.make_tensor_value_info("i", TensorProto.INT64, []), h.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         h.make_tensor_value_info("acc_in", F, ["batch", 4])],
        [h.make_tensor_value_info("cond_out", TensorProto.BOOL, []), h.make_tensor_value_info("acc_out", F, ["batch", 4])],
    )
    scan_body = h.make_graph(
        [h.make_node("Transpose", ["row"], ["s0"], perm=[1, 0]), h.make_node("Transpose", ["s0"], ["s1"], perm=[1, 0]),
         h.make_node("Add", ["state_in", "s1"], ["state_out"]), h.make_node("Relu", ["s1"], ["s2"]),
         h.make_node("Relu", ["s2"], ["scan_out"])],
        "scan_body",
        [h.make_tensor_value_info("state_in", F, [1, 4]), h.make_tensor_value_info("row", F, [1, 4])],
        [h.make_tensor_value_info("state_out", F, [1, 4]), h.make_tensor_value_info("scan_out", F, [1, 4])],
    )
    nodes = [
        h.make_node("Sigmoid", ["x"], ["w"]),
        h.make_node("If", ["cond"], ["branch"], then_branch=_branch("t_", 2), else_branch=_branch("e_", 3), name="if"),
        h.make_node("Loop", ["trip", "", "x"], ["looped"], body=loop_body, name="loop"),
        h.make_node("Unsqueeze", ["x", "axis1"], ["x3"]),
        h.make_node("Scan", ["init", "x3"], ["final", "scanned"], body=scan_body, num_scan_inputs=1, name="scan"),
    ]
    graph = h.make_graph(
        nodes, "control_flow",
        [h.make_tensor_value_info("x", F, ["batch", 4]), h.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [h.make_tensor_value_info(n, F, shape) for n, shape in
         (("branch", ["batch", 4]), ("looped", ["batch", 4]), ("final", [1, 4]), ("scanned", ["batch", 1, 4]))],
        [nh.from_array(np.array(3, dtype=np.int64), "trip"), nh.from_array(np.array([1], dtype=np.int64), "axis1"),
         nh.from_array(np.zeros((1, 4), dtype=np.float32), "init")],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    return model


def _assert_same(model: onnx.ModelProto, optimized: onnx.ModelProto, feeds_list: list[dict[str, np.ndarray]]) -> None:
    onnx.checker.check_model(optimized, full_check=True)
    for feeds in feeds_list:
        for want, got in zip(run_on_ort(model, feeds), run_on_ort(optimized, feeds), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _feeds(batch: int = 2) -> list[dict[str, np.ndarray]]:
    x = np.random.default_rng(0).standard_normal((batch, 4)).astype(np.float32)
    return [{"x": x, "cond": np.array(flag)} for flag in (True, False)]


def _ops(graph: onnx.GraphProto) -> list[str]:
    return [n.op_type for n in graph.node]


def test_a_body_imports_with_its_outer_scope_reads() -> None:
    model = control_flow_model()
    outer = import_model(model)
    then_branch = model.graph.node[1].attribute[1].g if model.graph.node[1].attribute[1].name == "then_branch" \
        else model.graph.node[1].attribute[0].g
    assert captured_from(then_branch) == ["x", "w"]
    body = import_body(then_branch, outer)
    assert body.inputs == () and body.outer_scope == frozenset({"x", "w"})
    assert body.types["x"].shape == ("batch", 4)
    assert body_node_count(outer) == 7 + 8 + 4 + 5


@pytest.mark.ort
def test_if_loop_scan_bodies_are_optimized_and_compute_the_same() -> None:
    model = control_flow_model()
    result = taso.optimize_onnx(model, backend="analytical", time_budget_s=2.0, check=False, rules=FIXTURE_RULES)
    optimized = result.model
    applied = result.report.applied_rewrites
    assert applied.get("relu_relu", 0) + applied.get("relu_relu_batch1", 0) >= 5  # 1 + 2 in If, 1 Loop, 1 Scan
    assert "mul_mul" in applied and "fuzz_transpose_transpose" in applied
    by_name = {n.name: n for n in optimized.graph.node}
    then_ops = _ops(next(a.g for a in by_name["if"].attribute if a.name == "then_branch"))
    assert then_ops.count("Relu") == 1 and then_ops.count("Mul") == 1
    assert _ops(next(a.g for a in by_name["loop"].attribute if a.name == "body")).count("Relu") == 1
    assert _ops(next(a.g for a in by_name["scan"].attribute if a.name == "body")).count("Transpose") == 1
    assert [v.name for v in optimized.graph.output] == [v.name for v in model.graph.output]
    _assert_same(model, optimized, _feeds(2) + _feeds(5))


@pytest.mark.ort
def test_bodies_are_checked_on_ort_by_optimize_itself(tmp_path) -> None:
    source = tmp_path / "cf.onnx"
    onnx.save_model(control_flow_model(), source)
    result = taso.optimize_onnx(source, tmp_path / "out.onnx", backend="analytical", time_budget_s=2.0,
                                rules=FIXTURE_RULES, shapes="batch=3")
    assert result.report.check is taso.CheckStatus.PASSED


@pytest.mark.ort
def test_no_budget_leaves_bodies_byte_identical() -> None:
    model = control_flow_model()
    result = taso.optimize_onnx(model, backend="analytical", time_budget_s=0, check=False, rules=FIXTURE_RULES)
    for before, after in zip(model.graph.node, result.model.graph.node, strict=True):
        assert before.SerializeToString(deterministic=True) == after.SerializeToString(deterministic=True)


# ----- real models inside control flow -----------------------------------------------------


def _prefixed(graph: onnx.GraphProto, prefix: str, keep: set[str]) -> onnx.GraphProto:
    """A copy of `graph` with every name except `keep` prefixed (sibling branches stay SSA)."""
    out = onnx.GraphProto()
    out.CopyFrom(graph)
    rename = lambda n: n if (not n or n in keep) else prefix + n  # noqa: E731
    for node in out.node:
        node.input[:] = [rename(n) for n in node.input]
        node.output[:] = [rename(n) for n in node.output]
        node.name = rename(node.name)
    for t in out.initializer:
        t.name = rename(t.name)
    for v in list(out.output) + list(out.value_info):
        v.name = rename(v.name)
    return out


def wrap_in_if(model: onnx.ModelProto) -> onnx.ModelProto:
    """`If(cond)`: the model's graph as both branches (weights local), reading the outer input."""
    inner = model.graph
    keep = {i.name for i in inner.input}
    branches = []
    for prefix in ("then_", "else_"):
        branch = _prefixed(inner, prefix, keep)
        del branch.input[:]
        branches.append(branch)
    outputs = [o.name for o in branches[0].output]
    if_node = h.make_node("If", ["cond"], [f"y{k}" for k in range(len(outputs))],
                          then_branch=branches[0], else_branch=branches[1], name="if")
    graph = h.make_graph(
        [if_node], "wrapped", [*inner.input, h.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [onnx.ValueInfoProto(name=f"y{k}", type=inner.output[k].type) for k in range(len(outputs))],
    )
    wrapped = h.make_model(graph, opset_imports=list(model.opset_import))
    wrapped.ir_version = model.ir_version
    onnx.checker.check_model(wrapped, full_check=True)
    return wrapped


@pytest.mark.ort
@pytest.mark.parametrize("name", ["squeezenet1_1", "nasrnn", "resnet50"])
def test_real_models_as_if_branches_optimize_and_check(name: str) -> None:
    from benchmarks.models import MODELS, Size

    original = MODELS[name].build(Size.SMALL)
    model = wrap_in_if(original)
    result = taso.optimize_onnx(model, backend="analytical", time_budget_s=3.0, check=False, rules=fuzz_rules())
    rng = np.random.default_rng(0)
    base = {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
            for i in original.graph.input}
    onnx.checker.check_model(result.model, full_check=True)
    for flag in (True, False):
        feeds = {**base, "cond": np.array(flag)}
        for want, got in zip(run_on_ort(model, feeds), run_on_ort(result.model, feeds), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
