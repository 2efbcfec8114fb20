"""Builders for elementwise specs: broadcasting binary ops and unary activations.

Operator modules call these with their math and NumPy function, so the
shape, cost and hint boilerplate is written once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from taso.opspecs._spec import EmitNode, OpSpec
from taso.opspecs._types import (
    EnumHints,
    Exactness,
    Lowering,
    OpKind,
    Params,
    ParamSpec,
    Shape,
    broadcast_shapes,
    numel,
)

BinaryFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
UnaryFn = Callable[[np.ndarray, Params], np.ndarray]


def _broadcast_infer(shapes: Sequence[Shape], params: Params) -> tuple[Shape, ...]:
    return (broadcast_shapes(*shapes),)


def _same_infer(shapes: Sequence[Shape], params: Params) -> tuple[Shape, ...]:
    return (tuple(shapes[0]),)


def _out_elements(inputs: Sequence[Shape], outputs: Sequence[Shape], params: Params) -> int:
    return numel(outputs[0])


def binary_spec(name: str, math: str, fn: BinaryFn, *, min_opset: int = 7, commutative: bool = False) -> OpSpec:
    """A broadcasting binary ONNX op (``name`` is also the ONNX op type)."""

    def semantics(inputs: Sequence[np.ndarray], params: Params) -> list[np.ndarray]:
        return [fn(inputs[0], inputs[1])]

    return OpSpec(
        name=name,
        math=math,
        onnx_ops=(name,),
        kind=OpKind.ONNX,
        lowering=Lowering.NODE,
        arity=(2, 2),
        params=(),
        infer=_broadcast_infer,
        semantics=semantics,
        flops_fn=_out_elements,
        hints=EnumHints(weight_inputs=frozenset({1})),
        min_opset=min_opset,
        commutative=commutative,
    )


def unary_spec(
    name: str,
    math: str,
    fn: UnaryFn,
    *,
    onnx_op: str | None = None,
    params: tuple[ParamSpec, ...] = (),
    polynomial: bool = True,
    min_opset: int = 6,
    flops_per_element: int = 1,
    hints: EnumHints | None = None,
    decomposition: Callable[[Params], tuple[EmitNode, ...]] | None = None,
    decomposition_exactness: Exactness = Exactness.EXACT,
) -> OpSpec:
    """A shape-preserving unary op (``onnx_op=None``: an ONNX op of the same name)."""

    def semantics(inputs: Sequence[np.ndarray], p: Params) -> list[np.ndarray]:
        return [fn(inputs[0], p)]

    def flops(inputs: Sequence[Shape], outputs: Sequence[Shape], p: Params) -> int:
        return flops_per_element * numel(outputs[0])

    return OpSpec(
        name=name,
        math=math,
        onnx_ops=(onnx_op or name,),
        kind=OpKind.ONNX,
        lowering=Lowering.NODE,
        arity=(1, 1),
        params=params,
        infer=_same_infer,
        semantics=semantics,
        flops_fn=flops,
        hints=hints or EnumHints(),
        min_opset=min_opset,
        polynomial=polynomial,
        decomposition=decomposition,
        decomposition_exactness=decomposition_exactness,
    )
