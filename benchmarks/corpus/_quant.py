"""onnxruntime.quantization.quantize_dynamic, default settings, of another corpus entry.

The source is the cached float model named by the entry's `derived_from`; the quantizer
writes QOperator-style integer ops (DynamicQuantizeLinear, ConvInteger, MatMulInteger, ...).
"""

from __future__ import annotations

from pathlib import Path

from onnxruntime.quantization import quantize_dynamic

from benchmarks.corpus import _cache
from benchmarks.corpus._registry import Entry


def export(entry: Entry, path: Path, cache: Path) -> None:
    """Quantize the cached `entry.derived_from` model into `path`."""
    if entry.derived_from is None:
        raise ValueError(f"{entry.name} names no source model")
    quantize_dynamic(_cache.model_path(cache, entry.derived_from), path)
