"""Reshape: same elements in row-major order, new shape (0 copies a dim, -1 is inferred)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from taso.opspecs._spec import OpSpec
from taso.opspecs._types import (
    CheckResult,
    Dim,
    EnumHints,
    Lowering,
    OpKind,
    ParamKind,
    Params,
    ParamSource,
    ParamSpec,
    Shape,
    ShapeError,
    dims_known,
    numel,
)

PARAMS = (
    ParamSpec("shape", ParamKind.INTS, None, ParamSource.CONST_INPUT, input_index=1),
    ParamSpec("allowzero", ParamKind.INT, 0),
)


def target_shape(x: Shape, p: Params) -> Shape:
    """Resolve 0 (copy, unless allowzero) and -1 (inferred) entries of the target."""
    target: list[Dim] = []
    for i, d in enumerate(p["shape"]):  # type: ignore[arg-type]
        target.append(x[i] if d == 0 and not p["allowzero"] else d)
    if -1 in target:
        if not dims_known(x):
            raise ShapeError("Reshape: -1 with symbolic input dims")
        known = numel([d for d in target if d != -1])
        if known == 0 or numel(x) % known:
            raise ShapeError(f"Reshape: cannot infer -1 for {x} -> {tuple(target)}")
        target[target.index(-1)] = numel(x) // known
    return tuple(target)


def _check(shapes: Sequence[Shape], p: Params) -> CheckResult:
    if p["shape"] is None:
        return CheckResult.failed("Reshape: constant target shape required")
    if list(p["shape"]).count(-1) > 1:  # type: ignore[arg-type]
        return CheckResult.failed("Reshape: more than one -1")
    target = target_shape(shapes[0], p)
    if dims_known(target) and dims_known(shapes[0]) and numel(target) != numel(shapes[0]):
        return CheckResult.failed(f"Reshape: {shapes[0]} has a different size from {target}")
    return CheckResult.passed()


def _infer(shapes: Sequence[Shape], p: Params) -> tuple[Shape, ...]:
    return (target_shape(shapes[0], p),)


def _semantics(inputs: Sequence[np.ndarray], p: Params) -> list[np.ndarray]:
    x = inputs[0]
    return [x.reshape(tuple(int(d) for d in target_shape(x.shape, p)))]


SPEC = OpSpec(
    name="Reshape",
    math="Reshape(x; shape) = x with its row-major elements laid out in `shape`",
    onnx_ops=("Reshape",),
    kind=OpKind.ONNX,
    element_moving=True,
    lowering=Lowering.NODE,
    arity=(1, 1),
    params=PARAMS,
    infer=_infer,
    semantics=_semantics,
    check_fn=_check,
    hints=EnumHints(weight_inputs=frozenset({0}), enumerable=False),
    min_opset=14,
)
