"""Outputs that differ from the original by no more than the original's own float32 rounding.

The plain comparison (`compare_outputs`) allows `atol + rtol * |reference|` an element:
right for a well-conditioned model, where a rewrite that reassociates float32 arithmetic
(a BatchNormalization folded into a conv, parallel conv branches merged into one) moves
each output by a few units in its last place. It is wrong where an output element is a
small difference of large terms. A MobileOne-S0 exported in its training form (timm,
torch.onnx, random weights) sums three to five conv branches a block with no
normalization after the sum, so its logits reach 1.2e7; merging the branches into one
conv (3.2x faster as measured) moved one logit of about 8,400 by 12.5, refused by the
plain comparison (relative 1.5e-3), while the original itself, with each float32 weight
moved by at most one machine epsilon, moved by 4.5-9 (up to 13 on other inputs).

`compare_rounding` measures that sensitivity, the *rounding floor*: the original is run
`FLOOR_RUNS` more times with every float32 weight it holds (initializers and `Constant`
values; external data is left alone) multiplied by `1 + eps * u`, u uniform in [-1, 1],
one draw a run. Each run's outputs are compared with the reference; the floor of an
output is the largest distance any element moved, and the mean distance. The candidate
passes when, for every output the plain comparison refused,

1. every element is within `FLOOR_RATIO` times the floor (plus the plain tolerance), and
2. its mean distance is within `FLOOR_RATIO` times the floor's mean (plus `atol`),

NaNs and infinities where the reference has them, and nowhere else; and no output is
excused whose floor exceeds `MAX_FLOOR_SHARE` of its largest magnitude (the weights' moves
flipped a discrete choice: that measures no rounding). A well-conditioned
output's floor is a few units in the last place, so the bound stays the plain one there;
a wrong rewrite moves outputs by a fraction of their size, far beyond either.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from taso.backends._session import (
    CPU_PROVIDERS,
    ModelSource,
    ModelWithData,
    Provider,
    load_structure,
    run_model,
)
from taso.backends.compare import Comparison, OutputStatus, Tolerance
from taso.backends.semantics import PLAIN, distance

FLOOR_RUNS = 2
"""Perturbed runs of the original (each a fresh draw of the weights' last-place moves)."""

FLOOR_RATIO = 2.0
"""How many times the original's own rounding floor a candidate's distance may be."""

MAX_FLOOR_SHARE = 1e-2
"""A floor above this share of the output's largest magnitude is not rounding: a weight's
last-place move flipped something discrete (a float cast to an integer pad, a Floor, a
TopK's choice), and such an output is not excused. MobileOne-S0's floor was 1.7e-6 of it."""

_EPS = float(np.finfo(np.float32).eps)


@dataclass(frozen=True)
class RoundingDeviation:
    """One output: how far the original moved under rounding-level weight moves (its
    floor), how far the candidate is from the original, and whether that is within bounds."""

    name: str
    floor_max: float
    floor_mean: float
    candidate_max: float
    candidate_mean: float
    passed: bool

    def summary(self) -> str:
        return (f"{self.name}: largest {self.candidate_max:.3g} against a rounding floor of {self.floor_max:.3g}, "
                f"mean {self.candidate_mean:.3g} against {self.floor_mean:.3g}")


@dataclass(frozen=True)
class RoundingComparison:
    deviations: tuple[RoundingDeviation, ...]

    @property
    def passed(self) -> bool:
        return bool(self.deviations) and all(deviation.passed for deviation in self.deviations)

    def summary(self) -> str:
        return "; ".join(deviation.summary() for deviation in self.deviations)


def compare_rounding(
    original: ModelSource,
    inputs: Mapping[str, np.ndarray],
    comparison: Comparison,
    original_outputs: Mapping[str, np.ndarray],
    candidate_outputs: Mapping[str, np.ndarray],
    *,
    providers: tuple[Provider, ...] = CPU_PROVIDERS,
    tolerance: Tolerance = PLAIN,
    runs: int = FLOOR_RUNS,
) -> RoundingComparison:
    """Whether the outputs `comparison` refused (only value mismatches qualify) are within
    the original's own rounding floor (see the module docstring): `runs` more runs of the
    original, its weights moved in their last place."""
    refused = [output.name for output in comparison.outputs if not output.passed]
    if any(output.status is not OutputStatus.VALUE_MISMATCH for output in comparison.outputs if not output.passed):
        return RoundingComparison(())
    model, folder = _structure(original)
    floors = [run_model(_with_folder(perturbed(model, seed), folder), inputs, providers=providers)
              for seed in range(runs)]
    return RoundingComparison(tuple(
        _deviation(name, original_outputs[name], candidate_outputs[name], [floor[name] for floor in floors], tolerance)
        for name in refused))


def perturbed(model: onnx.ModelProto, seed: int) -> onnx.ModelProto:
    """A copy of `model` whose float32 weights held in the file (initializers and
    `Constant` values of the main graph) are each multiplied by `1 + eps * u`, u uniform in
    [-1, 1]: moved by at most about one unit in the last place. `model` is not changed."""
    rng = np.random.default_rng(seed)
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for tensor in copy.graph.initializer:
        _perturb(tensor, rng)
    for node in copy.graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            for attribute in node.attribute:
                if attribute.name == "value" and attribute.type == onnx.AttributeProto.TENSOR:
                    _perturb(attribute.t, rng)
    return copy


def _perturb(tensor: onnx.TensorProto, rng: np.random.Generator) -> None:
    if tensor.data_type != onnx.TensorProto.FLOAT or tensor.data_location == onnx.TensorProto.EXTERNAL:
        return
    values = numpy_helper.to_array(tensor).astype(np.float64)
    moved = (values * (1.0 + _EPS * rng.uniform(-1.0, 1.0, values.shape))).astype(np.float32)
    tensor.CopyFrom(numpy_helper.from_array(moved, tensor.name))


def _structure(original: ModelSource) -> tuple[onnx.ModelProto, Path | None]:
    """The original's proto (external data not loaded) and the folder its data is in."""
    if isinstance(original, onnx.ModelProto):
        return original, None
    if isinstance(original, ModelWithData):
        return original.model, original.folder
    return load_structure(original), Path(os.fspath(original)).parent


def _with_folder(model: onnx.ModelProto, folder: Path | None) -> ModelSource:
    return model if folder is None else ModelWithData(model, folder)


def _deviation(name: str, reference: np.ndarray, candidate: np.ndarray, floors: list[np.ndarray],
               tolerance: Tolerance) -> RoundingDeviation:
    reference, candidate = np.asarray(reference), np.asarray(candidate)
    if reference.dtype.kind != "f" or reference.shape != candidate.shape or reference.dtype != candidate.dtype:
        return RoundingDeviation(name, 0.0, 0.0, 0.0, 0.0, passed=False)
    exact = reference.astype(np.float64)
    moved = [distance(np.asarray(floor), exact) for floor in floors]
    from_candidate = distance(candidate, exact)
    if from_candidate is None or any(m is None or m.shape != exact.shape for m in moved):
        return RoundingDeviation(name, 0.0, 0.0, 0.0, 0.0, passed=False)
    floor_max = max(float(m.max(initial=0.0)) for m in moved)  # type: ignore[union-attr]
    floor_mean = max(float(m.mean()) if m.size else 0.0 for m in moved)  # type: ignore[union-attr]
    finite_reference = np.abs(np.nan_to_num(exact, posinf=0.0, neginf=0.0))
    rounding = floor_max <= MAX_FLOOR_SHARE * float(finite_reference.max(initial=0.0))  # else a discrete flip
    bound = FLOOR_RATIO * floor_max + tolerance.atol + tolerance.rtol * finite_reference
    candidate_mean = float(from_candidate.mean()) if from_candidate.size else 0.0
    passed = (rounding and bool(np.all(from_candidate <= bound))
              and candidate_mean <= FLOOR_RATIO * floor_mean + tolerance.atol)
    return RoundingDeviation(name, floor_max, floor_mean, float(from_candidate.max(initial=0.0)), candidate_mean, passed)
