"""taso-onnx: verified graph substitutions that make ONNX models faster.

The public API is what this module exports (pinned by tests/test_public_api.py);
everything else is private even where its name has no underscore.
"""

from importlib.util import find_spec as _find_spec

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


def _has_onnxruntime() -> bool:
    try:
        return _find_spec("onnxruntime") is not None
    except (ValueError, AttributeError):  # sys.modules holds None or a module without a spec
        return False


if not _has_onnxruntime():  # it comes from an extra (pyproject.toml says why)
    raise ImportError("taso-onnx needs ONNX Runtime: pip install 'taso-onnx[cpu]' "
                      "(or 'taso-onnx[gpu]' for the CUDA backend)")

from taso.pipeline import OptimizeResult, optimize_onnx  # noqa: E402
from taso.report import CheckStatus, Decision, Latency, Report, StopReason  # noqa: E402

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
