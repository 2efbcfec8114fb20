"""Weight transforms (internal nodes over constants) are folded into initializers at export."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper as nh

from taso._fold import fold_constants, has_internal_nodes
from taso._onnx_import import import_model
from taso.backends import run_model
from taso.errors import VerificationError
from taso.ir import INTERNAL_DOMAIN, Initializer, Node, TensorType
from taso.opspecs import evaluate_op
from taso.pipeline._export import export
from tests.helpers import models


def _scaled_conv_graph():
    """conv2 weight replaced by Mul(w2, Reshape(s)) expressed as internal nodes."""
    graph = import_model(models.conv_net())
    conv2_id, conv2 = next((i, n) for i, n in graph.nodes.items() if n.name == "conv2")
    scale = nh.from_array(np.linspace(0.5, 2.0, 8).astype(np.float32), "scale")
    init = Initializer("scale", TensorType(1, (8,)), scale)
    reshape = Node("Reshape", INTERNAL_DOMAIN, ("scale",), ("scale_r",), (("allowzero", 0), ("shape", (-1, 1, 1, 1))))
    mul = Node("Mul", INTERNAL_DOMAIN, ("w2", "scale_r"), ("w2_scaled",))
    new_conv = Node("Conv", "", ("r1", "w2_scaled"), conv2.outputs, name="conv2")
    return graph, graph.rewrite(remove=[conv2_id], add=[reshape, mul, new_conv], initializers=[init])


@pytest.mark.ort
def test_internal_nodes_fold_to_initializers_and_compute_the_transform() -> None:
    original, rewritten = _scaled_conv_graph()
    assert has_internal_nodes(rewritten)
    folded = fold_constants(rewritten, evaluate_op)
    assert not has_internal_nodes(folded)
    w2 = original.initializers["w2"].array()
    expected = w2 * np.linspace(0.5, 2.0, 8).astype(np.float32).reshape(-1, 1, 1, 1)
    np.testing.assert_allclose(folded.initializers["w2_scaled"].array(), expected, rtol=1e-6)
    model = export(rewritten)
    onnx.checker.check_model(model, full_check=True)
    assert {t.name for t in model.graph.initializer} == {"w1", "b1", "bias", "w2_scaled"}
    x = {"x": np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)}
    assert run_model(model, x)["y"].shape == (1, 8, 1, 1)


def test_folding_a_non_constant_is_refused() -> None:
    graph = import_model(models.conv_net())
    bad = Node("Relu", INTERNAL_DOMAIN, ("x",), ("xr",))
    with pytest.raises(VerificationError, match="not a constant"):
        fold_constants(graph.rewrite(add=[bad]), evaluate_op)


def test_a_scalar_folds_to_a_scalar() -> None:
    """Two rank-0 constants summed (TorchScript's 'same' padding arithmetic, reassociated)
    fold to a rank-0 initializer: a (1,)-shaped one broadcast the padding to rank 1 and ORT
    refused the model (tf_efficientnet_b0: "All inputs to Concat must have same rank")."""
    graph = import_model(models.conv_net())
    scalars = [Initializer(name, TensorType(1, ()), nh.from_array(np.array(v, np.float32), name))
               for name, v in (("two", 2.0), ("one", 1.0))]
    add = Node("Add", INTERNAL_DOMAIN, ("two", "one"), ("three",))
    read = Node("Mul", "", ("y", "three"), ("y3",))
    folded = fold_constants(graph.rewrite(add=[add, read], initializers=scalars), evaluate_op)
    three = folded.initializers["three"]
    assert three.type.shape == () and tuple(three.proto.dims) == () and float(three.array()) == 3.0
