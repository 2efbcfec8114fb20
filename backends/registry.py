"""Backends by name: `get_backend("ort-cpu" | "ort-cuda" | "analytical")`."""

from __future__ import annotations

from collections.abc import Callable

from taso.backends.analytical import AnalyticalBackend
from taso.backends.ort_backends import OrtCpuBackend, OrtCudaBackend
from taso.backends.protocol import Backend
from taso.errors import UsageError

_FACTORIES: dict[str, Callable[[], Backend]] = {
    OrtCpuBackend.name: OrtCpuBackend,
    OrtCudaBackend.name: OrtCudaBackend,
    AnalyticalBackend.name: AnalyticalBackend,
}


class UnknownBackendError(UsageError, ValueError):
    """The backend name is not one of `backend_names()`."""


def backend_names() -> tuple[str, ...]:
    """Every name `get_backend` accepts."""
    return tuple(_FACTORIES)


def get_backend(name: str) -> Backend:
    """A backend with default settings; BackendError if its device is unavailable."""
    factory = _FACTORIES.get(name)
    if factory is None:
        known = ", ".join(backend_names())
        raise UnknownBackendError(f"unknown backend {name!r}; choose one of: {known}")
    return factory()
