"""Resize, nearest upsampling by whole-number scales: every element copied scale times per axis.

Only the exactly representable case is modelled: mode "nearest", coordinate transformation
"asymmetric", nearest mode "floor" and positive integer scales (the form ORT's NCHWc layout
runs as a blocked Upsample); any other Resize fails the check and stays opaque to rules.
"""

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
    dim_mul,
    numel,
)

PARAMS = (
    ParamSpec("scales", ParamKind.FLOATS, None, ParamSource.CONST_INPUT, input_index=2,
              doc="one whole-number factor per axis"),
    ParamSpec("mode", ParamKind.STRING, "nearest"),
    ParamSpec("coordinate_transformation_mode", ParamKind.STRING, "half_pixel"),
    ParamSpec("nearest_mode", ParamKind.STRING, "round_prefer_floor"),
)
_MODELLED = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}


def factors(p: Params) -> tuple[int, ...]:
    """The scales as integers (the check has ensured they are whole and positive)."""
    return tuple(int(s) for s in p["scales"])  # type: ignore[attr-defined]


def _check(shapes: Sequence[Shape], p: Params) -> CheckResult:
    for name, wanted in _MODELLED.items():
        if p[name] != wanted:
            return CheckResult.failed(f"Resize: {name} {p[name]!r} is not modelled (only {wanted!r})")
    scales = p["scales"]
    if scales is None or len(scales) != len(shapes[0]):  # type: ignore[arg-type]
        return CheckResult.failed(f"Resize: need {len(shapes[0])} constant scales")
    if any(s < 1 or s != int(s) for s in scales):  # type: ignore[attr-defined]
        return CheckResult.failed(f"Resize: scales {scales} are not whole numbers >= 1")
    return CheckResult.passed()


def _infer(shapes: Sequence[Shape], p: Params) -> tuple[Shape, ...]:
    return (tuple(dim_mul(d, k) for d, k in zip(shapes[0], factors(p), strict=True)),)


def _semantics(inputs: Sequence[np.ndarray], p: Params) -> list[np.ndarray]:
    out = inputs[0]
    for axis, k in enumerate(factors(p)):
        out = np.repeat(out, k, axis=axis)
    return [out]


SPEC = OpSpec(
    name="Resize",
    math="Resize(x; scales k, nearest, asymmetric, floor)[i] = x[i // k]",
    onnx_ops=("Resize",),
    kind=OpKind.ONNX,
    element_moving=True,
    lowering=Lowering.NODE,
    arity=(1, 1),
    params=PARAMS,
    infer=_infer,
    semantics=_semantics,
    check_fn=_check,
    flops_fn=lambda i, o, p: numel(o[0]),
    hints=EnumHints(enumerable=False),
    min_opset=7,  # 11 and 12 with an empty roi input, 7-10 as the legacy op (`substitutions._emit`)
)
