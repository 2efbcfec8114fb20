"""ConstOnes (internal): the all-ones tensor of a given shape (TASO's const_one)."""

import numpy as np

from taso.opspecs._internal import constant_spec
from taso.opspecs._types import ParamKind, ParamSpec

SPEC = constant_spec(
    "ConstOnes",
    "ConstOnes(shape)[i] = 1",
    (ParamSpec("shape", ParamKind.INTS, None),),
    lambda p: tuple(p["shape"]),  # type: ignore[arg-type]
    lambda p: np.ones(tuple(p["shape"]), dtype=np.float64),  # type: ignore[arg-type]
)
