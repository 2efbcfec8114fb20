"""Oracle test: every ONNX-mapped spec's NumPy semantics and shape inference against
onnxruntime on one-node models, over many shapes, attributes and dtypes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

from taso.opspecs import OpKind, all_specs, get_spec

F32, F16, I64 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.int64)
TOLERANCE = {F32: (1e-4, 1e-5), F16: (2e-2, 2e-2), I64: (0, 0)}


@dataclass(frozen=True)
class Case:
    op: str
    shapes: tuple[tuple[int, ...], ...]
    params: Mapping[str, object] = field(default_factory=dict)
    dtype: np.dtype = F32
    positive: bool = False  # inputs drawn from (0.5, 2): Sqrt, BN variance, divisors

    @property
    def id(self) -> str:
        params = ",".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.op}-{self.dtype}-{'x'.join(map(str, self.shapes))}-{params}"


def _binary() -> list[Case]:
    shapes = [((2, 3), (2, 3)), ((2, 3, 4), (4,)), ((1, 3, 2, 2), (3, 1, 1)),
              ((2, 1), (1, 3)), ((), (2,)), ((2, 3), ())]
    return [Case(op, s, dtype=dt, positive=op == "Div")
            for op in ("Add", "Sub", "Mul", "Div") for s in shapes for dt in (F32, F16, I64)]


def _unary() -> list[Case]:
    shapes = [(5,), (2, 3), (1, 3, 4, 4)]
    cases = [Case(op, (s,), dtype=dt, positive=op == "Sqrt")
             for op in ("Relu", "Sigmoid", "Tanh", "Erf", "Sqrt", "Identity", "HardSwish")
             for s in shapes for dt in (F32, F16)]
    cases += [Case("Identity", ((2, 3),), dtype=I64)]  # ORT has no int64 Relu kernel
    for bounds in ({"min": 0.0, "max": 6.0}, {"max": 1.0}, {"min": -1.0}, {}):
        cases += [Case("Clip", ((2, 3, 4),), bounds, dtype=dt) for dt in (F32, F16, I64)]
    for params in ({}, {"alpha": 1 / 6, "beta": 0.5}, {"alpha": 0.5, "beta": 0.1}):
        cases += [Case("HardSigmoid", (s,), params) for s in shapes]
    for params in ({}, {"alpha": 1.702}):
        cases += [Case("SiLU", (s,), params, dtype=dt) for s in shapes for dt in (F32, F16)]
    for params in ({}, {"approximate": "tanh"}):
        cases += [Case("Gelu", (s,), params) for s in shapes]
    return cases


def _conv() -> list[Case]:
    configs = [
        ((1, 3, 5, 5), (4, 3, 3, 3), {}),
        ((2, 3, 5, 5), (4, 3, 3, 3), {"pads": (1, 1, 1, 1)}),
        ((1, 2, 7, 6), (3, 2, 3, 2), {"strides": (2, 1), "pads": (1, 0, 2, 1)}),
        ((1, 4, 6, 6), (6, 2, 3, 3), {"group": 2, "pads": (1, 1, 1, 1)}),
        ((1, 4, 6, 6), (4, 1, 3, 3), {"group": 4, "pads": (1, 1, 1, 1), "strides": (2, 2)}),
        ((1, 2, 7, 7), (2, 2, 3, 3), {"dilations": (2, 2), "pads": (2, 2, 2, 2)}),
        ((1, 2, 7, 7), (3, 2, 3, 3), {"auto_pad": "SAME_UPPER", "strides": (2, 2)}),
        ((1, 2, 6, 6), (3, 2, 2, 2), {"auto_pad": "SAME_LOWER"}),
        ((1, 2, 6, 6), (3, 2, 3, 3), {"auto_pad": "VALID"}),
        ((2, 3, 4, 4), (5, 3, 1, 1), {}),
    ]
    cases = [Case("Conv", (x, w), p) for x, w, p in configs]
    cases += [Case("Conv", (x, w, (w[0],)), p) for x, w, p in configs[:6]]
    cases += [Case("Conv", (x, w), p, dtype=F16) for x, w, p in configs[:4]]
    return cases


def _linear() -> list[Case]:
    mm = [((2, 3), (3, 4)), ((2, 2, 3), (3, 4)), ((2, 1, 2, 3), (3, 3, 2)), ((3,), (3, 2)),
          ((2, 3), (3,)), ((1, 4), (2, 4, 1))]
    cases = [Case("MatMul", s, dtype=dt) for s in mm for dt in (F32, F16, I64)]
    gemm = [((2, 3), (3, 4), None, {}), ((3, 2), (3, 4), (4,), {"transA": 1}),
            ((2, 3), (4, 3), (2, 4), {"transB": 1, "alpha": 0.5, "beta": 2.0}),
            ((3, 2), (4, 3), (1, 1), {"transA": 1, "transB": 1}), ((2, 3), (3, 4), (2, 1), {})]
    for a, b, c, p in gemm:
        cases.append(Case("Gemm", (a, b) if c is None else (a, b, c), p))
    return cases


def _layout() -> list[Case]:
    cases = [Case("Concat", s, {"axis": ax}, dtype=dt) for s, ax in [
        (((2, 3), (1, 3)), 0), (((2, 3), (2, 2), (2, 1)), 1), (((1, 2, 2), (1, 2, 3)), -1),
        (((1, 1, 2, 2), (1, 3, 2, 2)), 1)] for dt in (F32, I64)]
    cases += [Case("Split", (s,), p, dtype=dt) for s, p in [
        ((4, 3), {"axis": 0, "split": (1, 3)}), ((2, 6), {"axis": 1, "split": (2, 2, 2)}),
        ((1, 4, 2, 2), {"axis": -3, "split": (3, 1)})] for dt in (F32, I64)]
    cases += [Case("Transpose", (s,), p, dtype=dt) for s, p in [
        ((2, 3), {}), ((2, 3, 4), {"perm": (1, 2, 0)}), ((1, 2, 3, 4), {"perm": (0, 2, 3, 1)}),
        ((2, 3, 4), {})] for dt in (F32, I64)]
    cases += [Case("Reshape", (s,), p) for s, p in [
        ((2, 3, 4), {"shape": (6, 4)}), ((2, 3, 4), {"shape": (0, -1)}),
        ((2, 3, 4), {"shape": (-1,)}), ((1, 4, 1, 1), {"shape": (1, 4)}),
        ((2, 0, 3), {"shape": (0, 3, 0), "allowzero": 1})]]
    cases += [Case("Flatten", ((2, 3, 4),), {"axis": a}) for a in (0, 1, 2, 3, -1)]
    cases += [Case("Squeeze", (s,), p) for s, p in [
        ((1, 3, 1, 2), {}), ((1, 3, 1, 2), {"axes": (0,)}), ((1, 3, 1, 2), {"axes": (-2, 0)})]]
    cases += [Case("Unsqueeze", (s,), p) for s, p in [
        ((3, 2), {"axes": (0,)}), ((3, 2), {"axes": (1, 3)}), ((3,), {"axes": (-1,)})]]
    cases += [Case("Pad", (s,), p, dtype=dt) for s, p in [
        ((2, 3), {"pads": (1, 0, 2, 1)}), ((1, 2, 3, 3), {"pads": (0, 0, 1, 1, 0, 0, 1, 1)}),
        ((2, 3), {"pads": (1, 1, 1, 1), "value": 2.5}), ((3, 4), {"pads": (1, 2, 1, 0), "mode": "edge"}),
        ((3, 4), {"pads": (2, 1, 1, 2), "mode": "reflect"})] for dt in (F32, I64)]
    return cases


def _pool_and_norm() -> list[Case]:
    pools = [
        ((1, 2, 5, 5), {"kernel_shape": (3, 3)}),
        ((1, 2, 6, 6), {"kernel_shape": (2, 2), "strides": (2, 2)}),
        ((2, 3, 5, 5), {"kernel_shape": (3, 3), "pads": (1, 1, 1, 1)}),
        ((1, 1, 7, 6), {"kernel_shape": (3, 2), "strides": (2, 1), "pads": (1, 0, 1, 1)}),
        ((1, 2, 7, 7), {"kernel_shape": (3, 3), "strides": (2, 2), "auto_pad": "SAME_UPPER"}),
    ]
    cases = [Case("AveragePool", (s,), p) for s, p in pools]
    cases += [Case("AveragePool", (s,), {**p, "count_include_pad": 1}) for s, p in pools[2:4]]
    cases += [Case("MaxPool", (s,), p) for s, p in pools]
    cases += [Case("MaxPool", ((1, 2, 7, 7),), {"kernel_shape": (2, 2), "dilations": (2, 2),
                                               "pads": (1, 1, 1, 1)})]
    cases += [Case("MaxPool", (s,), p, dtype=F16) for s, p in pools[:2]]
    cases += [Case("GlobalAveragePool", (s,)) for s in ((1, 3, 4, 4), (2, 2, 3, 5), (1, 2, 5))]
    cases += [Case("Softmax", (s,), p) for s, p in [
        ((2, 3, 4), {"axis": 1}), ((2, 5), {}), ((1, 16, 4, 3), {"axis": 1})]]
    cases += [Case("ReduceMean", (s,), p) for s, p in [
        ((1, 3, 4, 4), {"axes": (2, 3)}), ((2, 3, 5), {"axes": (-1,), "keepdims": 0}),
        ((2, 3, 4), {"axes": (0, 2)}), ((2, 3), {})]]
    nearest = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    cases += [Case("Resize", (s,), {**nearest, "scales": k}) for s, k in [
        ((1, 3, 1, 1), (1.0, 1.0, 4.0, 5.0)), ((2, 2, 3, 2), (1.0, 1.0, 2.0, 3.0)), ((1, 2, 4), (1.0, 2.0, 1.0))]]
    for x in ((1, 3, 4, 4), (2, 3), (2, 3, 5)):
        c = (x[1],)
        cases += [Case("BatchNormalization", (x, c, c, c, c), p, positive=True)
                  for p in ({}, {"epsilon": 1e-3})]
    return cases


CASES = _binary() + _unary() + _conv() + _linear() + _layout() + _pool_and_norm()


def _inputs(case: Case, rng: np.random.Generator) -> list[np.ndarray]:
    arrays = []
    for shape in case.shapes:
        if case.dtype == I64:
            low = 1 if case.positive else -5
            arrays.append(rng.integers(low, 6, size=shape, dtype=np.int64))
        else:
            low = 0.5 if case.positive else -2.0
            arrays.append(rng.uniform(low, 2.0, size=shape).astype(case.dtype))
    return arrays


def one_node_model(
    case: Case, arrays: Sequence[np.ndarray], out_ranks: Sequence[int]
) -> onnx.ModelProto:
    """A model with one node; constant-input parameters become initializers; output dims
    are left unknown (only the rank is declared) so ORT's actual shapes can be compared."""
    spec = get_spec(_onnx_op(case))
    assert spec is not None
    node_form = spec.params_to_onnx(case.params, dtype=case.dtype)
    names = [f"in{i}" for i in range(len(arrays))]
    slots = max([len(names) - 1, *node_form.const_inputs]) + 1
    inputs = [names[i] if i < len(names) else "" for i in range(slots)]
    inits = []
    for index, value in node_form.const_inputs.items():
        inputs[index] = f"const{index}"
        inits.append(numpy_helper.from_array(value, f"const{index}"))
    outputs = [f"out{i}" for i in range(len(out_ranks))]
    node = helper.make_node(node_form.op_type, inputs, outputs, **node_form.attrs)
    elem = helper.np_dtype_to_tensor_dtype(case.dtype)
    graph = helper.make_graph(
        [node], "oracle",
        [helper.make_tensor_value_info(n, elem, a.shape) for n, a in zip(names, arrays, strict=True)],
        [helper.make_tensor_value_info(n, elem, [None] * r)
         for n, r in zip(outputs, out_ranks, strict=True)], inits)
    opset = max(17, spec.min_opset)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def _onnx_op(case: Case) -> str:
    spec = next(s for s in all_specs() if s.name == case.op)
    return spec.onnx_ops[0]


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


@pytest.mark.ort
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_numpy_semantics_match_onnxruntime(case: Case) -> None:
    spec = next(s for s in all_specs() if s.name == case.op)
    arrays = _inputs(case, np.random.default_rng(0))
    expected_shapes = spec.infer_shapes([a.shape for a in arrays], case.params)
    model = one_node_model(case, arrays, [len(s) for s in expected_shapes])
    onnx.checker.check_model(model)
    try:
        session = _session(model)
    except Exception as err:  # noqa: BLE001 - ORT raises its own exception types
        if "NOT_IMPLEMENTED" in str(err) or "Could not find an implementation" in str(err):
            pytest.skip(f"onnxruntime has no {case.dtype} kernel for {case.op}")
        raise
    got = session.run(None, {f"in{i}": a for i, a in enumerate(arrays)})
    ours = spec.evaluate(arrays, case.params)
    rtol, atol = TOLERANCE[case.dtype]
    assert len(got) == len(ours) == len(expected_shapes)
    for g, o, shape in zip(got, ours, expected_shapes, strict=True):
        assert g.shape == tuple(shape), "shape inference disagrees with onnxruntime"
        assert o.dtype == g.dtype
        np.testing.assert_allclose(o.astype(np.float64), g.astype(np.float64),
                                   rtol=rtol, atol=atol)


def test_every_onnx_spec_has_oracle_cases() -> None:
    covered = {c.op for c in CASES}
    onnx_specs = {s.name for s in all_specs() if s.kind is OpKind.ONNX}
    assert onnx_specs <= covered, onnx_specs - covered
