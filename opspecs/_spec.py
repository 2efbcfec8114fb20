"""The ``OpSpec`` record: everything taso knows about one operator, in one object.

Each operator module builds one frozen ``OpSpec`` from plain functions
(shape inference, validity check, NumPy semantics, cost) and declarative data
(ONNX mapping, parameter schema, enumeration hints).  The methods here are the
uniform interface the IR, the rule generator and the exporter use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import z3

from taso.opspecs._types import (
    CheckResult,
    Cost,
    EnumHints,
    Exactness,
    Lowering,
    OpKind,
    ParamKind,
    Params,
    ParamSource,
    ParamSpec,
    Shape,
    ShapeError,
    numel,
)
from taso.opspecs._z3 import TENSOR, param_sort, param_value

InferFn = Callable[[Sequence[Shape], Params], tuple[Shape, ...]]
CheckFn = Callable[[Sequence[Shape], Params], CheckResult]
EvalFn = Callable[[Sequence[np.ndarray], Params], Sequence[np.ndarray]]
CostFn = Callable[[Sequence[Shape], Sequence[Shape], Params], int]


@dataclass(frozen=True)
class EmitNode:
    """One ONNX node of a decomposition; inputs: int = spec input, str = earlier output,
    float = scalar constant.  The node whose ``output`` is ``"out"`` yields the result."""

    op_type: str
    inputs: tuple[int | str | float, ...]
    output: str
    attrs: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class OnnxNode:
    """ONNX form of a spec instance: attributes plus constant inputs (index -> array)."""

    op_type: str
    attrs: Mapping[str, object]
    const_inputs: Mapping[int, np.ndarray]
    domain: str = ""


def _always_ok(shapes: Sequence[Shape], params: Params) -> CheckResult:
    return CheckResult.passed()


def _no_flops(inputs: Sequence[Shape], outputs: Sequence[Shape], params: Params) -> int:
    return 0


@dataclass(frozen=True)
class OpSpec:
    """One operator: ONNX mapping, shapes, validity, NumPy and Z3 semantics, hints, cost."""

    name: str
    math: str  # one line: what the operator computes
    onnx_ops: tuple[str, ...]
    kind: OpKind
    lowering: Lowering
    arity: tuple[int, int | None]  # (min, max) tensor inputs; None = variadic
    params: tuple[ParamSpec, ...]
    infer: InferFn
    semantics: EvalFn
    check_fn: CheckFn = _always_ok
    flops_fn: CostFn = _no_flops
    hints: EnumHints = EnumHints()
    domain: str = ""
    min_opset: int = 13
    outputs_fn: Callable[[Params], int] | None = None  # multi-output ops (Split)
    decomposition: Callable[[Params], tuple[EmitNode, ...]] | None = None
    decomposition_exactness: Exactness = Exactness.EXACT  # how its decomposition computes it
    polynomial: bool = True  # symbolic evaluation needs no uninterpreted scalar functions
    commutative: bool = False  # op(a, b) == op(b, a): the matcher tries both operand orders
    element_moving: bool = False
    """Every output element is an input element (moved, selected or copied): a rule made of
    such ops holds for integer tensors too. Rules with any other op hold over the reals
    (float tensors) only: integer division and overflow are not real arithmetic."""

    # -- parameters ---------------------------------------------------------------
    def param(self, name: str) -> ParamSpec:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(f"{self.name} has no parameter {name!r}")

    def complete(self, params: Params) -> dict[str, object]:
        """Parameters with ONNX defaults filled in; unknown names are an error."""
        known = {p.name for p in self.params}
        unknown = set(params) - known
        if unknown:
            raise ShapeError(f"{self.name}: unknown parameters {sorted(unknown)}")
        return {p.name: params.get(p.name, p.default) for p in self.params}

    def params_from_onnx(
        self, attrs: Mapping[str, object], const_inputs: Sequence[np.ndarray | None] = ()
    ) -> dict[str, object]:
        """Spec parameters of an ONNX node (``const_inputs[i]`` is input i's value if constant)."""
        out: dict[str, object] = {}
        for p in self.params:
            out[p.name] = _read_param(self.name, p, attrs, const_inputs)
        return out

    def params_to_onnx(self, params: Params, *, dtype: np.dtype | None = None) -> OnnxNode:
        """ONNX attributes and constant inputs reproducing ``params`` (inverse of the above).

        Float constant inputs (Clip bounds, Pad value) take ``dtype`` (the data's type),
        float32 by default; integer ones (shapes, axes, pads) are int64."""
        if self.kind is OpKind.INTERNAL:
            raise ShapeError(f"{self.name} is internal: lowering is {self.lowering.value}")
        full = self.complete(params)
        attrs: dict[str, object] = {}
        consts: dict[int, np.ndarray] = {}
        for p in self.params:
            value = full[p.name]
            if value is None or value == p.default or p.source is ParamSource.NONE:
                continue  # ONNX defaults are left implicit (auto_pad forbids explicit pads)
            if p.source is ParamSource.CONST_INPUT:
                consts[p.input_index or 0] = _const_array(p, value, dtype)
            else:
                attrs[p.attr_name] = list(value) if isinstance(value, tuple) else value
        return OnnxNode(self.onnx_ops[0], attrs, consts, self.domain)

    def needs_decomposition(self, params: Params, *, opset: int) -> bool:
        """True when the exporter must emit ``decomposition`` instead of one ONNX node:
        internal ops lowered by decomposition, internal parameters set (Conv's fused
        activation), or a model opset older than the ONNX op (Swish)."""
        if self.kind is OpKind.INTERNAL:
            return self.lowering is Lowering.DECOMPOSE
        full = self.complete(params)
        internal_set = any(
            p.source is ParamSource.NONE and full[p.name] != p.default for p in self.params
        )
        return internal_set or (opset < self.min_opset and self.decomposition is not None)

    # -- shapes and validity --------------------------------------------------------
    def num_outputs(self, params: Params) -> int:
        return 1 if self.outputs_fn is None else self.outputs_fn(self.complete(params))

    def check(self, shapes: Sequence[Shape], params: Params) -> CheckResult:
        """Whether the op is defined on these input shapes and parameters (and why not)."""
        lo, hi = self.arity
        if len(shapes) < lo or (hi is not None and len(shapes) > hi):
            return CheckResult.failed(f"{self.name}: {len(shapes)} inputs, expected {lo}..{hi}")
        try:
            full = self.complete(params)
            result = self.check_fn(shapes, full)
            if result.ok:
                self.infer(shapes, full)
            return result
        except (ShapeError, ValueError, IndexError, TypeError) as err:
            return CheckResult.failed(f"{self.name}: {err}")

    def infer_shapes(self, shapes: Sequence[Shape], params: Params) -> tuple[Shape, ...]:
        """Output shapes; raises ``ShapeError`` with the reason when invalid."""
        result = self.check(shapes, params)
        if not result.ok:
            raise ShapeError(result.reason)
        return self.infer(shapes, self.complete(params))

    # -- semantics ------------------------------------------------------------------
    def evaluate(self, inputs: Sequence[np.ndarray], params: Params) -> list[np.ndarray]:
        """NumPy reference semantics (float math in float64, cast back to the input dtype)."""
        full = self.complete(params)
        arrays = [np.asarray(a) for a in inputs]
        result_dtype = _float_dtype(arrays)
        work = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays]
        outs = self.semantics(work, full)
        return [_cast_back(o, result_dtype) for o in outs]

    def z3_function(self, arity: int, output: int = 0) -> z3.FuncDecl:
        """Uninterpreted function ``name(params..., tensors...) -> Tensor`` for one output."""
        sorts = [param_sort(p.kind) for p in self.params]
        suffix = f"_o{output}" if output or self.outputs_fn else ""
        name = f"{self.name}_{arity}{suffix}" if self.arity[1] is None else f"{self.name}{suffix}"
        return z3.Function(name, *sorts, *([TENSOR] * arity), TENSOR)

    def z3_term(self, inputs: Sequence[z3.ExprRef], params: Params) -> list[z3.ExprRef]:
        """Z3 terms (one per output) of this op applied to tensor terms; params may be Z3."""
        full = self.complete(params)
        args = [param_value(p.kind, full[p.name]) for p in self.params]
        count = self.num_outputs(full)
        return [self.z3_function(len(inputs), i)(*args, *inputs) for i in range(count)]

    # -- cost -----------------------------------------------------------------------
    def cost(self, shapes: Sequence[Shape], params: Params, *, itemsize: int = 4) -> Cost:
        """FLOPs and bytes moved for concrete shapes."""
        outs = self.infer_shapes(shapes, params)
        full = self.complete(params)
        moved = sum(numel(s) for s in (*shapes, *outs)) * itemsize
        return Cost(flops=self.flops_fn(shapes, outs, full), bytes=moved)


def _read_param(
    op: str, p: ParamSpec, attrs: Mapping[str, object], consts: Sequence[np.ndarray | None]
) -> object:
    if p.source is ParamSource.NONE:
        return p.default
    if p.source is ParamSource.ATTRIBUTE:
        value = attrs.get(p.attr_name, p.default)
    else:
        index = p.input_index or 0
        array = consts[index] if index < len(consts) else None
        if array is None:  # an older opset's attribute (Clip's bounds before opset 11), else the default
            return _coerce(op, p, attrs[p.attr_name]) if p.attr_name in attrs else p.default
        value = np.asarray(array).reshape(-1).tolist()
        if p.kind in (ParamKind.INT, ParamKind.FLOAT):
            value = value[0]
    return _coerce(op, p, value)


def _coerce(op: str, p: ParamSpec, value: object) -> object:
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode()
    if p.kind is ParamKind.INT:
        return int(value)  # type: ignore[call-overload]
    if p.kind is ParamKind.FLOAT:
        return float(value)  # type: ignore[arg-type]
    if p.kind is ParamKind.INTS:
        return tuple(int(v) for v in value)  # type: ignore[attr-defined]
    if p.kind is ParamKind.FLOATS:
        return tuple(float(v) for v in value)  # type: ignore[attr-defined]
    return str(value)


def _const_array(p: ParamSpec, value: object, dtype: np.dtype | None) -> np.ndarray:
    if p.kind in (ParamKind.INT, ParamKind.INTS):
        return np.asarray(value, dtype=np.int64)
    return np.asarray(value, dtype=dtype or np.float32)


def _float_dtype(arrays: Sequence[np.ndarray]) -> np.dtype | None:
    """The widest float dtype among the inputs (ONNX gives an op's float inputs one dtype;
    the refuter's float64 inputs meet a nullary constant's float32 ones, which must not
    round them), or None for symbolic or non-float inputs."""
    if any(a.dtype == object for a in arrays):
        return None
    floats = [a.dtype for a in arrays if a.dtype.kind == "f"]
    return np.result_type(*floats) if floats else None


def _cast_back(out: np.ndarray, dtype: np.dtype | None) -> np.ndarray:
    out = np.asarray(out)
    if out.dtype == object:
        return out
    if dtype is not None and out.dtype.kind == "f":
        return out.astype(dtype)
    if dtype is None and out.dtype == np.float64:
        return out.astype(np.float32)
    return out
