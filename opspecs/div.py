"""Div: broadcasting elementwise quotient (integers truncate toward zero, as in ONNX)."""

import numpy as np

from taso.opspecs._elementwise import binary_spec


def _divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu" and np.asarray(b).dtype.kind in "iu":
        quotient = np.abs(a) // np.abs(b)
        return (np.sign(a) * np.sign(b) * quotient).astype(np.result_type(a, b))
    return a / b


SPEC = binary_spec("Div", "Div(a, b) = a / b  (NumPy broadcasting; usually b constant)", _divide)
