"""Pad: pad every axis (constant, edge or reflect mode); pads/value are constant inputs."""

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
    dim_add,
)

PARAMS = (
    ParamSpec("mode", ParamKind.STRING, "constant"),
    ParamSpec("pads", ParamKind.INTS, None, ParamSource.CONST_INPUT, input_index=1,
              doc="all begins then all ends, one per axis"),
    ParamSpec("value", ParamKind.FLOAT, 0.0, ParamSource.CONST_INPUT, input_index=2),
)
_NUMPY_MODE = {"constant": "constant", "edge": "edge", "reflect": "reflect"}


def _check(shapes: Sequence[Shape], p: Params) -> CheckResult:
    rank = len(shapes[0])
    pads = p["pads"]
    if pads is None or len(pads) != 2 * rank:  # type: ignore[arg-type]
        return CheckResult.failed(f"Pad: need {2 * rank} constant pads")
    if any(v < 0 for v in pads):  # type: ignore[attr-defined]
        return CheckResult.failed("Pad: negative pads (cropping) not supported")
    if p["mode"] not in _NUMPY_MODE:
        return CheckResult.failed(f"Pad: mode {p['mode']!r} not supported")
    return CheckResult.passed()


def _infer(shapes: Sequence[Shape], p: Params) -> tuple[Shape, ...]:
    x, pads, rank = shapes[0], p["pads"], len(shapes[0])
    return (tuple(dim_add(dim_add(x[i], pads[i]), pads[i + rank]) for i in range(rank)),)  # type: ignore[index]


def _semantics(inputs: Sequence[np.ndarray], p: Params) -> list[np.ndarray]:
    x, pads, rank = inputs[0], p["pads"], inputs[0].ndim
    widths = [(pads[i], pads[i + rank]) for i in range(rank)]  # type: ignore[index]
    if p["mode"] != "constant":
        return [np.pad(x, widths, mode=_NUMPY_MODE[str(p["mode"])])]  # type: ignore[call-overload]
    out = np.empty(_infer([x.shape], p)[0], dtype=x.dtype)  # type: ignore[arg-type]
    out[...] = p["value"] if x.dtype.kind == "f" or x.dtype == object else int(p["value"])  # type: ignore[call-overload]
    out[tuple(slice(b, b + n) for (b, _), n in zip(widths, x.shape, strict=True))] = x
    return [out]


SPEC = OpSpec(
    name="Pad",
    math="Pad(x; pads, value)[i + begin] = x[i], elsewhere value (or edge/reflect copies)",
    onnx_ops=("Pad",),
    kind=OpKind.ONNX,
    lowering=Lowering.NODE,
    arity=(1, 1),
    params=PARAMS,
    infer=_infer,
    semantics=_semantics,
    check_fn=_check,
    hints=EnumHints(weight_inputs=frozenset({0}), enumerable=False),
    min_opset=11,
)
