"""The exception hierarchy of taso-onnx.

Every error the library raises on purpose derives from `TasoError`. The CLI maps
`InputError` subclasses (bad model, bad path, bad option) to exit code 2 and every
other `TasoError` to exit code 1.
"""

from __future__ import annotations


def first_line(error: BaseException) -> str:
    """The first non-empty line of an error's message (its type's name if it has none)."""
    text = str(error).strip()
    return next((line.strip() for line in text.splitlines() if line.strip()), type(error).__name__)


class TasoError(Exception):
    """Root of every error raised by taso-onnx."""


class InputError(TasoError):
    """The user's input is at fault (model, path or option); exit code 2 in the CLI."""


class InvalidModelError(InputError):
    """The input is not a valid ONNX model (unreadable, truncated, fails the checker, cyclic...)."""


class UnsupportedModelError(InputError):
    """A valid model that this installation cannot handle (IR version or opset too new)."""


class UsageError(InputError):
    """An option or path given by the user cannot be honoured (e.g. output equals input)."""


class BackendError(TasoError):
    """A backend (ONNX Runtime, CUDA, ...) failed to load, run or measure a model."""


class VerificationError(TasoError):
    """A rule, axiom or optimized model failed verification."""


class NumericMismatchError(VerificationError):
    """The optimized model computes different numbers than the original."""


class TasoWarning(RuntimeWarning):
    """Something went wrong that the run worked around (a cost cache fallen back to memory...).

    `optimize_onnx` turns these into report warnings; other warnings pass through.
    """
