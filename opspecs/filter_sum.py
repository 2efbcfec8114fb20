"""FilterSum (internal): each conv filter's sum, the weight transform of a shift folded into a conv.

For a conv weight ``w`` of shape (M, C/G, kh, kw), ``FilterSum(w)[m]`` is the sum of filter
m over its input channels and kernel window, shape (M,). An unpadded conv of ``x + t``
(``t`` one scalar) sees ``t`` under every tap of its window, so
``conv(x + t, w, b) = conv(x, w, b + t * FilterSum(w))`` for any group, stride and dilation;
with padding the border taps read zeros, not ``t``, and the identity fails.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from taso.opspecs._spec import OpSpec
from taso.opspecs._types import CheckResult, EnumHints, Lowering, OpKind, Params, Shape


def _check(shapes: Sequence[Shape], p: Params) -> CheckResult:
    if len(shapes[0]) < 2:
        return CheckResult.failed("FilterSum: a conv weight (rank 2 or more) is required")
    return CheckResult.passed()


def _infer(shapes: Sequence[Shape], p: Params) -> tuple[Shape, ...]:
    return ((shapes[0][0],),)


def _semantics(inputs: Sequence[np.ndarray], p: Params) -> list[np.ndarray]:
    w = inputs[0]
    return [w.reshape(w.shape[0], -1).sum(axis=1)]


SPEC = OpSpec(
    name="FilterSum",
    math="FilterSum(w)[m] = sum over c, i, j of w[m, c, i, j]",
    onnx_ops=(),
    kind=OpKind.INTERNAL,
    lowering=Lowering.FOLD,
    arity=(1, 1),
    params=(),
    infer=_infer,
    semantics=_semantics,
    check_fn=_check,
    hints=EnumHints(weight_inputs=frozenset({0})),
)
