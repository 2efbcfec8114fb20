"""Outputs that differ from the original as ORT runs it, judged against what both models compute.

ORT does not run a model as the ONNX spec writes it: with its graph optimizations it fuses
a quantized model's DequantizeLinear -> op -> QuantizeLinear groups into integer kernels
(QLinearConv, QLinearAdd, ...) whose rounding, and on AVX2 whose u8 x s8 products
(saturating in pairs), differ from the float ops they replace. A rewrite that is exact in
the spec's semantics can change which groups ORT fuses, and so the outputs as ORT runs
them. On three real QDQ exports (torchvision ResNet-18, EfficientNet-B0, MobileNetV3-large,
onnxruntime.quantization defaults) written with uint8 activations (`canonical/qdq-uint8-
activations`, exact bit for bit when each op runs as the spec writes it), the outputs
under ORT_ENABLE_ALL moved by up to 0.024, 0.021 and 0.002 from the original's, while the
original itself, under ORT_ENABLE_ALL, was 0.27-0.30, 0.041-0.047 and 0.002 from the
spec's values: the rewrite's change was smaller than ORT's own.

`compare_semantics` is asked only where the plain comparison failed. The candidate passes
when

1. both models, run with no graph optimization (ORT_DISABLE_ALL: each op as the spec
   writes it), compute the same outputs within the plain tolerance: the rewrite keeps
   what the model computes; and
2. as ORT runs them, the candidate is no further from those values than the original is:
   for each float output, every element within `MAX_RATIO` times the original's largest
   distance (plus the plain tolerance), and the mean distance within `MEAN_RATIO` times
   the original's. Non-float outputs must equal the original's.

Over four inputs each, the three exports' candidates stayed within 1.13x (largest) and
1.03x (mean) of the original's distance. A hand-built residual block whose int8 weights
span the full range, fused by ORT only once written as uint8, moved 4-8 (output scale
0.08) where the original moved none: refused by (2), as is any rewrite that changes the
spec's values, by (1).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from taso.backends._session import (
    CPU_PROVIDERS,
    GraphOptimization,
    ModelSource,
    Provider,
    run_model,
)
from taso.backends.compare import Comparison, Tolerance, compare_outputs

PLAIN = Tolerance()
"""The plain comparison's tolerance (`compare_outputs`' default)."""

MAX_RATIO = 1.5
"""An element of the candidate may be this many times the original's largest distance from
the spec's values (a quantized output moves by whole steps: one more step than the
original's largest, 2-3 steps, is within it)."""

MEAN_RATIO = 1.25
"""The candidate's mean distance from the spec's values may be this many times the original's."""


@dataclass(frozen=True)
class OutputDeviation:
    """One output's distance from the spec's values: the original's and the candidate's, as ORT runs them."""

    name: str
    original_max: float
    candidate_max: float
    original_mean: float
    candidate_mean: float
    passed: bool

    def summary(self) -> str:
        return (f"{self.name}: largest {self.candidate_max:.3g} against the original's {self.original_max:.3g}, "
                f"mean {self.candidate_mean:.3g} against {self.original_mean:.3g}")


@dataclass(frozen=True)
class SemanticComparison:
    """`unoptimized`: candidate against original, both run with no graph optimization;
    `deviations`: how far each, as ORT runs it, is from the original run that way."""

    unoptimized: Comparison
    deviations: tuple[OutputDeviation, ...]

    @property
    def passed(self) -> bool:
        return self.unoptimized.passed and all(deviation.passed for deviation in self.deviations)

    def summary(self) -> str:
        if not self.unoptimized.passed:
            return "run unoptimized, the models compute different values: " + self.unoptimized.summary()
        return "; ".join(deviation.summary() for deviation in self.deviations)


def compare_semantics(
    original: ModelSource,
    candidate: ModelSource,
    inputs: Mapping[str, np.ndarray],
    original_outputs: Mapping[str, np.ndarray],
    candidate_outputs: Mapping[str, np.ndarray],
    *,
    providers: tuple[Provider, ...] = CPU_PROVIDERS,
    tolerance: Tolerance = PLAIN,
) -> SemanticComparison:
    """Whether the candidate's outputs (`candidate_outputs`, as ORT runs it) differ from
    the original's (`original_outputs`) only as ORT's own kernels make the original
    differ from the spec's values (see the module docstring): two more runs, unoptimized."""
    spec = run_model(original, inputs, optimization=GraphOptimization.DISABLE, providers=providers)
    unoptimized = run_model(candidate, inputs, optimization=GraphOptimization.DISABLE, providers=providers)
    return SemanticComparison(compare_outputs(spec, unoptimized, tolerance=tolerance),
                              output_deviations(spec, original_outputs, candidate_outputs, tolerance))


def output_deviations(
    spec: Mapping[str, np.ndarray],
    original: Mapping[str, np.ndarray],
    candidate: Mapping[str, np.ndarray],
    tolerance: Tolerance = PLAIN,
) -> tuple[OutputDeviation, ...]:
    """Per output of `spec` (the original run unoptimized): the original's and the
    candidate's distance from it, and whether the candidate's is within bounds."""
    return tuple(_deviation(name, np.asarray(value), original.get(name), candidate.get(name), tolerance)
                 for name, value in spec.items())


def _deviation(name: str, spec: np.ndarray, original: np.ndarray | None, candidate: np.ndarray | None,
               tolerance: Tolerance) -> OutputDeviation:
    if original is None or candidate is None:
        return OutputDeviation(name, 0.0, 0.0, 0.0, 0.0, passed=False)
    original, candidate = np.asarray(original), np.asarray(candidate)
    if not (spec.shape == original.shape == candidate.shape and spec.dtype == original.dtype == candidate.dtype):
        return OutputDeviation(name, 0.0, 0.0, 0.0, 0.0, passed=False)
    if spec.dtype.kind != "f":
        return OutputDeviation(name, 0.0, 0.0, 0.0, 0.0, passed=bool(np.array_equal(original, candidate)))
    exact = spec.astype(np.float64)
    from_original, from_candidate = distance(original, exact), distance(candidate, exact)
    if from_original is None or from_candidate is None:  # NaN or infinity where the spec has none
        return OutputDeviation(name, 0.0, 0.0, 0.0, 0.0, passed=False)
    largest = float(from_original.max(initial=0.0))
    bound = MAX_RATIO * largest + tolerance.atol + tolerance.rtol * np.abs(np.nan_to_num(exact, posinf=0.0, neginf=0.0))
    mean_original = float(from_original.mean()) if from_original.size else 0.0
    mean_candidate = float(from_candidate.mean()) if from_candidate.size else 0.0
    passed = bool(np.all(from_candidate <= bound)) and mean_candidate <= MEAN_RATIO * mean_original + tolerance.atol
    return OutputDeviation(name, largest, float(from_candidate.max(initial=0.0)), mean_original, mean_candidate, passed)


def distance(values: np.ndarray, exact: np.ndarray) -> np.ndarray | None:
    """|values - exact| element by element (0 where both are the same NaN or infinity);
    None where a NaN or an infinity of one is not the other's."""
    got = values.astype(np.float64)
    same_special = (np.isnan(got) & np.isnan(exact)) | (np.isinf(got) & (got == exact))
    finite = np.isfinite(got) & np.isfinite(exact)
    if not np.all(same_special | finite):
        return None
    with np.errstate(invalid="ignore"):
        return np.where(finite, np.abs(got - exact), 0.0)
