"""Small value types shared by every operator spec: dims, parameters, hints, costs.

A dimension is an ``int`` or a symbol (``str``); arithmetic on dimensions keeps
symbols as readable expressions so shape inference works on dynamic models too.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

Dim = int | str
Shape = tuple[Dim, ...]
Params = Mapping[str, object]


class ShapeError(ValueError):
    """Raised when inputs or parameters are invalid for an operator."""


class OpKind(enum.Enum):
    """Whether a spec is an ONNX operator or exists only inside taso."""

    ONNX = "onnx"  # one-to-one with an ONNX node
    INTERNAL = "internal"  # no ONNX counterpart: lowered or constant-folded by the exporter


class Lowering(enum.Enum):
    """How the exporter turns a spec instance into ONNX."""

    NODE = "node"  # emit the ONNX node from ``spec.params_to_onnx``
    FOLD = "fold"  # inputs are constants: evaluate with NumPy and emit an initializer
    DECOMPOSE = "decompose"  # emit ``spec.decomposition`` (a short chain of ONNX nodes)


class ParamKind(enum.Enum):
    """Type of a spec parameter (also decides its Z3 sort)."""

    INT = "int"
    FLOAT = "float"
    INTS = "ints"  # tuple[int, ...]
    FLOATS = "floats"
    STRING = "string"


class ParamSource(enum.Enum):
    """Where a parameter comes from in an ONNX node."""

    ATTRIBUTE = "attribute"  # an ONNX attribute
    CONST_INPUT = "const_input"  # a constant ONNX input (Clip min/max, Reshape shape, ...)
    NONE = "none"  # internal parameter without ONNX representation


class Exactness(enum.Enum):
    """Whether an identity holds bit-exactly in floating point."""

    EXACT = "exact"
    REASSOCIATES = "reassociates"  # holds over the reals; float sums may round differently
    ROUNDS_CONSTANTS = "rounds-constants"
    """Holds over the reals with an exact constant (1/6) that float32 rounds: the written
    form computes with fl(1/6), so results may differ in the last bits, as with
    `REASSOCIATES` (ORT's own HardSwish kernel computes with fl(1/6) too)."""


@dataclass(frozen=True)
class ParamSpec:
    """One parameter: its kind, ONNX default and where ONNX keeps it."""

    name: str
    kind: ParamKind
    default: object = None
    source: ParamSource = ParamSource.ATTRIBUTE
    onnx_name: str | None = None  # attribute name, when it differs from ``name``
    input_index: int | None = None  # for CONST_INPUT parameters
    doc: str = ""

    @property
    def attr_name(self) -> str:
        return self.onnx_name or self.name


@dataclass(frozen=True)
class EnumHints:
    """What the rule enumerator should try for this op."""

    param_values: Mapping[str, tuple[object, ...]] = field(default_factory=dict)
    weight_inputs: frozenset[int] = frozenset()  # inputs that may be constants (weights)
    enumerable: bool = True  # False: op appears only in axioms and real models


@dataclass(frozen=True)
class Cost:
    """Cost hint: floating point operations and bytes moved (inputs + outputs)."""

    flops: int
    bytes: int


@dataclass(frozen=True)
class CheckResult:
    """Outcome of a validity check; ``reason`` says why it failed."""

    ok: bool
    reason: str = ""

    @staticmethod
    def passed() -> CheckResult:
        return CheckResult(True)

    @staticmethod
    def failed(reason: str) -> CheckResult:
        return CheckResult(False, reason)


def dim_add(a: Dim, b: Dim) -> Dim:
    """a + b on dims (symbolic when either is a symbol)."""
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    if a == 0:
        return b
    if b == 0:
        return a
    return f"({a}+{b})"


def dim_mul(a: Dim, b: Dim) -> Dim:
    """a * b on dims."""
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    if a == 1:
        return b
    if b == 1:
        return a
    return f"({a}*{b})"


def dim_window(size: Dim, pad: int, effective_kernel: int, stride: int) -> Dim:
    """Output length of a sliding window: (size + pad - k) // stride + 1."""
    if isinstance(size, int):
        return (size + pad - effective_kernel) // stride + 1
    if pad == effective_kernel - 1 and stride == 1:
        return size
    offset = pad - effective_kernel
    sign = "+" if offset >= 0 else "-"
    return f"(({size}{sign}{abs(offset)})//{stride}+1)"


def dim_div(a: Dim, b: int) -> Dim:
    """a // b on dims (exact division expected)."""
    if isinstance(a, int):
        return a // b
    return a if b == 1 else f"({a}//{b})"


def dims_known(shape: Sequence[Dim]) -> bool:
    return all(isinstance(d, int) for d in shape)


def numel(shape: Sequence[Dim]) -> int:
    """Number of elements of a concrete shape."""
    n = 1
    for d in shape:
        if not isinstance(d, int):
            raise ShapeError(f"symbolic dim {d!r} has no element count")
        n *= d
    return n


def broadcast_shapes(*shapes: Sequence[Dim]) -> Shape:
    """NumPy/ONNX multidirectional broadcasting on dims (symbols too)."""
    rank = max(len(s) for s in shapes)
    padded = [(1,) * (rank - len(s)) + tuple(s) for s in shapes]
    out: list[Dim] = []
    for dims in zip(*padded, strict=True):
        out.append(_broadcast_dim(dims))
    return tuple(out)


def _broadcast_dim(dims: Sequence[Dim]) -> Dim:
    others = {d for d in dims if d != 1}
    if not others:
        return 1
    if len(others) > 1:
        raise ShapeError(f"cannot broadcast dims {tuple(dims)}")
    return others.pop()


def normalize_axis(axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise ShapeError(f"axis {axis} out of range for rank {rank}")
    return axis % max(rank, 1)
