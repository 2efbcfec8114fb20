"""onnxruntime.quantization of another corpus entry, default settings.

The source is the cached float model named by the entry's `derived_from`; the entry's
`architecture` names the quantizer:
- `quantize_dynamic` writes QOperator-style integer ops (DynamicQuantizeLinear,
  ConvInteger, MatMulInteger, ...);
- `quantize_static` with `QuantFormat.QDQ` writes QuantizeLinear/DequantizeLinear pairs
  around the float ops, its activation ranges calibrated (MinMax, the default) on the
  `_calibrate` recipe's random inputs, fed one sample (batch 1) at a time: the corpus
  models have a static batch dim of 1.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
from onnxruntime.quantization import (
    CalibrationDataReader,
    QuantFormat,
    quantize_dynamic,
    quantize_static,
)

from benchmarks.corpus import _cache, _calibrate
from benchmarks.corpus._registry import Entry


def calibration_samples(entry: Entry) -> Iterator[dict[str, np.ndarray]]:
    """Every sample of the calibration recipe's batches, each as a batch of one."""
    names = [name for name, _ in entry.inputs]
    for batch in _calibrate.random_batches(entry.inputs, entry.input_ranges):
        for row in range(_calibrate.BATCH_SIZE):
            yield {name: array[row : row + 1] for name, array in zip(names, batch, strict=True)}


class RandomReader(CalibrationDataReader):
    """ORT's calibration reader over `calibration_samples`."""

    def __init__(self, entry: Entry) -> None:
        self._samples = calibration_samples(entry)

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._samples, None)


def _dynamic(entry: Entry, source: Path, path: Path) -> None:
    quantize_dynamic(source, path)


def _static_qdq(entry: Entry, source: Path, path: Path) -> None:
    quantize_static(source, path, RandomReader(entry), quant_format=QuantFormat.QDQ)


_QUANTIZERS = {"quantize_dynamic": _dynamic, "quantize_static": _static_qdq}


def export(entry: Entry, path: Path, cache: Path) -> None:
    """Quantize the cached `entry.derived_from` model into `path`."""
    if entry.derived_from is None:
        raise ValueError(f"{entry.name} names no source model")
    _QUANTIZERS[entry.architecture](entry, _cache.model_path(cache, entry.derived_from), path)
