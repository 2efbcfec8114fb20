"""Split: cut a tensor along ``axis`` into pieces of the given sizes (multi-output)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from taso.opspecs._spec import OpSpec
from taso.opspecs._types import (
    CheckResult,
    EnumHints,
    Lowering,
    OpKind,
    ParamKind,
    Params,
    ParamSource,
    ParamSpec,
    Shape,
    normalize_axis,
)

PARAMS = (
    ParamSpec("axis", ParamKind.INT, 0),
    ParamSpec("split", ParamKind.INTS, None, ParamSource.CONST_INPUT, input_index=1,
              doc="piece sizes (required here: equal splits are written out)"),
)


def _check(shapes: Sequence[Shape], p: Params) -> CheckResult:
    if p["split"] is None:
        return CheckResult.failed("Split: explicit split sizes required")
    axis = normalize_axis(int(p["axis"]), len(shapes[0]))  # type: ignore[call-overload]
    size = shapes[0][axis]
    sizes = tuple(p["split"])  # type: ignore[arg-type]
    if any(s <= 0 for s in sizes):
        return CheckResult.failed(f"Split: non-positive sizes {sizes}")
    if isinstance(size, int) and sum(sizes) != size:
        return CheckResult.failed(f"Split: sizes {sizes} do not sum to dim {size}")
    return CheckResult.passed()


def _infer(shapes: Sequence[Shape], p: Params) -> tuple[Shape, ...]:
    axis = normalize_axis(int(p["axis"]), len(shapes[0]))  # type: ignore[call-overload]
    outs = []
    for size in p["split"]:  # type: ignore[attr-defined]
        shape = list(shapes[0])
        shape[axis] = size
        outs.append(tuple(shape))
    return tuple(outs)


def _semantics(inputs: Sequence[np.ndarray], p: Params) -> list[np.ndarray]:
    bounds = np.cumsum(p["split"])[:-1]  # type: ignore[arg-type]
    return list(np.split(inputs[0], bounds, axis=int(p["axis"])))  # type: ignore[call-overload]


SPEC = OpSpec(
    name="Split",
    math="Split(x; axis, sizes) = (x[.., 0:s1, ..], x[.., s1:s1+s2, ..], ...)",
    onnx_ops=("Split",),
    kind=OpKind.ONNX,
    element_moving=True,
    lowering=Lowering.NODE,
    arity=(1, 1),
    params=PARAMS,
    infer=_infer,
    semantics=_semantics,
    check_fn=_check,
    outputs_fn=lambda p: len(p["split"] or ()),  # type: ignore[arg-type]
    hints=EnumHints(param_values={"axis": (0, 1)}),
)
