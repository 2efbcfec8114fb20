"""Evaluating rule constraints, target parameters and exactness side conditions on a match.

Expressions see the bound parameter variables and four helpers over pattern inputs
(named by string, e.g. `shape('x')[1] == 1`): `shape`, `rank`, `is_const` and `value`
(the value of a small constant scalar or all-equal tensor, else None). Concrete
dims are ints; a symbolic or unknown dim is a `SymbolicDim`, which only answers
questions it can decide: a symbol equals itself, and every other comparison or
arithmetic on it raises `Undecidable`. A constraint that raises is *not satisfied*:
the matcher never guesses on symbolic shapes.

A rule that is not bit-exact (`Exactness.REASSOCIATES`: it holds over the reals, floats
may round differently) also carries implicit side conditions on its constants, which
`side_condition_failure` checks. Rounding may change; the class of a value may not:
  1. every constant the match binds is finite and normal, or zero (float dtypes only);
  2. every value the source or the target computes from constants alone (`1 / y`, `a * b`,
     `s / sqrt(var + eps)`), evaluated as export folds it (in float64, cast to the
     constants' dtype), is finite and normal, or a zero that is exact: a product that
     underflows to zero, a reciprocal that overflows to inf or is denormal, is refused;
  3. the target never divides by a value known only at run time unless the source does
     the very same division (no side condition on a run-time value can be checked).
A side condition that cannot be evaluated is not satisfied.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import onnx

from taso.ir import INTERNAL_DOMAIN, Graph, is_anonymous_dim
from taso.opspecs import OpSpec, spec_by_name
from taso.substitutions._bridge import GraphIndex, NodeView
from taso.substitutions._emit import as_attribute
from taso.substitutions.rule import (
    ParamExpr,
    ParamValue,
    ParamVar,
    Rule,
    RuleError,
    evaluate_expression,
    split_ref,
)


class Undecidable(Exception):
    """The expression depends on the value of a symbolic or unknown dimension."""


@dataclass(frozen=True, eq=False)
class SymbolicDim:
    """A dimension without a known value: equal only to the same symbol."""

    name: str
    known_symbol: bool  # False: an unknown dim, equal only to itself

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if isinstance(other, SymbolicDim) and self.known_symbol and other.known_symbol and other.name == self.name:
            return True
        raise Undecidable(f"cannot compare symbolic dim {self.name!r} with {other!r}")

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self.name)

    def _undecidable(self, *args: object) -> object:
        raise Undecidable(f"symbolic dim {self.name!r} has no known value")

    __lt__ = __le__ = __gt__ = __ge__ = _undecidable
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _undecidable
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __neg__ = __abs__ = _undecidable
    __bool__ = __index__ = __int__ = _undecidable  # type: ignore[assignment]


_FAILURES = (Undecidable, RuleError, TypeError, ValueError, KeyError, IndexError, ArithmeticError, NameError)


def tensor_env(
    graph: Graph,
    tensors: Mapping[str, str],
    is_const: Callable[[str], bool],
    constant_array: Callable[[str], np.ndarray | None] | None = None,
) -> dict[str, object]:
    """The helpers `shape`, `rank`, `is_const`, `value`, `after_linear` over the pattern inputs
    bound in `tensors`."""

    def shape(name: str) -> tuple[object, ...]:
        value = tensors[name]
        tensor_type = graph.types.get(value)
        if tensor_type is None or tensor_type.shape is None:
            raise Undecidable(f"rank of {name!r} is unknown")
        return tuple(_dim(d, f"{value}[{i}]") for i, d in enumerate(tensor_type.shape))

    def rank(name: str) -> int:
        return len(shape(name))

    def constant(name: str) -> bool:
        return is_const(tensors[name])

    def value(name: str) -> float | None:
        """The value of a constant scalar or all-equal constant tensor, else None."""
        array = constant_array(tensors[name]) if constant_array is not None else None
        if array is None or array.size == 0 or array.dtype.kind not in "fiub":
            return None
        first = array.reshape(-1)[0]
        return float(first) if bool(np.all(array == first)) else None

    def after_linear(name: str) -> bool:
        return _after_linear(graph, tensors[name], is_const)

    return {"shape": shape, "rank": rank, "is_const": constant, "value": value, "after_linear": after_linear}


def node_env(graph: Graph, nodes: Mapping[str, int]) -> dict[str, object]:
    """The helper `feeds_unpadded_conv` over the pattern nodes bound in `nodes`."""

    def feeds_unpadded_conv(node: str) -> bool:
        return _feeds_unpadded_conv(graph, graph.nodes[nodes[node]].outputs[0])

    return {"feeds_unpadded_conv": feeds_unpadded_conv}


def _feeds_unpadded_conv(graph: Graph, value: str) -> bool:
    """Is `value` read only as the data input of convs without padding? A constant scale and
    shift of it folds forward into their weights and biases (`cv-conv_affine_input`)."""
    consumers = graph.consumers.get(value, ())
    if not consumers or value in graph.outputs:
        return False
    for node_id in consumers:
        node = graph.nodes[node_id]
        if node.op_type != "Conv" or value in node.inputs[1:] or node.attr("auto_pad", "NOTSET") != "NOTSET":
            return False
        if any(int(p) for p in (node.attr("pads") or ())):  # type: ignore[union-attr]
            return False
    return True


LINEAR_OPS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul", "BatchNormalization"})
"""Ops that ORT folds a following constant scale or shift into (ConvMulFusion, ConvAddFusion
and their kin; a BatchNormalization becomes part of the conv before it)."""
_AFFINE_STEPS = 8


def _after_linear(graph: Graph, value: str, is_const: Callable[[str], bool]) -> bool:
    """Is `value` a linear op's output, directly or through Add/Sub/Mul/Div by constants?
    There ORT folds one more constant scale or shift back into that op; after anything
    else (an activation, a sum of two tensors, a graph input) it runs it as its own pass."""
    for _ in range(_AFFINE_STEPS):
        producer = graph.producers.get(value)
        if producer is None:
            return False
        node = graph.nodes[producer[0]]
        if node.op_type in LINEAR_OPS:
            return True
        if node.op_type not in ("Add", "Sub", "Mul", "Div") or len(node.inputs) != 2:
            return False
        first, second = node.inputs
        if is_const(second) and not is_const(first):
            value = first
        elif is_const(first) and not is_const(second) and node.op_type in ("Add", "Mul"):
            value = second
        else:
            return False
    return False


def _dim(dim: object, where: str) -> object:
    if isinstance(dim, int):
        return dim
    if isinstance(dim, str) and not is_anonymous_dim(dim):
        return SymbolicDim(dim, known_symbol=True)
    return SymbolicDim(where, known_symbol=False)


def constraint_holds(expr: str, env: Mapping[str, object]) -> bool:
    """True only if `expr` evaluates to a decidable true value."""
    try:
        return bool(evaluate_expression(expr, env))
    except _FAILURES:
        return False


def evaluate_param(expr: str, env: Mapping[str, object]) -> object:
    """Value of a target `ParamExpr`; raises Undecidable when it cannot be computed."""
    try:
        value = evaluate_expression(expr, env)
    except _FAILURES as exc:
        raise Undecidable(f"cannot evaluate {expr!r}: {exc}") from None
    if isinstance(value, SymbolicDim) or (isinstance(value, tuple) and any(isinstance(v, SymbolicDim) for v in value)):
        raise Undecidable(f"{expr!r} depends on a symbolic dim")
    return value


def target_param(value: ParamValue, env: Mapping[str, object]) -> object:
    """A target node's parameter: a bound variable, a computed expression or a literal."""
    if isinstance(value, ParamVar):
        return env[value.name]
    if isinstance(value, ParamExpr):
        return as_attribute(evaluate_param(value.expr, env))
    return as_attribute(value)


# ----- side conditions of rules that are not bit-exact ------------------------------------


class ConstantValues:
    """The arrays of a graph's constant values, of any size, read once per instance.

    Weight transforms are folded the way export folds them: `spec.evaluate`, cast to the
    value's declared element type."""

    def __init__(self, index: GraphIndex) -> None:
        self.index = index
        self._arrays: dict[str, np.ndarray | None] = {}

    def array(self, name: str) -> np.ndarray | None:
        if name not in self._arrays:
            self._arrays[name] = self._read(name) if self.index.is_constant(name) else None
        return self._arrays[name]

    def _read(self, name: str) -> np.ndarray | None:
        graph = self.index.graph
        init = graph.initializers.get(name)
        if init is not None:
            return init.array()
        node_id, position = graph.producers[name]
        node = graph.nodes[node_id]
        if node.domain != INTERNAL_DOMAIN:
            return self.index.constant_array(name)  # a Constant node
        inputs = _all_known([self.array(i) for i in node.inputs])
        if inputs is None:
            return None
        value = spec_by_name(node.op_type).evaluate(inputs, dict(node.attributes))[position]
        declared = graph.types.get(name)
        if declared is None or not declared.elem_type:
            return value
        return value.astype(onnx.helper.tensor_dtype_to_np_dtype(declared.elem_type), copy=False)


def side_condition_failure(
    rule: Rule,
    values: ConstantValues,
    tensors: Mapping[str, str],
    source: tuple[NodeView, ...],
    env: Mapping[str, object],
) -> str | None:
    """Why a match of a rule that is not bit-exact breaks a side condition, or None if none."""
    try:
        return (
            _bound_failure(values, tensors)
            or _source_failure(source, values)
            or _target_failure(rule, values, tensors, env)
        )
    except (*_FAILURES, OSError) as exc:
        return f"a constant cannot be evaluated: {exc}"


def _bound_failure(values: ConstantValues, tensors: Mapping[str, str]) -> str | None:
    for name, value in sorted(tensors.items()):
        array = values.array(value)
        if array is not None and not _class_kept(array, array):
            return f"constant {name!r} is not finite and normal or zero"
    return None


def _source_failure(source: tuple[NodeView, ...], values: ConstantValues) -> str | None:
    computed: dict[str, np.ndarray | None] = {}
    for view in source:
        arrays = _all_known([computed.get(i, values.array(i)) for i in view.inputs])
        if arrays is None:
            continue
        folded = _fold(view.spec, arrays, view.params)
        if folded is None:
            return f"source {view.spec.name} of constants is not finite and normal or an exact zero"
        computed.update(zip(view.outputs, folded, strict=False))
    return None


def _target_failure(rule: Rule, values: ConstantValues, tensors: Mapping[str, str], env: Mapping[str, object]) -> str | None:
    known: dict[str, np.ndarray | None] = {name: values.array(value) for name, value in tensors.items()}
    inputs = {i.name for i in rule.inputs}
    source_divisions = {n.inputs for n in rule.source.nodes if n.op == "Div" and set(n.inputs) <= inputs}
    for node in rule.target.nodes:
        maybe = [known.get(ref if ref in tensors else _canonical(ref)) for ref in node.inputs]
        if node.op == "Div" and maybe[1] is None and node.inputs not in source_divisions:
            return f"target divides by {node.inputs[1]!r}, known only at run time"
        arrays = _all_known(maybe)
        if arrays is None:
            continue
        spec = spec_by_name(node.op)
        params = spec.complete({k: target_param(v, env) for k, v in node.params})
        folded = _fold(spec, arrays, params)
        if folded is None:
            return f"target {node.op} of constants is not finite and normal or an exact zero"
        known.update((f"{node.id}:{k}", array) for k, array in enumerate(folded))
    return None


def _all_known(arrays: list[np.ndarray | None]) -> list[np.ndarray] | None:
    """`arrays` if every input is a constant, else None (the op runs at inference)."""
    known = [a for a in arrays if a is not None]
    return known if len(known) == len(arrays) else None


def _canonical(ref: str) -> str:
    node, index = split_ref(ref)
    return f"{node}:{index}"


def _fold(spec: OpSpec, arrays: list[np.ndarray], params: Mapping[str, object]) -> list[np.ndarray] | None:
    """The op's outputs on constants as export folds them, or None if one changes class.

    Each output is computed in float64 (where what underflows or overflows in float32 is
    still finite and nonzero) and cast to the inputs' float dtype; the cast must keep it
    finite, and normal unless the float64 value is zero too."""
    dtype = next((a.dtype for a in arrays if a.dtype.kind == "f"), np.dtype(np.float32))
    with np.errstate(all="ignore"):  # hostile constants overflow and divide by zero here, by design
        exact = spec.evaluate([a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays], params)
        native = [e.astype(dtype) if e.dtype.kind == "f" else e for e in exact]
    return native if all(_class_kept(n, e) for n, e in zip(native, exact, strict=True)) else None


def _class_kept(native: np.ndarray, exact: np.ndarray) -> bool:
    """Whether every element is finite and normal, or zero where `exact` is zero too."""
    if native.dtype.kind != "f":
        return True
    magnitude = np.abs(native)
    normal = magnitude >= np.finfo(native.dtype).tiny
    exact_zero = (native == 0) & (exact == 0)
    return bool(np.all(np.isfinite(native)) and np.all(normal | exact_zero))
