"""ConstIdentityMatrix (internal): the n x n identity matrix (TASO's const_imm)."""

import numpy as np

from taso.opspecs._internal import constant_spec
from taso.opspecs._types import ParamKind, ParamSpec

SPEC = constant_spec(
    "ConstIdentityMatrix",
    "ConstIdentityMatrix(n)[i, j] = 1 if i == j else 0",
    (ParamSpec("n", ParamKind.INT, None),),
    lambda p: (int(p["n"]), int(p["n"])),  # type: ignore[call-overload]
    lambda p: np.eye(int(p["n"]), dtype=np.float64),  # type: ignore[call-overload]
)
