"""The backend table: each name the `--backend` option takes, and what it means.

| name         | check, judge, decision run on    | candidates priced by                        | sweeps judged |
|--------------|----------------------------------|---------------------------------------------|---------------|
| `ort-cpu`    | ORT CPU                          | the kernels ORT CPU compiles (KernelCostModel) | yes        |
| `ort-cuda`   | ORT CUDA (onnxruntime-gpu + GPU) | changed regions measured on CUDA (MeasuredCostModel) | yes  |
| `analytical` | ORT CPU (the check only)         | the analytical model, no device             | no            |

`ort-cuda` without onnxruntime-gpu or a working CUDA device is refused (BackendError;
the pipeline turns it into a one-line usage error): it never quietly runs on the CPU.
`get_backend(name)` gives the runner (`Backend`: `run`, `cost_of`, `device`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from taso.backends.analytical import AnalyticalBackend
from taso.backends.ort_backends import OrtCpuBackend, OrtCudaBackend
from taso.backends.protocol import Backend
from taso.errors import UsageError


class Pricing(enum.Enum):
    """How the search prices candidate graphs."""

    KERNELS = "the kernels ONNX Runtime CPU compiles, each profiled once in context"
    MEASURED = "the changed regions, measured on the backend's device"
    ANALYTICAL = "FLOPs and bytes moved (a roofline estimate, no device)"


@dataclass(frozen=True)
class BackendSpec:
    """What a backend name means for the optimize pipeline."""

    name: str
    runner: Callable[[], OrtCpuBackend | OrtCudaBackend]
    """The ORT device the check, the sweep judge and the measured decision run on; raises
    BackendError when that device is missing."""
    pricing: Pricing
    judges_sweeps: bool
    """Whether rule sweeps are judged end to end by measurement on the runner's device."""


BACKENDS: dict[str, BackendSpec] = {
    "ort-cpu": BackendSpec("ort-cpu", OrtCpuBackend, Pricing.KERNELS, judges_sweeps=True),
    "ort-cuda": BackendSpec("ort-cuda", OrtCudaBackend, Pricing.MEASURED, judges_sweeps=True),
    "analytical": BackendSpec("analytical", OrtCpuBackend, Pricing.ANALYTICAL, judges_sweeps=False),
}

_FACTORIES: dict[str, Callable[[], Backend]] = {
    OrtCpuBackend.name: OrtCpuBackend,
    OrtCudaBackend.name: OrtCudaBackend,
    AnalyticalBackend.name: AnalyticalBackend,
}


class UnknownBackendError(UsageError, ValueError):
    """The backend name is not one of `backend_names()`."""


def backend_names() -> tuple[str, ...]:
    """Every name `get_backend` accepts."""
    return tuple(BACKENDS)


def backend_spec(name: str) -> BackendSpec:
    """The table's row for `name`; UnknownBackendError for a name it lacks."""
    spec = BACKENDS.get(name)
    if spec is None:
        raise UnknownBackendError(f"unknown backend {name!r}; choose one of: {', '.join(backend_names())}")
    return spec


def get_backend(name: str) -> Backend:
    """A backend with default settings; BackendError if its device is unavailable."""
    backend_spec(name)
    return _FACTORIES[name]()
