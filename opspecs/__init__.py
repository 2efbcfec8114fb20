"""Operator specifications: one module per operator, each holding one frozen ``OpSpec``.

A spec bundles the ONNX mapping, parameter schema, shape inference, validity
check, NumPy reference semantics, Z3 encoding, enumeration hints and cost hint
of one operator.  Axioms relating operators live in ``taso.opspecs.axioms``.
"""

from taso.opspecs._elementwise import unary_spec
from taso.opspecs._registry import EXTRA_SPECS_ENV, all_specs, evaluate_op, get_spec, spec_by_name
from taso.opspecs._spec import EmitNode, OnnxNode, OpSpec
from taso.opspecs._types import (
    CheckResult,
    Cost,
    Dim,
    EnumHints,
    Exactness,
    Lowering,
    OpKind,
    ParamKind,
    ParamSource,
    ParamSpec,
    Shape,
    ShapeError,
)
from taso.opspecs._z3 import TENSOR

__all__ = [
    "evaluate_op",
    "EXTRA_SPECS_ENV",
    "TENSOR",
    "CheckResult",
    "Cost",
    "Dim",
    "EmitNode",
    "EnumHints",
    "Exactness",
    "Lowering",
    "OnnxNode",
    "OpKind",
    "OpSpec",
    "ParamKind",
    "ParamSource",
    "ParamSpec",
    "Shape",
    "ShapeError",
    "all_specs",
    "get_spec",
    "spec_by_name",
    "unary_spec",
]
