"""The registry's vocabulary: model sizes, model origins and the `ModelBuilder` record."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

import onnx


class Size(enum.Enum):
    """FULL has the published shapes; SMALL keeps the structure but builds and runs in milliseconds."""

    FULL = "full"
    SMALL = "small"


class Origin(enum.Enum):
    """Which group a model belongs to."""

    ARCHITECTURE = "architecture"  # written from the published architecture (TASO's evaluation set)
    CONVERTER = "converter"  # shaped the way TF/Paddle/PyTorch converters emit graphs


@dataclass(frozen=True)
class ModelBuilder:
    """One benchmark model: how to build it and what its full size should hold."""

    name: str
    description: str
    origin: Origin
    build_fn: Callable[[Size], onnx.ModelProto]
    published_parameters: int  # learnable parameters of the FULL model in its reference
    parameters_source: str  # where `published_parameters` comes from
    version: int = 1  # bump when the builder's output changes; part of the cache key

    def build(self, size: Size) -> onnx.ModelProto:
        return self.build_fn(size)
