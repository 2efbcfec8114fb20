"""Counting what a built model holds: learnable parameters, nodes, serialized size."""

from __future__ import annotations

import numpy as np
import onnx

_BN_RUNNING_STATS = (3, 4)  # BatchNormalization inputs: X, scale, B, input_mean, input_var


def running_stat_names(model: onnx.ModelProto) -> set[str]:
    """Names of BatchNormalization running mean/variance initializers (buffers, not parameters)."""
    return {
        node.input[i]
        for node in model.graph.node
        if node.op_type == "BatchNormalization"
        for i in _BN_RUNNING_STATS
    }


def parameter_count(model: onnx.ModelProto) -> int:
    """Elements of float initializers, leaving out BN running statistics and scalars.

    This matches how torchvision and Keras count learnable parameters: conv and
    dense weights and biases, norm scales and shifts. Scalar constants such as
    the 3 and 6 of a decomposed HardSwish are not parameters.
    """
    buffers = running_stat_names(model)
    return sum(
        int(np.prod(init.dims))
        for init in model.graph.initializer
        if init.data_type == onnx.TensorProto.FLOAT
        and init.name not in buffers
        and len(init.dims) > 0
    )
