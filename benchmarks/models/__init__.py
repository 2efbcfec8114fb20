"""Benchmark model builders: TASO's evaluation models and converter-shaped models.

`MODELS` maps each name to a `ModelBuilder`; `build_cached` writes a model
into `benchmarks/.cache/` on first use and returns its path.
"""

from benchmarks.models._types import ModelBuilder, Origin, Size
from benchmarks.models.cache import build_cached, cache_path
from benchmarks.models.registry import MODELS
from benchmarks.models.stats import parameter_count

__all__ = [
    "MODELS",
    "ModelBuilder",
    "Origin",
    "Size",
    "build_cached",
    "cache_path",
    "parameter_count",
]
