"""The backend protocol: what the search and the checks need from an executor.

A backend runs a model on inputs and prices a model (for now a whole ModelProto; the
search will refine this into a subgraph cost). Costs are milliseconds, lower is better;
comparable between calls of one backend, not across backends.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

import numpy as np

from taso.backends._session import ModelSource
from taso.backends.profiles import ShapeProfile


@runtime_checkable
class Backend(Protocol):
    """An executor and cost model (ORT CPU, ORT CUDA, analytical)."""

    @property
    def name(self) -> str:
        """Registry name, e.g. "ort-cpu"."""
        ...

    @property
    def device(self) -> str:
        """What the costs were measured on, e.g. a CPU model and thread count."""
        ...

    def run(self, model: ModelSource, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Outputs of one run of `model`, by name."""
        ...

    def cost_of(
        self,
        model: ModelSource,
        *,
        profile: ShapeProfile | None = None,
        signature: str | None = None,
    ) -> float:
        """Cost of `model` in milliseconds under `profile`.

        With a `signature` (a string that identifies the model and its shapes), the
        backend may answer from, and record into, its persistent cost cache.
        """
        ...
