"""ConstFill (internal): a tensor filled with one value; literal constants in axioms (3, 6, eps)."""

import numpy as np

from taso.opspecs._internal import constant_spec
from taso.opspecs._types import ParamKind, ParamSpec

SPEC = constant_spec(
    "ConstFill",
    "ConstFill(shape, v)[i] = v",
    (ParamSpec("shape", ParamKind.INTS, ()), ParamSpec("value", ParamKind.FLOAT, 0.0)),
    lambda p: tuple(p["shape"]),  # type: ignore[arg-type]
    lambda p: np.full(tuple(p["shape"]), float(p["value"]), dtype=np.float64),  # type: ignore[arg-type]
)
