"""Squeeze: drop size-1 axes (all of them when ``axes`` is absent)."""

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

PARAMS = (ParamSpec("axes", ParamKind.INTS, None, ParamSource.CONST_INPUT, input_index=1),)


def squeezed_axes(x: Shape, p: Params) -> tuple[int, ...]:
    if p["axes"] is None:
        return tuple(i for i, d in enumerate(x) if d == 1)
    return tuple(sorted(normalize_axis(a, len(x)) for a in p["axes"]))  # type: ignore[attr-defined]


def _check(shapes: Sequence[Shape], p: Params) -> CheckResult:
    x = shapes[0]
    bad = [a for a in squeezed_axes(x, p) if x[a] != 1]
    return CheckResult.failed(f"Squeeze: axes {bad} are not size 1") if bad else CheckResult.passed()


def _infer(shapes: Sequence[Shape], p: Params) -> tuple[Shape, ...]:
    drop = set(squeezed_axes(shapes[0], p))
    return (tuple(d for i, d in enumerate(shapes[0]) if i not in drop),)


def _semantics(inputs: Sequence[np.ndarray], p: Params) -> list[np.ndarray]:
    return [np.squeeze(inputs[0], axis=squeezed_axes(inputs[0].shape, p))]


SPEC = OpSpec(
    name="Squeeze",
    math="Squeeze(x; axes) = x without the listed size-1 axes",
    onnx_ops=("Squeeze",),
    kind=OpKind.ONNX,
    element_moving=True,
    lowering=Lowering.NODE,
    arity=(1, 1),
    params=PARAMS,
    infer=_infer,
    semantics=_semantics,
    check_fn=_check,
    hints=EnumHints(enumerable=False),
)
