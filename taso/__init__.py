"""taso-onnx: verified graph substitutions that make ONNX models faster.

The public API is what this module exports (pinned by tests/test_public_api.py);
everything else is private even where its name has no underscore.
"""

from taso.errors import (
    BackendError,
    InputError,
    InvalidModelError,
    NumericMismatchError,
    TasoError,
    UnsupportedModelError,
    UsageError,
    VerificationError,
)

try:
    from taso.pipeline import OptimizeResult, optimize_onnx
except ModuleNotFoundError as missing:  # ONNX Runtime comes from an extra (pyproject.toml says why)
    if missing.name != "onnxruntime":
        raise
    raise ImportError("taso-onnx needs ONNX Runtime: pip install 'taso-onnx[cpu]' "
                      "(or 'taso-onnx[gpu]' for the CUDA backend)") from None
from taso.report import CheckStatus, Decision, Latency, Report, StopReason

__all__ = [
    "BackendError",
    "CheckStatus",
    "Decision",
    "InputError",
    "InvalidModelError",
    "Latency",
    "NumericMismatchError",
    "OptimizeResult",
    "Report",
    "StopReason",
    "TasoError",
    "UnsupportedModelError",
    "UsageError",
    "VerificationError",
    "optimize_onnx",
]
