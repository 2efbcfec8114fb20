"""The GFLOP/s table: FLOPs counted from the graph, latency measured, one row per model."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

from benchmarks.throughput import Throughput, measure, to_markdown
from tests.helpers import models


@pytest.mark.ort
def test_flops_are_counted_from_the_graph(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    onnx.save_model(models.conv_net(channels=8), path)
    row = measure("conv_net", path, threads=1, repeats=2)
    x = next(v for v in onnx.load(str(path)).graph.input if v.name == "x")
    height, width = (d.dim_value for d in x.type.tensor_type.shape.dim[2:])
    conv1 = 2 * 8 * height * width * 3 * 3 * 3  # 3x3 conv, padded: same size out
    conv2 = 2 * 8 * height * width * 8
    relu_add_pool = 3 * 8 * height * width  # one per element each
    expected = conv1 + conv2 + relu_add_pool
    assert abs(row.gflop * 1e9 - expected) < 1e-6 * expected
    assert row.latency_ms > 0


def test_table_gives_the_share_of_the_peak() -> None:
    table = to_markdown([Throughput("m", 1.7, 20.0)], peak=170.0, threads=2)
    assert "| m | 1.70 | 20.0 | 85 | 50% |" in table and "170 GFLOP/s" in table


@pytest.mark.ort
def test_the_peak_is_that_of_a_large_matmul() -> None:
    from benchmarks.throughput import gemm_peak

    assert gemm_peak(threads=1, repeats=2, size=256) > 1.0  # GFLOP/s: far above any per-op overhead
