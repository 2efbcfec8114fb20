"""ReduceMean: the mean over the listed axes (all axes when none are listed)."""

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
    numel,
)

PARAMS = (
    ParamSpec("axes", ParamKind.INTS, None, ParamSource.CONST_INPUT, input_index=1,
              doc="an attribute before opset 18"),
    ParamSpec("keepdims", ParamKind.INT, 1),
    ParamSpec("noop_with_empty_axes", ParamKind.INT, 0),
)


def reduced_axes(x: Shape, p: Params) -> tuple[int, ...]:
    """The reduced axes, normalized to 0..rank-1 and sorted."""
    if not p["axes"]:
        return () if p["noop_with_empty_axes"] else tuple(range(len(x)))
    return tuple(sorted({normalize_axis(a, len(x)) for a in p["axes"]}))  # type: ignore[attr-defined]


def _check(shapes: Sequence[Shape], p: Params) -> CheckResult:
    rank = len(shapes[0])
    if any(not -rank <= a < rank for a in p["axes"] or ()):  # type: ignore[attr-defined]
        return CheckResult.failed(f"ReduceMean: axes {p['axes']} out of range for rank {rank}")
    if not reduced_axes(shapes[0], p):
        return CheckResult.failed("ReduceMean: no axis reduced (an identity)")
    return CheckResult.passed()


def _infer(shapes: Sequence[Shape], p: Params) -> tuple[Shape, ...]:
    axes = set(reduced_axes(shapes[0], p))
    if p["keepdims"]:
        return (tuple(1 if i in axes else d for i, d in enumerate(shapes[0])),)
    return (tuple(d for i, d in enumerate(shapes[0]) if i not in axes),)


def _semantics(inputs: Sequence[np.ndarray], p: Params) -> list[np.ndarray]:
    x = inputs[0]
    axes = reduced_axes(x.shape, p)
    count = int(np.prod([x.shape[a] for a in axes]))
    return [x.sum(axis=axes, keepdims=bool(p["keepdims"])) * (1.0 / count)]


SPEC = OpSpec(
    name="ReduceMean",
    math="ReduceMean(x; axes)[kept] = mean over the axes of x",
    onnx_ops=("ReduceMean",),
    kind=OpKind.ONNX,
    lowering=Lowering.NODE,
    arity=(1, 1),
    params=PARAMS,
    infer=_infer,
    semantics=_semantics,
    check_fn=_check,
    flops_fn=lambda i, o, p: numel(i[0]),
    hints=EnumHints(enumerable=False),
    min_opset=18,
)
