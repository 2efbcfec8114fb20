"""Spec records: registry, ONNX attribute round trips, symbolic shape inference, validity
reasons, Z3 terms, costs, and decompositions/lowerings (checked on onnxruntime)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import z3
from onnx import helper, numpy_helper

from taso.opspecs import (
    TENSOR,
    Lowering,
    OpKind,
    ParamSource,
    ShapeError,
    all_specs,
    get_spec,
    spec_by_name,
)

SPECS = all_specs()

ROUND_TRIP = {
    "Conv": {"strides": (2, 1), "pads": (1, 0, 1, 0), "group": 2, "dilations": (1, 2)},
    "Clip": {"min": 0.0, "max": 6.0},
    "Reshape": {"shape": (0, -1)},
    "Split": {"axis": 1, "split": (2, 3)},
    "Pad": {"pads": (0, 1, 0, 1), "mode": "edge"},
    "Transpose": {"perm": (0, 2, 1)},
    "Gemm": {"alpha": 0.5, "transB": 1},
    "Gelu": {"approximate": "tanh"},
    "Squeeze": {"axes": (0, 2)},
    "AveragePool": {"kernel_shape": (3, 3), "count_include_pad": 1},
}


def test_registry() -> None:
    assert len(SPECS) >= 37
    assert get_spec("Conv") is spec_by_name("Conv")
    assert get_spec("Conv", "ai.onnx") is spec_by_name("Conv")
    assert get_spec("Swish") is spec_by_name("SiLU")
    assert get_spec("NonMaxSuppression") is None
    assert get_spec("Conv", "com.microsoft") is None
    assert all(get_spec(op) is s for s in SPECS for op in s.onnx_ops)


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_spec_is_complete(spec) -> None:  # noqa: ANN001
    assert spec.math and "\n" not in spec.math
    assert (spec.kind is OpKind.ONNX) == bool(spec.onnx_ops)
    if spec.kind is OpKind.INTERNAL:
        assert spec.lowering in (Lowering.FOLD, Lowering.DECOMPOSE)
        assert spec.lowering is Lowering.FOLD or spec.decomposition is not None
        with pytest.raises(ShapeError):
            spec.params_to_onnx({})
    for param in spec.params:
        assert param.source is not ParamSource.CONST_INPUT or param.input_index


@pytest.mark.parametrize("name", sorted(ROUND_TRIP))
def test_onnx_attribute_round_trip(name: str) -> None:
    spec = spec_by_name(name)
    node = spec.params_to_onnx(ROUND_TRIP[name])
    consts = [None] * 4
    for index, value in node.const_inputs.items():
        consts[index] = value
    assert spec.params_from_onnx(node.attrs, consts) == spec.complete(ROUND_TRIP[name])


def test_params_from_onnx_uses_onnx_defaults() -> None:
    params = spec_by_name("Conv").params_from_onnx({})
    assert params["strides"] == (1, 1) and params["pads"] == (0, 0, 0, 0) and params["group"] == 1
    assert spec_by_name("HardSigmoid").params_from_onnx({})["alpha"] == 0.2
    assert spec_by_name("Clip").params_from_onnx({}, [None, np.float32(0.0)]) == {
        "min": 0.0, "max": None}


@pytest.mark.parametrize("op, shapes, params, expected", [
    ("Conv", [("N", 3, "H", "W"), (8, 3, 3, 3)], {"pads": (1, 1, 1, 1)}, ("N", 8, "H", "W")),
    ("Conv", [("N", 3, "H", 7), (8, 3, 3, 3)], {"strides": (2, 2)}, ("N", 8, "((H-3)//2+1)", 3)),
    ("Add", [("N", 3, 1), (3, "W")], {}, ("N", 3, "W")),
    ("MatMul", [("B", "S", 4), (4, 6)], {}, ("B", "S", 6)),
    ("Concat", [("N", 2), ("N", "K")], {"axis": 1}, ("N", "(2+K)")),
    ("Transpose", [("N", "C", 5)], {"perm": (2, 0, 1)}, (5, "N", "C")),
    ("Flatten", [("N", 3, 4)], {"axis": 1}, ("N", 12)),
    ("Reshape", [("N", 3, 4)], {"shape": (0, 12)}, ("N", 12)),
    ("GlobalAveragePool", [("N", 3, "H", "W")], {}, ("N", 3, 1, 1)),
    ("MaxPool", [("N", 3, "H", "W")], {"kernel_shape": (3, 3), "pads": (1, 1, 1, 1)},
     ("N", 3, "H", "W")),
    ("Unsqueeze", [("N", 3)], {"axes": (0,)}, (1, "N", 3)),
])
def test_symbolic_shape_inference(op: str, shapes, params, expected) -> None:  # noqa: ANN001
    assert spec_by_name(op).infer_shapes(shapes, params) == (expected,)


@pytest.mark.parametrize("op, shapes, params, reason", [
    ("Conv", [(1, 4, 5, 5), (6, 3, 3, 3)], {}, "channels"),
    ("Conv", [(1, 4, 5, 5), (6, 1, 3, 3)], {"group": 4}, "divisible"),
    ("MatMul", [(2, 3), (4, 5)], {}, "inner"),
    ("Split", [(4, 3)], {"split": (1, 2)}, "sum"),
    ("Transpose", [(2, 3)], {"perm": (0, 0)}, "permutation"),
    ("Reshape", [(2, 3)], {"shape": (4, 2)}, "size"),
    ("Enlarge", [(2, 2, 3, 3)], {"kernel_shape": (4, 4)}, "centre"),
    ("Add", [(2, 3), (4,)], {}, "broadcast"),
    ("Conv", [(1, 1, 2, 2), (1, 1, 3, 3)], {}, "window"),
    ("BatchNormalization", [(1, 3, 2, 2), (2,), (3,), (3,), (3,)], {}, "statistic"),
])
def test_validity_reasons(op: str, shapes, params, reason: str) -> None:  # noqa: ANN001
    result = spec_by_name(op).check(shapes, params)
    assert not result.ok and reason in result.reason


def test_z3_term_uses_params_and_outputs() -> None:
    x, w = z3.Const("x", TENSOR), z3.Const("w", TENSOR)
    conv = spec_by_name("Conv")
    a = conv.z3_term([x, w], {"strides": (2, 2)})[0]
    b = conv.z3_term([x, w], {"strides": (1, 1)})[0]
    solver = z3.Solver()
    solver.add(a != b)
    assert solver.check() == z3.sat  # different params: different terms
    stride = z3.String("stride")
    assert conv.z3_term([x, w], {"strides": stride})[0].sort() == TENSOR  # symbolic params
    outs = spec_by_name("Split").z3_term([x], {"axis": 0, "split": (1, 2)})
    assert len(outs) == 2 and not outs[0].eq(outs[1])
    concat = spec_by_name("Concat")
    assert concat.z3_term([x, w, x], {"axis": 0})[0].decl().arity() == 4


def test_cost_hints() -> None:
    cost = spec_by_name("Conv").cost([(1, 3, 8, 8), (16, 3, 3, 3)], {"pads": (1, 1, 1, 1)})
    assert cost.flops == 2 * 16 * 8 * 8 * 3 * 9
    assert cost.bytes == 4 * (3 * 64 + 16 * 27 + 16 * 64)
    assert spec_by_name("MatMul").cost([(2, 3), (3, 4)], {}).flops == 2 * 2 * 3 * 4


def test_evaluate_keeps_dtype_and_folds_constants() -> None:
    x = np.ones((1, 2, 3, 3), dtype=np.float16)
    w = np.ones((2, 2, 1, 1), dtype=np.float16)
    assert spec_by_name("Conv").evaluate([x, w], {})[0].dtype == np.float16
    pool = spec_by_name("ConstPoolKernel").evaluate([], {"channels": 2, "kernel_shape": (3, 3)})
    assert pool[0].shape == (2, 1, 3, 3) and pool[0].dtype == np.float32
    big = spec_by_name("Enlarge").evaluate([np.ones((1, 1, 1, 1), np.float32)],
                                           {"kernel_shape": (3, 3)})[0]
    assert big.sum() == 1 and big[0, 0, 1, 1] == 1


def _run_decomposition(spec_name: str, params: dict, arrays: list[np.ndarray], opset: int):  # noqa: ANN202
    spec = spec_by_name(spec_name)
    assert spec.decomposition is not None
    nodes, inits = [], []
    for i, emit in enumerate(spec.decomposition(spec.complete(params))):
        names = []
        for j, ref in enumerate(emit.inputs):
            if isinstance(ref, int) and ref < len(arrays):
                names.append(f"in{ref}")
            elif isinstance(ref, float):
                inits.append(numpy_helper.from_array(np.asarray(ref, np.float32), f"c{i}_{j}"))
                names.append(f"c{i}_{j}")
            elif isinstance(ref, str):
                names.append(ref)
        nodes.append(helper.make_node(emit.op_type, names, [emit.output], **emit.attrs))
    f32 = onnx.TensorProto.FLOAT
    graph = helper.make_graph(
        nodes, "decomposed",
        [helper.make_tensor_value_info(f"in{i}", f32, a.shape) for i, a in enumerate(arrays)],
        [helper.make_tensor_value_info("out", f32, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    got = session.run(None, {f"in{i}": a for i, a in enumerate(arrays)})[0]
    np.testing.assert_allclose(got, spec.evaluate(arrays, params)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.ort
def test_decompositions_match_semantics_on_onnxruntime() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    b = rng.standard_normal((3,)).astype(np.float32)
    _run_decomposition("SiLU", {}, [x], 17)
    _run_decomposition("SiLU", {"alpha": 1.702}, [x], 17)
    _run_decomposition("Conv", {"activation": "relu", "pads": (1, 1, 1, 1)}, [x, w, b], 17)
    _run_decomposition("ScalarMul", {}, [x, np.asarray(2.5, np.float32)], 17)


def test_needs_decomposition() -> None:
    conv, silu = spec_by_name("Conv"), spec_by_name("SiLU")
    assert not conv.needs_decomposition({}, opset=17)
    assert conv.needs_decomposition({"activation": "relu"}, opset=17)
    assert silu.needs_decomposition({}, opset=17) and not silu.needs_decomposition({}, opset=24)
    assert spec_by_name("ScalarMul").needs_decomposition({}, opset=17)
    assert not spec_by_name("Enlarge").needs_decomposition({}, opset=17)
