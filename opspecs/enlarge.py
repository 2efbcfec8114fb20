"""Enlarge (internal): zero-pad a conv kernel symmetrically to a larger odd size (weights only)."""

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
    ParamSpec,
    Shape,
)
from taso.opspecs._window import pad_spatial


def _margins(w: Shape, p: Params) -> tuple[int, int]:
    kh, kw = p["kernel_shape"]  # type: ignore[misc]
    return ((kh - int(w[2])) // 2, (kw - int(w[3])) // 2)


def _check(shapes: Sequence[Shape], p: Params) -> CheckResult:
    w = shapes[0]
    if len(w) != 4 or not all(isinstance(d, int) for d in w[2:]):
        return CheckResult.failed("Enlarge: rank-4 kernel with concrete spatial dims required")
    kh, kw = p["kernel_shape"]  # type: ignore[misc]
    for have, want in ((w[2], kh), (w[3], kw)):
        if want < have or (want - have) % 2:
            return CheckResult.failed(f"Enlarge: cannot centre size {have} in {want}")
    return CheckResult.passed()


def _infer(shapes: Sequence[Shape], p: Params) -> tuple[Shape, ...]:
    return ((*shapes[0][:2], *p["kernel_shape"]),)  # type: ignore[misc]


def _semantics(inputs: Sequence[np.ndarray], p: Params) -> list[np.ndarray]:
    mh, mw = _margins(inputs[0].shape, p)
    return [pad_spatial(inputs[0], (mh, mw, mh, mw))]


SPEC = OpSpec(
    name="Enlarge",
    math="Enlarge(w; K)[m, c, i + (K-k)/2, j + (K-k)/2] = w[m, c, i, j], zero elsewhere",
    onnx_ops=(),
    kind=OpKind.INTERNAL,
    lowering=Lowering.FOLD,
    arity=(1, 1),
    params=(ParamSpec("kernel_shape", ParamKind.INTS, None),),
    infer=_infer,
    semantics=_semantics,
    check_fn=_check,
    hints=EnumHints(param_values={"kernel_shape": ((3, 3),)}, weight_inputs=frozenset({0})),
)
