"""Output comparison between a reference and a candidate run: `compare_outputs`.

An element passes when `|candidate - reference| <= atol + rtol * |reference|` (NumPy's
`allclose` rule), NaN equals NaN at the same position, and infinities must match
exactly. Shape, dtype and missing outputs are reported as statuses, never raised.
`max_rel_diff` is taken over elements whose reference is non-zero (zero references are
covered by `atol`). `bit_identical` compares the raw bytes (so -0.0 != +0.0).

`run_reference` runs the original once, before the candidate is built: then a large
model's session (all its weights) and the candidate's folded weights are never in
memory together. `runnable` gives ORT an optimized model whose unchanged weights are
still the input's external data files, with the folder they are in.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

from taso.backends._session import (
    CPU_PROVIDERS,
    ModelSource,
    ModelWithData,
    Provider,
    RunTiming,
    run_model,
    run_model_timed,
)
from taso.backends.inputs import make_inputs
from taso.backends.profiles import ShapeProfile
from taso.errors import BackendError


@dataclass(frozen=True)
class ReferenceRun:
    """The original's outputs on random inputs, or the BackendError ORT raised instead.

    `timing` says how long the original took to load and to run: what checking and
    measuring a candidate will cost, known before the search starts.
    """

    inputs: Mapping[str, np.ndarray] = field(default_factory=dict)
    outputs: Mapping[str, np.ndarray] = field(default_factory=dict)
    error: BackendError | None = None
    timing: RunTiming | None = None

    def expected(self) -> Mapping[str, np.ndarray]:
        """The reference outputs; raises the BackendError of a failed run."""
        if self.error is not None:
            raise self.error
        return self.outputs


def runnable(model: onnx.ModelProto, base_dir: str | Path) -> ModelSource:
    """`model` as ORT can load it: with the folder of its external data, if it has any."""
    if any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer):
        return ModelWithData(model, Path(base_dir or "."))
    return model


def run_reference(
    model: ModelSource, *, profile: ShapeProfile | None = None, providers: tuple[Provider, ...] = CPU_PROVIDERS,
    exact_providers: tuple[Provider, ...] | None = None,
) -> ReferenceRun:
    """Make inputs for `model`, run it and time it on `providers`; a BackendError is kept, not raised.
    The expected outputs come from `exact_providers` when they differ (one more run)."""
    try:
        inputs = make_inputs(model, profile=profile)
    except BackendError as error:
        return ReferenceRun(error=error)
    try:
        run = run_model_timed(model, inputs, providers=providers)
        exact = exact_providers not in (None, providers)
        outputs = run_model(model, inputs, providers=exact_providers) if exact else run.outputs
    except BackendError as error:
        return ReferenceRun(inputs, error=error)
    return ReferenceRun(inputs, outputs, timing=run.timing)


@dataclass(frozen=True)
class Tolerance:
    """Absolute and relative tolerance; the default suits float32 reassociation."""

    atol: float = 1e-4
    rtol: float = 1e-3


class OutputStatus(enum.Enum):
    MATCH = "match"
    VALUE_MISMATCH = "value mismatch"
    NAN_MISMATCH = "NaN positions differ"
    SHAPE_MISMATCH = "shape mismatch"
    DTYPE_MISMATCH = "dtype mismatch"
    MISSING = "missing in candidate"
    UNEXPECTED = "not in reference"


@dataclass(frozen=True)
class OutputComparison:
    """How one output of the candidate compares to the reference."""

    name: str
    status: OutputStatus
    max_abs_diff: float | None = None
    max_rel_diff: float | None = None
    mismatched: int = 0
    size: int = 0
    bit_identical: bool = False
    detail: str = ""

    @property
    def passed(self) -> bool:
        return self.status is OutputStatus.MATCH

    def summary(self) -> str:
        diffs = ""
        if self.max_abs_diff is not None:
            diffs = f" max_abs={self.max_abs_diff:.3g} max_rel={self.max_rel_diff or 0.0:.3g}"
        counts = f" {self.mismatched}/{self.size} elements off" if self.mismatched else ""
        exact = " bit-identical" if self.bit_identical else ""
        detail = f" ({self.detail})" if self.detail else ""
        return f"{self.name}: {self.status.value}{diffs}{counts}{exact}{detail}"


@dataclass(frozen=True)
class Comparison:
    """Per-output comparisons and the tolerance used."""

    outputs: tuple[OutputComparison, ...]
    tolerance: Tolerance

    @property
    def passed(self) -> bool:
        return all(output.passed for output in self.outputs)

    @property
    def bit_identical(self) -> bool:
        return all(output.bit_identical for output in self.outputs)

    def by_name(self) -> dict[str, OutputComparison]:
        return {output.name: output for output in self.outputs}

    def max_abs_diffs(self) -> dict[str, float | None]:
        return {output.name: output.max_abs_diff for output in self.outputs}

    def summary(self) -> str:
        return "\n".join(output.summary() for output in self.outputs)


def compare_outputs(
    reference: Mapping[str, np.ndarray],
    candidate: Mapping[str, np.ndarray],
    *,
    tolerance: Tolerance = Tolerance(),
) -> Comparison:
    """Compare every output of `reference` with the same-named output of `candidate`."""
    results = [
        compare_arrays(name, np.asarray(value), candidate.get(name), tolerance)
        for name, value in reference.items()
    ]
    results += [
        OutputComparison(name, OutputStatus.UNEXPECTED)
        for name in candidate
        if name not in reference
    ]
    return Comparison(tuple(results), tolerance)


def compare_arrays(
    name: str, reference: np.ndarray, candidate: np.ndarray | None, tolerance: Tolerance
) -> OutputComparison:
    """Compare one pair of arrays (the candidate may be missing)."""
    if candidate is None:
        return OutputComparison(name, OutputStatus.MISSING)
    candidate = np.asarray(candidate)
    if reference.dtype != candidate.dtype:
        detail = f"{reference.dtype} vs {candidate.dtype}"
        return OutputComparison(name, OutputStatus.DTYPE_MISMATCH, detail=detail)
    if reference.shape != candidate.shape:
        detail = f"{reference.shape} vs {candidate.shape}"
        return OutputComparison(name, OutputStatus.SHAPE_MISMATCH, detail=detail)
    identical = _bit_identical(reference, candidate)
    if not _is_numeric(reference):
        equal = identical or bool(np.array_equal(reference, candidate))
        status = OutputStatus.MATCH if equal else OutputStatus.VALUE_MISMATCH
        return OutputComparison(name, status, size=reference.size, bit_identical=identical)
    return _compare_numeric(name, reference, candidate, tolerance, identical)


def _compare_numeric(
    name: str, reference: np.ndarray, candidate: np.ndarray, tolerance: Tolerance, identical: bool
) -> OutputComparison:
    ref = reference.astype(np.float64)
    cand = candidate.astype(np.float64)
    ref_nan, cand_nan = np.isnan(ref), np.isnan(cand)
    nan_mismatch = int(np.count_nonzero(ref_nan != cand_nan))
    both = ~(ref_nan | cand_nan)
    finite = both & np.isfinite(ref) & np.isfinite(cand)
    inf_mismatch = both & ~finite & (ref != cand)
    with np.errstate(invalid="ignore", over="ignore"):
        abs_diff = np.where(finite, np.abs(cand - ref), 0.0)
        abs_diff[inf_mismatch] = np.inf
        off = inf_mismatch | (abs_diff > tolerance.atol + tolerance.rtol * np.abs(ref))
        nonzero = finite & (ref != 0)
        rel = abs_diff[nonzero] / np.abs(ref[nonzero])
    mismatched = int(np.count_nonzero(off)) + nan_mismatch
    status = OutputStatus.MATCH
    if nan_mismatch:
        status = OutputStatus.NAN_MISMATCH
    elif mismatched:
        status = OutputStatus.VALUE_MISMATCH
    return OutputComparison(
        name,
        status,
        max_abs_diff=float(abs_diff.max(initial=0.0)),
        max_rel_diff=float(rel.max(initial=0.0)),
        mismatched=mismatched,
        size=reference.size,
        bit_identical=identical,
    )


def _is_numeric(array: np.ndarray) -> bool:
    return array.dtype.kind in "biuf"


def _bit_identical(reference: np.ndarray, candidate: np.ndarray) -> bool:
    if reference.dtype.kind == "O":
        return bool(np.array_equal(reference, candidate))
    return np.ascontiguousarray(reference).tobytes() == np.ascontiguousarray(candidate).tobytes()
