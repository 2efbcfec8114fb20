"""Dynamic shapes: models with symbolic batch / height / width optimize, keep their symbolic
dims, and compute the same at several concrete sizes.

Rules apply only where their shape constraints hold for every value of the symbols (a
rule that needs batch == 1 never fires on a symbolic batch, whatever the profile says);
costs are taken at the `shapes` profile (or the documented defaults of
`taso.backends.profiles`: batch-like symbols 1, other dims 32).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import onnx
import pytest

import taso
from tests.helpers.models import scaled_chain_model
from tests.helpers.ort import run_on_ort
from tests.helpers.rules import BATCH_ONE, FIXTURE_RULES, fuzz_rules

pytestmark = pytest.mark.ort

SYMBOLS_4D = ("batch", None, "height", "width")


def with_symbolic_dims(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with batch (and H/W for images) of every input and output made symbolic."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.value_info[:]
    for value in list(out.graph.input) + list(out.graph.output):
        dims = value.type.tensor_type.shape.dim
        image = len(dims) == 4 and value in out.graph.input
        for axis, dim in enumerate(dims):
            symbol = SYMBOLS_4D[axis] if image else ("batch" if axis == 0 else None)
            if symbol is not None:
                dim.Clear()
                dim.dim_param = symbol
    return out


def _symbolic_interface(model: onnx.ModelProto) -> list[list[object]]:
    return [[d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
            for v in list(model.graph.input) + list(model.graph.output)]


def _feeds(model: onnx.ModelProto, sizes: dict[str, int]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        v.name: rng.standard_normal([sizes.get(d.dim_param, d.dim_value) for d in v.type.tensor_type.shape.dim]).astype(np.float32)
        for v in model.graph.input
    }


@pytest.mark.parametrize("name", ["squeezenet1_1", "resnet50", "inception_v3", "nasrnn"])
def test_benchmark_models_with_symbolic_dims_optimize_and_keep_them(name: str) -> None:
    from benchmarks.models import MODELS, Size

    model = with_symbolic_dims(MODELS[name].build(Size.SMALL))
    onnx.checker.check_model(model, full_check=True)
    result = taso.optimize_onnx(model, backend="analytical", time_budget_s=3.0, check=False, rules=fuzz_rules(),
                                shapes="batch=2" if name == "nasrnn" else "batch=2,height=96,width=96")
    optimized = result.model
    onnx.checker.check_model(optimized, full_check=True)
    assert _symbolic_interface(optimized) == _symbolic_interface(model)
    smallest = 75 if name == "inception_v3" else 32  # Inception's stem needs >= 75 pixels
    for sizes in ({"batch": 1, "height": smallest, "width": smallest},
                  {"batch": 3, "height": smallest + 16, "width": smallest + 8}):
        feeds = _feeds(model, sizes)
        for want, got in zip(run_on_ort(model, feeds), run_on_ort(optimized, feeds), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_rule_that_needs_batch_one_never_fires_on_a_symbolic_batch() -> None:
    model = scaled_chain_model()  # input N x 3 x 8 x 8, a Relu(Relu(.)) chain
    batch_one = replace(BATCH_ONE, proof=FIXTURE_RULES[0].proof)
    result = taso.optimize_onnx(model, backend="analytical", time_budget_s=2.0, check=False, rules=[batch_one],
                                shapes="N=1")
    assert result.report.applied_rewrites == {}
    relu_relu = next(r for r in FIXTURE_RULES if r.id == "relu_relu")
    result = taso.optimize_onnx(model, backend="analytical", time_budget_s=2.0, check=False, rules=[relu_relu])
    assert result.report.applied_rewrites == {"relu_relu": 1}


def test_measured_costs_at_the_cli_shape_profile(tmp_path, monkeypatch) -> None:
    from taso.pipeline.cli import main
    from taso.substitutions.rule import RuleLibrary, dump_rules

    monkeypatch.setenv("TASO_CACHE_DIR", str(tmp_path / "cache"))
    source, out, rules = tmp_path / "in.onnx", tmp_path / "out.onnx", tmp_path / "rules.json"
    onnx.save_model(scaled_chain_model(), source)
    rules.write_text(dump_rules(RuleLibrary(FIXTURE_RULES)))
    code = main(["optimize", str(source), "-o", str(out), "--rules", str(rules), "--time-budget", "5",
                 "--shape", "x=2x3x8x8", "-q"])
    assert code == 0
    optimized = onnx.load(str(out))
    assert _symbolic_interface(optimized) == _symbolic_interface(scaled_chain_model())
