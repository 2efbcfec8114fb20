"""Executors and cost models: ONNX Runtime CPU/CUDA and an analytical roofline.

Check-and-measure helpers (random inputs, running, comparing, interleaved timing) and
the `Backend` protocol the search prices graphs with.
"""

from taso.backends._kernels import nchwc_block
from taso.backends._session import (
    GraphOptimization,
    ModelSource,
    ModelWithData,
    Spinning,
    max_ir_version,
    run_model,
)
from taso.backends.analytical import AnalyticalBackend
from taso.backends.compare import (
    Comparison,
    OutputComparison,
    OutputStatus,
    Tolerance,
    compare_outputs,
)
from taso.backends.cost_cache import CACHE_DIR_ENV, CostCache, CostKey, default_cache_dir
from taso.backends.graph_cost import (
    AnalyticalCostModel,
    CostSource,
    MeasuredCostModel,
    RegionRecord,
    Timing,
)
from taso.backends.inputs import make_inputs
from taso.backends.kernel_cost import KernelCostModel, KernelRecord
from taso.backends.ort_backends import OrtCpuBackend, OrtCudaBackend
from taso.backends.profiles import DEFAULT_DIM, ShapeProfile, resolve_shapes
from taso.backends.protocol import Backend
from taso.backends.registry import UnknownBackendError, backend_names, get_backend
from taso.backends.rounding import RoundingComparison, RoundingDeviation, compare_rounding
from taso.backends.semantics import OutputDeviation, SemanticComparison, compare_semantics
from taso.backends.timing import (
    InterleavedTiming,
    LatencyStats,
    measure_interleaved,
    measure_latency,
)

__all__ = [
    "nchwc_block",
    "KernelCostModel",
    "KernelRecord",
    "Timing",
    "RegionRecord",
    "MeasuredCostModel",
    "CostSource",
    "AnalyticalCostModel",
    "CACHE_DIR_ENV",
    "DEFAULT_DIM",
    "AnalyticalBackend",
    "Backend",
    "Comparison",
    "CostCache",
    "CostKey",
    "GraphOptimization",
    "InterleavedTiming",
    "LatencyStats",
    "ModelSource",
    "ModelWithData",
    "OrtCpuBackend",
    "OrtCudaBackend",
    "OutputComparison",
    "OutputStatus",
    "ShapeProfile",
    "Spinning",
    "Tolerance",
    "UnknownBackendError",
    "backend_names",
    "compare_outputs",
    "compare_semantics",
    "compare_rounding",
    "RoundingComparison",
    "RoundingDeviation",
    "OutputDeviation",
    "SemanticComparison",
    "default_cache_dir",
    "get_backend",
    "make_inputs",
    "max_ir_version",
    "measure_interleaved",
    "measure_latency",
    "resolve_shapes",
    "run_model",
]

