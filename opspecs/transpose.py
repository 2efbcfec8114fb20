"""Transpose: permute axes (ONNX default perm reverses them)."""

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


def perm_of(shape: Shape, p: Params) -> tuple[int, ...]:
    """The permutation, with ONNX's default (reversed axes) resolved."""
    perm = p["perm"]
    return tuple(range(len(shape)))[::-1] if perm is None else tuple(perm)  # type: ignore[arg-type]


def _check(shapes: Sequence[Shape], p: Params) -> CheckResult:
    perm = perm_of(shapes[0], p)
    if sorted(perm) != list(range(len(shapes[0]))):
        return CheckResult.failed(f"Transpose: {perm} is not a permutation of rank {len(shapes[0])}")
    return CheckResult.passed()


def _infer(shapes: Sequence[Shape], p: Params) -> tuple[Shape, ...]:
    return (tuple(shapes[0][i] for i in perm_of(shapes[0], p)),)


def _semantics(inputs: Sequence[np.ndarray], p: Params) -> list[np.ndarray]:
    return [np.transpose(inputs[0], perm_of(inputs[0].shape, p))]


SPEC = OpSpec(
    name="Transpose",
    math="Transpose(x; perm)[i_perm[0], ..., i_perm[r-1]] = x[i_0, ..., i_{r-1}]",
    onnx_ops=("Transpose",),
    kind=OpKind.ONNX,
    element_moving=True,
    lowering=Lowering.NODE,
    arity=(1, 1),
    params=(ParamSpec("perm", ParamKind.INTS, None),),
    infer=_infer,
    semantics=_semantics,
    check_fn=_check,
    min_opset=1,
    hints=EnumHints(param_values={"perm": ((1, 0),)}, weight_inputs=frozenset({0})),
)
