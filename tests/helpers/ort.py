"""The ONNX Runtime oracle: run a graph or model on ORT's CPU provider and compare outputs.

- `assert_same_outputs(before, after)`: two taso Graphs, exported (folding weight
  transforms), fully checked and run on the same random inputs.
- `run_on_ort(model, inputs)`: a ModelProto, with the ORT transformers that are wrong
  (not taso) turned off; `assert_same_on_ort` compares an optimized model with its
  original on that oracle (validity, interface, outputs relative to their scale).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
import onnxruntime as ort

from taso.ir import Graph
from taso.pipeline._export import export

ORT_BROKEN_FUSIONS = ("ConvAddActivationFusion",)
"""ORT graph transformers the oracle turns off because they are wrong, not taso: in ORT 1.31,
ConvAddActivationFusion folds a grouped, biased Conv into the Add that reads it and drops the
Conv's output even when it is a graph output, so the *unoptimized* model fails to load ("Failed
to find node output or a constant initializer producing output"). Minimal case:
tests/regressions/test_ort_workarounds.py."""


# ----- taso Graphs --------------------------------------------------------------------------------


def _feeds(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for name in graph.inputs:
        shape = tuple(d if isinstance(d, int) else 2 for d in graph.types[name].shape or ())
        out[name] = rng.standard_normal(shape).astype(np.float32)
    return out


def _run_graph(graph: Graph, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Export (folding weight transforms), check, and run on ONNX Runtime."""
    model = export(graph)
    onnx.checker.check_model(model, full_check=True)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, dict(inputs))


def assert_same_outputs(before: Graph, after: Graph, *, seed: int = 0, rtol: float = 1e-5) -> None:
    inputs = _feeds(before, seed)
    for a, b in zip(_run_graph(before, inputs), _run_graph(after, inputs), strict=True):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-5)


# ----- ModelProtos --------------------------------------------------------------------------------


def _session(model: onnx.ModelProto, disabled: Sequence[str]) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = 1
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"], disabled_optimizers=list(disabled)
    )


def run_on_ort(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    return _session(model, ORT_BROKEN_FUSIONS).run(None, inputs)


def loads_on_default_ort(model: onnx.ModelProto) -> bool:
    """Whether ORT with every transformer on (what users run) accepts the model."""
    try:
        _session(model, ())
    except Exception:  # noqa: BLE001  (ORT raises plain RuntimeError/Fail)
        return False
    return True


def _interface(model: onnx.ModelProto) -> list[tuple[str, bytes]]:
    values = list(model.graph.input) + list(model.graph.output)
    return [(v.name, v.type.SerializeToString(deterministic=True)) for v in values]


def assert_same_on_ort(model: onnx.ModelProto, optimized: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> None:
    """Valid, same interface, and the same outputs on ORT (relative to each output's scale)."""
    onnx.checker.check_model(optimized, full_check=True)
    assert _interface(optimized) == _interface(model)
    expected, actual = run_on_ort(model, inputs), run_on_ort(optimized, inputs)
    if loads_on_default_ort(model):  # taso must not turn a model ORT runs into one it rejects
        assert loads_on_default_ort(optimized), "the optimized model no longer loads on ORT's default settings"
    for name, want, got in zip([o.name for o in model.graph.output], expected, actual, strict=True):
        assert got.shape == want.shape, name
        scale = max(1.0, float(np.nanmax(np.abs(want)))) if want.size else 1.0
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * scale, equal_nan=True, err_msg=name)
