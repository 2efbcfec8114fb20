"""ScalarMul (internal): multiply by a 0-d tensor (TASO's smul); lowered to ONNX Mul."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from taso.opspecs._spec import EmitNode, OpSpec
from taso.opspecs._types import CheckResult, EnumHints, Lowering, OpKind, Params, Shape, numel


def _check(shapes: Sequence[Shape], p: Params) -> CheckResult:
    if tuple(shapes[1]) != ():
        return CheckResult.failed(f"ScalarMul: scale must be 0-d, got {shapes[1]}")
    return CheckResult.passed()


def _semantics(inputs: Sequence[np.ndarray], p: Params) -> list[np.ndarray]:
    return [inputs[0] * inputs[1]]


SPEC = OpSpec(
    name="ScalarMul",
    math="ScalarMul(x, s) = s * x  (s a 0-d tensor)",
    onnx_ops=(),
    kind=OpKind.INTERNAL,
    lowering=Lowering.DECOMPOSE,
    arity=(2, 2),
    params=(),
    infer=lambda shapes, p: (tuple(shapes[0]),),
    semantics=_semantics,
    check_fn=_check,
    flops_fn=lambda i, o, p: numel(o[0]),
    hints=EnumHints(weight_inputs=frozenset({1})),
    decomposition=lambda p: (EmitNode("Mul", (0, 1), "out"),),
)
