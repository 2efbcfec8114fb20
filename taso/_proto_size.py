"""Serialized sizes of ONNX protos, without serializing their weights.

The upb protobuf runtime computes `ByteSize()` by encoding the message: on BERT-base
(340 MB of weights) one call takes 0.85 s, as long as `SerializeToString()`. Deciding
whether a model fits in one proto (2 GiB) or whether a tensor is small happens many
times per optimization, so those decisions use these bounds instead: a tensor's raw
bytes come from its dims and element type, and only the small messages are encoded.
"""

from __future__ import annotations

import math

import onnx

_VARINT_MAX_BYTES = 10
_TENSOR_OVERHEAD_BYTES = 64  # name, dims, type and field tags; generous


def tensor_byte_bound(tensor: onnx.TensorProto) -> int:
    """An upper bound of the tensor's serialized size (external data counts as 0)."""
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        return _TENSOR_OVERHEAD_BYTES + sum(len(e.key) + len(e.value) + 4 for e in tensor.external_data) + len(tensor.name)
    if not tensor.HasField("raw_data") or tensor.data_type == onnx.TensorProto.STRING:
        return tensor.ByteSize()  # typed fields (varints) or strings: rare, and small in practice
    try:
        itemsize = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    except (KeyError, ValueError, TypeError):  # an element type numpy cannot name
        return tensor.ByteSize()
    count = math.prod(tensor.dims)
    return _TENSOR_OVERHEAD_BYTES + len(tensor.name) + _VARINT_MAX_BYTES * len(tensor.dims) + count * itemsize


def model_byte_bound(model: onnx.ModelProto) -> int:
    """An upper bound of `model.ByteSize()` that encodes everything but the initializers."""
    graph = model.graph
    small = (*graph.node, *graph.input, *graph.output, *graph.value_info, *graph.sparse_initializer, *model.functions)
    return (
        sum(message.ByteSize() for message in small)
        + sum(tensor_byte_bound(tensor) for tensor in graph.initializer)
        + sum(entry.ByteSize() for entry in model.metadata_props)
        + len(graph.doc_string) + len(model.doc_string) + 1024
    )
