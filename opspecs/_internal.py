"""Helpers for internal specs (no ONNX counterpart): constants and weight transforms."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from taso.opspecs._spec import OpSpec
from taso.opspecs._types import (
    CheckResult,
    EnumHints,
    Lowering,
    OpKind,
    Params,
    ParamSpec,
    Shape,
)


def constant_spec(
    name: str,
    math: str,
    params: tuple[ParamSpec, ...],
    shape_of: Callable[[Params], Shape],
    values: Callable[[Params], np.ndarray],
    check: Callable[[Params], CheckResult] | None = None,
) -> OpSpec:
    """A nullary constant; the exporter folds it to an initializer (``Lowering.FOLD``)."""

    def infer(shapes: Sequence[Shape], p: Params) -> tuple[Shape, ...]:
        return (shape_of(p),)

    def check_fn(shapes: Sequence[Shape], p: Params) -> CheckResult:
        return check(p) if check else CheckResult.passed()

    def semantics(inputs: Sequence[np.ndarray], p: Params) -> list[np.ndarray]:
        return [values(p)]

    return OpSpec(
        name=name,
        math=math,
        onnx_ops=(),
        kind=OpKind.INTERNAL,
        lowering=Lowering.FOLD,
        arity=(0, 0),
        params=params,
        infer=infer,
        semantics=semantics,
        check_fn=check_fn,
        hints=EnumHints(),
    )
