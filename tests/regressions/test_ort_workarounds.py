"""ORT bugs the fuzz oracle works around, each pinned by a minimal model.

`tests.helpers.ort.run_on_ort` disables the transformers listed in
`ORT_BROKEN_FUSIONS`. These tests show why (the bug reproduces on the model *before* taso
touches it) and that the oracle then runs the model correctly. When an ORT upgrade fixes
a bug, its `..._still_broken` test skips and says the workaround can go.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as h
from onnx import numpy_helper as nh

from tests.helpers.ort import ORT_BROKEN_FUSIONS, loads_on_default_ort, run_on_ort

pytestmark = pytest.mark.ort


def _conv_add_with_output_read_by_add() -> onnx.ModelProto:
    """a = Conv(x) (group 2, bias) is a graph output and is also read by s = Conv'(x) + a.

    Shrunk from the fuzz case `graph_output_lost_in_conv_branches`: no taso rewrite involved.
    """
    inits = [nh.from_array(np.full((2, 1, 1, 1), v, np.float32), n) for n, v in (("w", 2.0), ("w2", 3.0))]
    inits += [nh.from_array(np.array([0.5, -0.5], np.float32), n) for n in ("b", "b2")]
    nodes = [
        h.make_node("Conv", ["x", "w", "b"], ["a"], group=2),
        h.make_node("Conv", ["x", "w2", "b2"], ["c"], group=2),
        h.make_node("Add", ["c", "a"], ["s"]),
    ]
    value = lambda name: h.make_tensor_value_info(name, TensorProto.FLOAT, [1, 2, 3, 3])  # noqa: E731
    graph = h.make_graph(nodes, "conv_add", [value("x")], [value("s"), value("a")], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=10)
    onnx.checker.check_model(model, full_check=True)
    return model


def test_oracle_runs_conv_add_whose_conv_output_is_a_graph_output() -> None:
    x = np.arange(18, dtype=np.float32).reshape(1, 2, 3, 3)
    s, a = run_on_ort(_conv_add_with_output_read_by_add(), {"x": x})
    bias = np.array([0.5, -0.5], np.float32).reshape(1, 2, 1, 1)
    np.testing.assert_allclose(a, 2 * x + bias, rtol=1e-6)
    np.testing.assert_allclose(s, 5 * x + 2 * bias, rtol=1e-6)  # both convs share the bias values


def test_ort_conv_add_fusion_still_broken() -> None:
    if loads_on_default_ort(_conv_add_with_output_read_by_add()):
        pytest.skip(f"this ORT loads the model: drop {ORT_BROKEN_FUSIONS} from the fuzz oracle")
    assert "ConvAddActivationFusion" in ORT_BROKEN_FUSIONS
