"""ONNX Runtime backends: `OrtCpuBackend` (the default) and `OrtCudaBackend`.

Costs are measured the way users run the model: ORT_ENABLE_ALL, so ORT's own fusions
are part of every measurement and a rewrite that blocks a fusion is seen as slower.
A cost is the median of `repeats` timed runs on deterministic random inputs
(`make_inputs`), with intra-op spinning off (see `timing`) so that costs measured one
after another in one process do not disturb each other. With a signature the cost is cached persistently (see `cost_cache`),
keyed by backend name, device, onnxruntime version and signature.
"""

from __future__ import annotations

import functools
import platform
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
import onnxruntime as ort

from taso.backends._session import (
    ModelSource,
    Provider,
    SessionConfig,
    call_ort,
    create_session,
    identity_probe_model,
    max_ir_version,
    run_session,
)
from taso.backends.cost_cache import CostCache, CostKey
from taso.backends.inputs import make_inputs
from taso.backends.profiles import ShapeProfile
from taso.backends.timing import DEFAULT_REPEATS, DEFAULT_WARMUP, measure_latency
from taso.errors import BackendError

_CUDA = "CUDAExecutionProvider"
_CPU = "CPUExecutionProvider"


@dataclass(frozen=True)
class _OrtBackend:
    """Shared run / cost_of logic; subclasses fix the providers and the device string."""

    threads: int = 2
    repeats: int = DEFAULT_REPEATS
    warmup: int = DEFAULT_WARMUP
    cache: CostCache | None = field(default_factory=CostCache)

    name: ClassVar[str] = ""

    @property
    def providers(self) -> tuple[Provider, ...]:
        raise NotImplementedError

    @property
    def device(self) -> str:
        raise NotImplementedError

    @property
    def exact_providers(self) -> tuple[Provider, ...]:
        """The providers the check compares outputs on: float32 arithmetic as the model
        states it. The same as `providers` unless the device rounds float32 by default."""
        return self.providers

    def run(self, model: ModelSource, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        config = SessionConfig(threads=self.threads, providers=self.providers)
        return run_session(create_session(model, config), inputs)

    def cost_of(
        self,
        model: ModelSource,
        *,
        profile: ShapeProfile | None = None,
        signature: str | None = None,
    ) -> float:
        key = self._key(signature, profile)
        cached = self.cache.get(key) if key is not None and self.cache is not None else None
        if cached is not None:
            return cached
        cost = self.measure(model, make_inputs(model, profile=profile))
        if key is not None and self.cache is not None:
            self.cache.put(key, cost)
        return cost

    def measure(self, model: ModelSource, inputs: Mapping[str, np.ndarray]) -> float:
        """Median latency of `model` on `inputs` in milliseconds (never cached)."""
        stats = measure_latency(
            model,
            inputs,
            repeats=self.repeats,
            warmup=self.warmup,
            threads=self.threads,
            providers=self.providers,
        )
        return stats.median_ms

    def _key(self, signature: str | None, profile: ShapeProfile | None) -> CostKey | None:
        if signature is None:
            return None
        full = f"{signature}|profile={profile}" if profile else signature
        return CostKey(self.name, self.device, ort.__version__, full)


@dataclass(frozen=True)
class OrtCpuBackend(_OrtBackend):
    """ONNX Runtime on CPU with `threads` intra-op threads."""

    name: ClassVar[str] = "ort-cpu"

    @property
    def providers(self) -> tuple[Provider, ...]:
        return (_CPU,)

    @property
    def device(self) -> str:
        return f"{_cpu_model()}{_vector_isa()} x{self.threads} threads"


@dataclass(frozen=True)
class OrtCudaBackend(_OrtBackend):
    """ONNX Runtime with the CUDA execution provider (needs onnxruntime-gpu and a GPU).

    Inputs and outputs travel through host memory on every run, so measured costs
    include the copies (as a plain `session.run` user sees them).
    """

    device_id: int = 0
    name: ClassVar[str] = "ort-cuda"

    def __post_init__(self) -> None:
        if not self.available(self.device_id):
            raise BackendError(
                f"ort-cuda is unavailable: needs onnxruntime-gpu and CUDA device {self.device_id} "
                f"(installed providers: {', '.join(ort.get_available_providers())})"
            )

    @staticmethod
    def available(device_id: int = 0) -> bool:
        """True when onnxruntime-gpu is installed and a session really runs on CUDA."""
        return _cuda_works(device_id)

    @property
    def providers(self) -> tuple[Provider, ...]:
        return ((_CUDA, {"device_id": str(self.device_id)}), _CPU)

    @property
    def exact_providers(self) -> tuple[Provider, ...]:
        """CUDA with TF32 off. ORT's CUDA provider rounds float32 convolution and MatMul
        inputs to TF32 by default (Ampere and later): on an H100 the PP-OCRv4 detector's
        own outputs then differ by 1.1e-2 between two runs of different graphs, which
        fails every check; with TF32 off they agree as on the CPU. Timing keeps the
        default, as deployments run it."""
        return ((_CUDA, {"device_id": str(self.device_id), "use_tf32": "0"}), _CPU)

    @property
    def device(self) -> str:
        return f"cuda:{self.device_id}"


@functools.cache
def _cuda_works(device_id: int) -> bool:
    if _CUDA not in ort.get_available_providers():
        return False
    options = ort.SessionOptions()
    options.log_severity_level = 4
    providers = [(_CUDA, {"device_id": str(device_id)})]
    try:
        session = call_ort(
            "probing CUDA",
            lambda: ort.InferenceSession(
                identity_probe_model(max_ir_version()), options, providers=providers
            ),
        )
    except BackendError:
        return False
    return _CUDA in session.get_providers()


@functools.cache
def _cpuinfo(key: str) -> str | None:
    """The value of the first `key` line of /proc/cpuinfo (None: no such line or file)."""
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.is_file():
        return None
    return next((line.partition(":")[2].strip() for line in cpuinfo.read_text(errors="replace").splitlines()
                 if line.startswith(key)), None)


def _vector_isa() -> str:
    """" (AVX-512)" or " (AVX2)" from the CPU's flags, or nothing: part of the device label,
    since ORT's kernels and NCHWc block follow it and hosts of either kind can report the
    same model name ("AMD EPYC" under KVM, seen with both), so that a cost cache shared by
    such machines never replays one's verdicts on the other."""
    flags = (_cpuinfo("flags") or "").split()
    return " (AVX-512)" if "avx512f" in flags else " (AVX2)" if "avx2" in flags else ""


def _cpu_model() -> str:
    return _cpuinfo("model name") or platform.processor() or platform.machine() or "unknown cpu"
