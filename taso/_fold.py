"""Fold weight transforms: internal-domain nodes over constants become initializers.

Rewrites that change weights (scale a conv kernel per channel, concatenate kernels,
enlarge a kernel) do not touch arrays during the search: they add nodes of the domain
`taso.internal` whose inputs are constants. Before export, each such node is evaluated
once with its spec's NumPy semantics (the same semantics the axioms were checked
against) and replaced by an initializer carrying the node's output name.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from taso.errors import VerificationError
from taso.ir import INTERNAL_DOMAIN, Graph, Initializer, Node, TensorType


def has_internal_nodes(graph: Graph) -> bool:
    return any(node.domain == INTERNAL_DOMAIN for node in graph.nodes.values())


def fold_constants(graph: Graph) -> Graph:
    """A graph without internal nodes; raises VerificationError if one reads a non-constant."""
    if not has_internal_nodes(graph):
        return graph
    from taso.opspecs import spec_by_name

    folded: dict[str, np.ndarray] = {}
    new_inits: list[Initializer] = []
    remove: list[int] = []
    for node_id in graph.topological_order:
        node = graph.nodes[node_id]
        if node.domain != INTERNAL_DOMAIN:
            continue
        arrays = [_constant(graph, folded, name, node) for name in node.inputs]
        outputs = spec_by_name(node.op_type).evaluate(arrays, dict(node.attributes))
        for name, array in zip(node.outputs, outputs, strict=True):
            folded[name] = _typed(graph, name, array)
            new_inits.append(_initializer(name, folded[name]))
        remove.append(node_id)
    return graph.rewrite(remove=remove, initializers=new_inits, types={i.name: i.type for i in new_inits})


def _constant(graph: Graph, folded: dict[str, np.ndarray], name: str, node: Node) -> np.ndarray:
    from taso.substitutions.matching import is_constant

    if name in folded:
        return folded[name]
    if not is_constant(graph, name):
        raise VerificationError(f"weight transform {node.op_type} reads '{name}', which is not a constant")
    init = graph.initializers.get(name)
    if init is not None:
        return init.array()
    producer = graph.nodes[graph.producers[name][0]]
    value = producer.attr("value")
    if producer.op_type == "Constant" and isinstance(value, onnx.AttributeProto):
        return numpy_helper.to_array(value.t)
    raise VerificationError(f"weight transform {node.op_type} reads '{name}', whose value cannot be read")


def _typed(graph: Graph, name: str, array: np.ndarray) -> np.ndarray:
    """Cast to the element type the rewrite declared for this value (constants default to float32)."""
    known = graph.types.get(name)
    if known is None or not known.elem_type:
        return np.asarray(array)
    return np.asarray(array).astype(onnx.helper.tensor_dtype_to_np_dtype(known.elem_type), copy=False)


def _initializer(name: str, array: np.ndarray) -> Initializer:
    proto = numpy_helper.from_array(np.ascontiguousarray(array), name)
    return Initializer(name=name, type=TensorType(proto.data_type, tuple(array.shape)), proto=proto)
