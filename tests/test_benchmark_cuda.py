"""`python -m benchmarks.cuda`: refused cleanly without a GPU; its table and shape spec."""

from __future__ import annotations

import pytest

from benchmarks import cuda
from taso.backends import OrtCudaBackend


@pytest.mark.skipif(OrtCudaBackend.available(), reason="a CUDA device is present")
def test_refused_without_a_gpu(tmp_path, capsys) -> None:  # noqa: ANN001
    assert cuda.main(["--corpus", str(tmp_path), "--models", "m"]) == 2
    assert "onnxruntime-gpu" in capsys.readouterr().err


def test_shape_spec_from_a_manifest() -> None:
    manifest = {"input_shapes": {"input_ids": [1, 128], "x": [1, 3, 48, 320]}}
    assert cuda._shape_spec(manifest) == "input_ids=1x128,x=1x3x48x320"
    assert cuda._shape_spec({}) == ""


def test_table_has_one_row_per_model() -> None:
    row = cuda.CudaRow("m", 3.19, 0.99, 1.0, 1.145, "r x2", 10.3, 3.9e-9, "passed", "converged")
    lines = cuda._table([row, row]).splitlines()
    assert len(lines) == 4 and "**1.145x**" in lines[2] and "0.990-1.000" in lines[2]
